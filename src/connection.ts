/**
 * Temporal connections, configured the way every Temporal tool is (`@temporalio/envconfig`): the `TEMPORAL_*`
 * environment variables over the active profile of `temporal.toml` (`TEMPORAL_CONFIG_FILE`, else
 * `~/.config/temporalio/temporal.toml`; `TEMPORAL_PROFILE`, else `default`). The client, the CLI, the worker
 * and the search-attribute registration all connect through here, and a failed connection is explained in
 * one line that names the setting to change. (The worker's `NativeConnection` is made in worker.ts, so that a
 * client never loads `@temporalio/worker`.)
 */
import { Connection, type ConnectionOptions } from '@temporalio/client';
import { loadClientConnectConfig } from '@temporalio/envconfig';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { TreadleError } from './client/errors';

export const DEFAULT_ADDRESS = 'localhost:7233';
export const DEFAULT_NAMESPACE = 'default';

/** Where to reach Temporal and how, as configured. Secrets stay in `options`; `summary` never shows them. */
export interface TemporalSettings {
  address: string;
  namespace: string;
  /** Whether an address was configured (environment or profile): `treadle dev` then starts no server. */
  configured: boolean;
  /** What `Connection.connect` and `NativeConnection.connect` take. */
  options: {
    address: string;
    apiKey?: string;
    tls?: ConnectionOptions['tls'];
    metadata?: Record<string, string>;
  };
  /** The profile read, when a config file had one. */
  profile?: string;
  /** The config file consulted (it may not exist). */
  configFile: string;
  /** For logs: the address, namespace and what secures the connection; never a key or a certificate. */
  summary: string;
}

/** Settings for a local, plaintext dev server (one `treadle dev` started or found on its port). */
export function localServerSettings(address: string, namespace: string): TemporalSettings {
  return {
    address,
    namespace,
    configured: false,
    options: { address },
    configFile: temporalConfigFile(),
    summary: `${address}, namespace ${namespace} (local dev server, plaintext)`,
  };
}

/** A setting that cannot work as given: the CLI exits 2 for these. */
export function configError(message: string): TreadleError {
  return new TreadleError(message, 'config');
}

/** The `temporal.toml` the settings come from: `TEMPORAL_CONFIG_FILE`, else the per-user default. */
export function temporalConfigFile(env: NodeJS.ProcessEnv = process.env): string {
  if (env.TEMPORAL_CONFIG_FILE) return env.TEMPORAL_CONFIG_FILE;
  const base = env.XDG_CONFIG_HOME || path.join(os.homedir(), '.config');
  return path.join(base, 'temporalio', 'temporal.toml');
}

/**
 * Reads the connection settings. Throws a `config` {@link TreadleError} naming the setting when the profile
 * is missing, the file is malformed or a certificate file cannot be read.
 */
export function temporalSettings(environment: NodeJS.ProcessEnv = process.env): TemporalSettings {
  // An empty variable means unset, as it always has for Treadle (envconfig would take "" as the address).
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(environment)) if (value !== undefined && value !== '') env[key] = value;
  const configFile = temporalConfigFile(env);
  if (truthy(env.TEMPORAL_TLS_DISABLE_HOST_VERIFICATION)) {
    // envconfig reads this and drops it; a silently verified connection would be the opposite of what was asked.
    throw configError(
      'TEMPORAL_TLS_DISABLE_HOST_VERIFICATION is not supported by the TypeScript SDK: set TEMPORAL_TLS_SERVER_NAME to the name in the server certificate instead',
    );
  }
  let loaded: ReturnType<typeof loadClientConnectConfig>;
  try {
    loaded = loadClientConnectConfig({ overrideEnvVars: env });
  } catch (error) {
    throw configError(explainLoadError(error as NodeJS.ErrnoException, env, configFile));
  }
  const options = loaded.connectionOptions;
  const address = options.address || DEFAULT_ADDRESS;
  const namespace = loaded.namespace || DEFAULT_NAMESPACE;
  const profile = env.TEMPORAL_PROFILE;
  const out: TemporalSettings = {
    address,
    namespace,
    configured: Boolean(options.address),
    options: { address },
    configFile,
    summary: '',
  };
  if (profile) out.profile = profile;
  if (options.apiKey) out.options.apiKey = options.apiKey;
  if (options.tls !== undefined && options.tls !== null) out.options.tls = options.tls as ConnectionOptions['tls'];
  // envconfig's metadata comes from TEMPORAL_GRPC_META_* and the profile's grpc_meta: strings both.
  if (options.metadata && Object.keys(options.metadata).length)
    out.options.metadata = options.metadata as Record<string, string>;
  out.summary = summarize(out);
  return out;
}

function truthy(value: string | undefined): boolean {
  return value !== undefined && ['1', 'true', 'yes', 'on'].includes(value.trim().toLowerCase());
}

function summarize(s: TemporalSettings): string {
  const tlsConfig = s.options.tls;
  const secured: string[] = [];
  if (tlsConfig) {
    secured.push(typeof tlsConfig === 'object' && tlsConfig.clientCertPair ? 'mTLS' : 'TLS');
  }
  if (s.options.apiKey) secured.push('API key');
  const from = s.profile ? `profile ${s.profile}` : undefined;
  const extra = [from, ...(secured.length ? secured : ['plaintext'])].filter(Boolean).join(', ');
  return `${s.address}, namespace ${s.namespace} (${extra})`;
}

/** The environment variable behind each TLS file a profile or the environment may name. */
const FILE_SETTINGS: Array<[string, string]> = [
  ['TEMPORAL_TLS_CLIENT_CERT_PATH', 'client_cert_path'],
  ['TEMPORAL_TLS_CLIENT_KEY_PATH', 'client_key_path'],
  ['TEMPORAL_TLS_SERVER_CA_CERT_PATH', 'server_ca_cert_path'],
];

function explainLoadError(error: NodeJS.ErrnoException, env: Record<string, string>, configFile: string): string {
  const message = error.message.split('\n')[0] ?? String(error);
  const notFound = /^Profile '(.*)' not found/.exec(message);
  if (notFound) {
    return `TEMPORAL_PROFILE=${notFound[1]}: no such profile in ${configFile} (set TEMPORAL_CONFIG_FILE or TEMPORAL_PROFILE)`;
  }
  if (error.code === 'ENOENT' || error.code === 'EACCES') {
    const file = error.path ?? '';
    const byEnv = FILE_SETTINGS.find(([variable]) => env[variable] === file);
    const setting = byEnv ? byEnv[0] : `the profile's tls.${FILE_SETTINGS.map(([, key]) => key).join(' / tls.')}`;
    return `cannot read ${file} (${error.code === 'ENOENT' ? 'no such file' : 'permission denied'}), named by ${setting}`;
  }
  return `the Temporal config file ${configFile}: ${message} (TEMPORAL_CONFIG_FILE, TEMPORAL_PROFILE)`;
}

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
  return new TreadleError(`cannot connect to ${where}: ${fix}`, 'config');
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
