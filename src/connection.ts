/**
 * Temporal connections: the client, every CLI command, the worker and the search-attribute registration
 * connect with the settings of src/connection-settings.ts, and a failed connection is explained in one line
 * that names the setting to change. (The worker's `NativeConnection` is made in worker.ts, so that a client
 * never loads `@temporalio/worker`.)
 */
import { Connection, type ConnectionOptions } from '@temporalio/client';
import tls from 'node:tls';
import { configError, TreadleError } from './client/treadle-error';
import type { TemporalSettings } from './connection-settings';

export * from './connection-settings';

/** How long a connection may take before it counts as failed. */
const CONNECT_TIMEOUT_MS = 5_000;

/** Connects a client (`@temporalio/client`), or throws one line naming the setting to fix. */
export async function connectClient(
  settings: TemporalSettings,
  extra: Omit<ConnectionOptions, 'address' | 'tls' | 'apiKey'> = {},
): Promise<Connection> {
  // Connection.connect checks the server with GetSystemInfo before it returns. grpc-js retries a failed TLS
  // handshake until the deadline without saying why, so after a second a handshake of our own asks why.
  const connecting = Connection.connect({ connectTimeout: CONNECT_TIMEOUT_MS, ...extra, ...settings.options });
  let timer: NodeJS.Timeout | undefined;
  const diagnosis = new Promise<Cause>((resolve) => {
    timer = setTimeout(() => void probeTls(settings).then((cause) => cause && resolve(cause)), EARLY_PROBE_MS);
  });
  try {
    const outcome = await Promise.race([
      connecting.then((c) => ({ connection: c })),
      diagnosis.then((cause) => ({ cause })),
    ]);
    if ('connection' in outcome) return outcome.connection;
    // The channel gives up at its deadline; its failure is already explained.
    connecting.then((c) => c.close()).catch(() => undefined);
    throw failureFor(outcome.cause, settings);
  } catch (error) {
    if (error instanceof TreadleError) throw error;
    throw await connectFailure(error, settings);
  } finally {
    clearTimeout(timer);
  }
}

/** How long a client connection may take before a TLS handshake of our own looks for the reason. */
const EARLY_PROBE_MS = 1_000;

/** The one-line error for a failed connection: a `config` error when a setting is wrong, else `unreachable`. */
export async function connectFailure(error: unknown, settings: TemporalSettings): Promise<TreadleError> {
  const text = errorText(error);
  const cause = classify(text) ?? (await probeTls(settings));
  if (cause) return failureFor(cause, settings);
  const first = text.split('\n')[0] ?? text;
  return new TreadleError(
    `cannot reach the Temporal server at ${settings.address}: ${first} (start one with "treadle dev", or set TEMPORAL_ADDRESS or a temporal.toml profile)`,
    'unreachable',
  );
}

function failureFor(cause: Cause, settings: TemporalSettings): TreadleError {
  const where = `the Temporal server at ${settings.address}`;
  const fix = FIXES[cause](settings);
  if (cause === 'refused') return new TreadleError(`cannot reach ${where}: ${fix}`, 'unreachable');
  return configError(`cannot connect to ${where}: ${fix}`);
}

type Cause =
  | 'refused'
  | 'unknown-ca'
  | 'wrong-name'
  | 'needs-tls'
  | 'not-tls'
  | 'api-key'
  | 'client-cert'
  | 'client-cert-rejected';

const FIXES: Record<Cause, (s: TemporalSettings) => string> = {
  refused: (s) =>
    `nothing listens there (start one with "treadle dev", or check TEMPORAL_ADDRESS${s.profile ? ` and profile ${s.profile}'s address` : ''})`,
  'unknown-ca': () =>
    "its certificate is not signed by a CA this machine trusts: set TEMPORAL_TLS_SERVER_CA_CERT_PATH (or the profile's tls.server_ca_cert_path) to the CA that signed it",
  'wrong-name': () =>
    "its certificate is not for that name: set TEMPORAL_TLS_SERVER_NAME (or the profile's tls.server_name) to a name the certificate lists",
  'needs-tls': () =>
    'it expects TLS: set TEMPORAL_TLS=true (with TEMPORAL_TLS_SERVER_CA_CERT_PATH for a private CA), or TEMPORAL_API_KEY',
  'not-tls': () =>
    'it does not speak TLS: unset TEMPORAL_TLS and the TEMPORAL_TLS_* settings (an API key turns TLS on; TEMPORAL_TLS=false turns it off)',
  'api-key': (s) =>
    s.options.apiKey
      ? "it refused the API key (401 Unauthorized): check TEMPORAL_API_KEY (or the profile's api_key)"
      : 'it asks for an API key (401 Unauthorized): set TEMPORAL_API_KEY',
  'client-cert': () =>
    "it asks for a client certificate (mTLS): set TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH (or the profile's tls.client_cert_path and tls.client_key_path)",
  'client-cert-rejected': () =>
    'it refused the client certificate: check TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH (a certificate its CA signed, with its key)',
};

