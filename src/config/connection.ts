/**
 * Temporal connections: the client, every CLI command, the worker and the search-attribute registration
 * connect with the settings of src/config/connection-settings.ts, and a failed connection is explained in one line
 * that names the setting to change. (The worker's `NativeConnection` is made in worker.ts, so that a client
 * never loads `@temporalio/worker`.)
 */
import { Connection, type ConnectionOptions } from '@temporalio/client';
import tls from 'node:tls';
import { configError, TreadleError } from './errors';
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
  const diagnosed = new Promise<Diagnosis>((resolve) => {
    timer = setTimeout(() => void probeTls(settings).then((found) => found && resolve(found)), EARLY_PROBE_MS);
  });
  try {
    const outcome = await Promise.race([
      connecting.then((c) => ({ connection: c })),
      diagnosed.then((diagnosis) => ({ diagnosis })),
    ]);
    if ('connection' in outcome) return outcome.connection;
    // The channel gives up at its deadline; its failure is already explained.
    connecting.then((c) => c.close()).catch(() => undefined);
    throw failureFor(outcome.diagnosis, settings);
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
  const diagnosis = classify(text, settings) ?? (await probeTls(settings));
  if (diagnosis) return failureFor(diagnosis, settings);
  const first = text.split('\n')[0] ?? text;
  return new TreadleError(
    `cannot reach the Temporal server at ${settings.address}: ${first} (start one with "treadle dev", or set TEMPORAL_ADDRESS or a temporal.toml profile)`,
    'unreachable',
  );
}

function failureFor(diagnosis: Diagnosis, settings: TemporalSettings, verb = 'connect to'): TreadleError {
  const where = `the Temporal server at ${settings.address}`;
  const fix = FIXES[diagnosis.cause](settings, diagnosis.said ?? '');
  if (diagnosis.cause === 'refused') return new TreadleError(`cannot reach ${where}: ${fix}`, 'unreachable');
  return configError(`cannot ${verb} ${where}: ${fix}`);
}

/**
 * A call refused after the connection was made (a proxy may let the connection check through, and Temporal
 * answers PERMISSION_DENIED to a key without access to the namespace) as the same one-line `config` error a
 * refused connection gives; undefined for any other failure. Only a gRPC status is read, never the text of,
 * say, a workflow's failure.
 */
export function refusedCredentials(error: unknown, settings: TemporalSettings): TreadleError | undefined {
  const status = grpcStatusText(error);
  const diagnosis = status === undefined ? undefined : classify(status, settings);
  if (diagnosis?.cause !== 'unauthenticated' && diagnosis?.cause !== 'forbidden') return undefined;
  return failureFor(diagnosis, settings, 'use');
}

/** gRPC statuses of a server that is there but cannot do the call now, by name. */
const SERVER_TROUBLE: Readonly<Record<number, string>> = { 4: 'DEADLINE_EXCEEDED', 13: 'INTERNAL', 14: 'UNAVAILABLE' };

/**
 * A call that failed because the server could not do it now (UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL anywhere in
 * the error's causes: a server restarting, or one that cannot reach its database) as one line that says so and
 * what to do (exit 1); undefined for any other failure. A command that reads changed nothing. One that decides
 * may have been taken before the server failed (Temporal may apply an update whose answer never came), so the line
 * says so; running it again is safe, since the same decision sent again gets the first one's answer
 * (repeated-updates.ts) and a different one is refused as already decided.
 */
export function serverTrouble(error: unknown, settings: TemporalSettings): TreadleError | undefined {
  const trouble = serverTroubleStatus(error);
  if (!trouble) return undefined;
  return new TreadleError(
    `the Temporal server at ${settings.address} could not do this now (${trouble.name}${trouble.said ? `: ${trouble.said}` : ''}); it may be restarting or unable to reach its database: run the command again once it answers (a decision it took before failing is not taken twice)`,
    'server_unavailable',
  );
}

