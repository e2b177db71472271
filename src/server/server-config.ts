/**
 * `treadle server-config`: the configuration folder of a self-hosted Temporal server on PostgreSQL for one machine,
 * one process per service on the standard ports, with the settings Treadle's cluster suite runs and measured
 * (cluster-config.ts writes both, so the files are the ones the suite starts its server with, ports aside).
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { TreadleError } from '../config/errors';
import {
  CLUSTER_SERVICES,
  clusterSettings,
  serverConfigFiles,
  STANDARD_METRICS_PORTS,
  STANDARD_PORTS,
} from './cluster-config';

/** The name of the configuration (`server --env production`). */
export const PRODUCTION_ENV = 'production';

export interface ServerConfigOptions {
  /** The folder the server runs in (`server --root`); the files go to its `config` folder. */
  root: string;
  /** PostgreSQL, `host:port`. */
  database: string;
  /** The database role the server connects as. */
  user: string;
  /** Replace files that exist (else they are listed and nothing is written). */
  force?: boolean;
}

/** Writes the folder; returns the files written. A `database` that is not `host:port`, or files in the way, are `invalid_input`. */
export function writeServerConfig(options: ServerConfigOptions): string[] {
  const match = /^([^\s:]+):(\d{1,5})$/.exec(options.database);
  const port = match ? Number(match[2]) : 0;
  if (!match || port < 1 || port > 65_535)
    throw new TreadleError(
      `--database must be host:port (e.g. 127.0.0.1:5432), not "${options.database}"`,
      'invalid_input',
    );
  const configDir = path.resolve(options.root, 'config');
  const files = serverConfigFiles({
    settings: clusterSettings(),
    ports: { ...STANDARD_PORTS, postgres: port },
    databaseHost: match[1]!,
    user: options.user,
    env: PRODUCTION_ENV,
    configDir,
    processes: CLUSTER_SERVICES.map((name) => ({ name, metricsPort: STANDARD_METRICS_PORTS[name] })),
  });
  const targets = Object.keys(files).map((file) => path.join(configDir, file));
  const existing = targets.filter((file) => existsSync(file));
  if (existing.length > 0 && !options.force)
    throw new TreadleError(
      `not replacing files that exist (give --force to replace them):\n${existing.map((f) => `  - ${f}`).join('\n')}`,
      'invalid_input',
    );
  mkdirSync(configDir, { recursive: true });
  for (const [file, content] of Object.entries(files)) writeFileSync(path.join(configDir, file), content);
  return targets;
}