/** The error's message and its causes', which is where grpc-js and the Rust core put what happened. */
function errorText(error: unknown): string {
  const parts: string[] = [];
  let current: unknown = error;
  for (let depth = 0; current && depth < 5; depth++) {
    const e = current as { message?: string; details?: string; cause?: unknown };
    if (e.message) parts.push(e.message);
    if (e.details) parts.push(e.details);
    current = e.cause;
  }
  return parts.join(' | ') || String(error);
}

/** Reads the cause from what the SDK said, when it said enough (the Rust core does; grpc-js often does not). */
function classify(text: string): Cause | undefined {
  if (/ConnectionRefused|ECONNREFUSED|Connection refused/i.test(text)) return 'refused';
  if (/UNAUTHENTICATED|401 Unauthorized|status code 401/i.test(text)) return 'api-key';
  if (/400 Bad Request|status code 400|CertificateRequired|certificate required/i.test(text)) return 'client-cert';
  if (/UnknownIssuer|unable to verify|self[- ]signed|UNABLE_TO_GET_ISSUER/i.test(text)) return 'unknown-ca';
  if (/NotValidForName|altnames|ERR_TLS_CERT_ALTNAME_INVALID/i.test(text)) return 'wrong-name';
  if (/InvalidContentType|wrong version number|packet length too long/i.test(text)) return 'not-tls';
  if (/BadCertificate|bad certificate|UnknownCA alert|unknown ca/i.test(text)) return 'client-cert-rejected';
  return undefined;
}

/**
 * grpc-js reports a failed TLS handshake only as "Failed to connect before the deadline"; a plain TLS
 * handshake with the same settings says why. Nothing is sent after the handshake.
 */
async function probeTls(settings: TemporalSettings): Promise<Cause | undefined> {
  const { host, port } = splitAddress(settings.address);
  const tlsConfig = settings.options.tls;
  const config = typeof tlsConfig === 'object' && tlsConfig ? tlsConfig : {};
  const servername = config.serverNameOverride ?? (isIp(host) ? undefined : host);
  const attempt = (secure: boolean) =>
    new Promise<{ ok: boolean; code?: string; message?: string }>((resolve) => {
      const socket = tls.connect({
        host,
        port,
        ...(servername ? { servername } : {}),
        ALPNProtocols: ['h2'],
        rejectUnauthorized: secure,
        ...(config.serverRootCACertificate ? { ca: Buffer.from(config.serverRootCACertificate) } : {}),
        ...(config.clientCertPair
          ? { cert: Buffer.from(config.clientCertPair.crt), key: Buffer.from(config.clientCertPair.key) }
          : {}),
      });
      const done = (result: { ok: boolean; code?: string; message?: string }) => {
        clearTimeout(timer);
        socket.destroy();
        resolve(result);
      };
      const timer = setTimeout(() => done({ ok: false, code: 'ETIMEDOUT' }), 3_000);
      socket.once('secureConnect', () => done({ ok: true }));
      socket.once('error', (error: NodeJS.ErrnoException) =>
        done({ ok: false, code: error.code, message: error.message }),
      );
    });
  const secured = Boolean(tlsConfig) || Boolean(settings.options.apiKey);
  if (!secured) {
    // Plaintext failed: a server that completes a TLS handshake wanted TLS.
    const probe = await attempt(false);
    return probe.ok ? 'needs-tls' : probe.code === 'ECONNREFUSED' ? 'refused' : undefined;
  }
  const probe = await attempt(true);
  if (probe.ok) return undefined;
  return classify(`${probe.code ?? ''} ${probe.message ?? ''}`) ?? (probe.code === 'EPROTO' ? 'not-tls' : undefined);
}

function splitAddress(address: string): { host: string; port: number } {
  const bracketed = /^\[(.*)\]:(\d+)$/.exec(address);
  if (bracketed) return { host: bracketed[1] ?? '', port: Number(bracketed[2]) };
  const at = address.lastIndexOf(':');
  return at < 0 ? { host: address, port: 7233 } : { host: address.slice(0, at), port: Number(address.slice(at + 1)) };
}

function isIp(host: string): boolean {
  return /^[\d.]+$/.test(host) || host.includes(':');
}