/** The gRPC status (UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL) of a server that could not do a call now, in an error's causes. */
export function serverTroubleStatus(error: unknown): { name: string; said: string } | undefined {
  let current: unknown = error;
  for (let depth = 0; current && depth < 5; depth++) {
    const e = current as { code?: unknown; details?: string; message?: string; cause?: unknown };
    const name = typeof e.code === 'number' ? SERVER_TROUBLE[e.code] : undefined;
    if (name) return { name, said: (e.details || e.message || '').split('\n')[0]! };
    current = e.cause;
  }
  return undefined;
}

/**
 * The text of a gRPC UNAUTHENTICATED or PERMISSION_DENIED status in an error's causes: grpc-js's (a numeric
 * `code`, an HTTP 401/403 from a proxy included) or the Rust core's (`Status { code: PermissionDenied, … }`,
 * or an HTTP 401/403 it could not read as gRPC).
 */
function grpcStatusText(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; current && depth < 5; depth++) {
    const e = current as { message?: string; details?: string; code?: unknown; cause?: unknown };
    if (e.code === GRPC_PERMISSION_DENIED || e.code === GRPC_UNAUTHENTICATED) return errorText(e);
    if (/Status \{ code: (PermissionDenied|Unauthenticated)\b|response with status: 40[13]\b/.test(e.message ?? ''))
      return e.message;
    current = e.cause;
  }
  return undefined;
}

const GRPC_PERMISSION_DENIED = 7;
const GRPC_UNAUTHENTICATED = 16;

type Cause =
  | 'refused'
  | 'unknown-ca'
  | 'wrong-name'
  | 'needs-tls'
  | 'not-tls'
  | 'unauthenticated'
  | 'forbidden'
  | 'client-cert'
  | 'client-cert-rejected';

/** Why a connection failed, and for a refused credential what the server or its proxy answered. */
interface Diagnosis {
  cause: Cause;
  /** The answer, e.g. `403 Forbidden` or `PERMISSION_DENIED: Request unauthorized.` */
  said?: string;
}

const API_KEY = "TEMPORAL_API_KEY (or the profile's api_key)";
const CLIENT_CERT =
  "TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH (or the profile's tls.client_cert_path and tls.client_key_path)";

const FIXES: Record<Cause, (s: TemporalSettings, said: string) => string> = {
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
  unauthenticated: (s, said) => credentialFix(s, said, 'it asks for an API key', `set ${API_KEY}`),
  forbidden: (s, said) =>
    credentialFix(
      s,
      said,
      'it refuses callers without credentials',
      `set ${API_KEY}, or a client certificate with ${CLIENT_CERT}`,
      `; it must grant access to namespace ${s.namespace}`,
    ),
  'client-cert': () => `it asks for a client certificate (mTLS): set ${CLIENT_CERT}`,
  'client-cert-rejected': (_s, said) =>
    `it refused the client certificate (${said ? `${said}: ` : ''}revoked, expired or not signed by a CA it trusts): check ${CLIENT_CERT}`,
};

/**
 * The fix for credentials the server (or a proxy in front of it) refused: the ones that were sent, or
 * `unsent`/`set` when none were. `scope` follows a credential that was accepted but may not do this.
 */
function credentialFix(s: TemporalSettings, said: string, unsent: string, set: string, scope = ''): string {
  const cert = sendsClientCert(s);
  const key = Boolean(s.options.apiKey);
  if (key && cert)
    return `it refused the API key or the client certificate (${said}): check ${API_KEY}${scope}, and ${CLIENT_CERT}`;
  if (key) return `it refused the API key (${said}): check ${API_KEY}${scope}`;
  if (cert)
    return `it refused the client certificate (${said}): check ${CLIENT_CERT}${scope} (or set ${API_KEY} if it wants a key)`;
  return `${unsent} (${said}): ${set}`;
}

