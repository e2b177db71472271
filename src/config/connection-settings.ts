/**
 * Where Temporal is and how to reach it, configured the way every Temporal tool is (`@temporalio/envconfig`):
 * the `TEMPORAL_*` environment variables over the active profile of `temporal.toml` (`TEMPORAL_CONFIG_FILE`,
 * else `~/.config/temporalio/temporal.toml`; `TEMPORAL_PROFILE`, else `default`). No SDK client here, so the
 * CLI's help can show the settings without loading one; src/config/connection.ts connects with them.
 */
import type { ConnectionOptions } from '@temporalio/client';
import { loadClientConnectConfig } from '@temporalio/envconfig';
import os from 'node:os';
import path from 'node:path';
import { configError } from './errors';

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

/** The `temporal.toml` the settings come from: `TEMPORAL_CONFIG_FILE`, else the per-user default. */
export function temporalConfigFile(env: NodeJS.ProcessEnv = process.env): string {
  if (env.TEMPORAL_CONFIG_FILE) return env.TEMPORAL_CONFIG_FILE;
  const base = env.XDG_CONFIG_HOME || path.join(os.homedir(), '.config');
  return path.join(base, 'temporalio', 'temporal.toml');
}

/**
 * Reads the connection settings. Throws a `config` TreadleError naming the setting when the profile
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