function sendsClientCert(settings: TemporalSettings): boolean {
  const tlsConfig = settings.options.tls;
  return typeof tlsConfig === 'object' && tlsConfig !== null && Boolean(tlsConfig.clientCertPair);
}

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

/**
 * Reads the cause from what the SDK said, when it said enough (the Rust core does; grpc-js often does not).
 * A proxy's HTTP status comes first: grpc-js reports HTTP 403 as PERMISSION_DENIED too.
 */
function classify(text: string, settings: TemporalSettings): Diagnosis | undefined {
  if (/ConnectionRefused|ECONNREFUSED|Connection refused/i.test(text)) return { cause: 'refused' };
  if (/status code 401|401 Unauthorized/i.test(text)) return { cause: 'unauthenticated', said: '401 Unauthorized' };
  if (/status code 403|403 Forbidden/i.test(text)) return { cause: 'forbidden', said: '403 Forbidden' };
  const denied = grpcRefusal(text);
  if (denied) return denied;
  if (/400 Bad Request|status code 400/i.test(text)) {
    // nginx answers a missing client certificate and a refused one (revoked, unknown CA) alike: "400 Bad Request".
    return sendsClientCert(settings)
      ? { cause: 'client-cert-rejected', said: '400 Bad Request' }
      : { cause: 'client-cert' };
  }
  if (/CertificateRequired|certificate required/i.test(text)) return { cause: 'client-cert' };
  if (/UnknownIssuer|unable to verify|self[- ]signed|UNABLE_TO_GET_ISSUER/i.test(text)) return { cause: 'unknown-ca' };
  if (/NotValidForName|altnames|ERR_TLS_CERT_ALTNAME_INVALID/i.test(text)) return { cause: 'wrong-name' };
  if (/InvalidContentType|wrong version number|packet length too long/i.test(text)) return { cause: 'not-tls' };
  if (
    /BadCertificate|bad certificate|UnknownCA alert|unknown ca|CertificateRevoked|alert certificate revoked/i.test(text)
  )
    return { cause: 'client-cert-rejected' };
  return undefined;
}

/**
 * A gRPC UNAUTHENTICATED or PERMISSION_DENIED status with the server's message, as grpc-js says it
 * (`7 PERMISSION_DENIED: Request unauthorized.`) or the Rust core does (tonic's description of the code).
 */
function grpcRefusal(text: string): Diagnosis | undefined {
  const statuses: Array<[Cause, string, RegExp]> = [
    [
      'unauthenticated',
      'UNAUTHENTICATED',
      /\b16 UNAUTHENTICATED: ([^|]*)|(?:valid authentication credentials'|code: Unauthenticated), message: "([^"]*)"/,
    ],
    [
      'forbidden',
      'PERMISSION_DENIED',
      /\b7 PERMISSION_DENIED: ([^|]*)|(?:permission to execute the specified operation'|code: PermissionDenied), message: "([^"]*)"/,
    ],
  ];
  for (const [cause, name, pattern] of statuses) {
    const match = pattern.exec(text);
    if (!match) continue;
    const message = (match[1] ?? match[2] ?? '').trim();
    return { cause, said: message ? `${name}: ${message}` : name };
  }
  return undefined;
}

/**
 * grpc-js reports a failed TLS handshake only as "Failed to connect before the deadline"; a plain TLS
 * handshake with the same settings says why. Nothing is sent after the handshake.
 */
async function probeTls(settings: TemporalSettings): Promise<Diagnosis | undefined> {
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
    if (probe.ok) return { cause: 'needs-tls' };
    return probe.code === 'ECONNREFUSED' ? { cause: 'refused' } : undefined;
  }
  const probe = await attempt(true);
  if (probe.ok) return undefined;
  return (
    classify(`${probe.code ?? ''} ${probe.message ?? ''}`, settings) ??
    (probe.code === 'EPROTO' ? { cause: 'not-tls' } : undefined)
  );
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
