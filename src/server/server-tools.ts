/**
 * Finds the full Temporal server and its SQL schema tool (the PostgreSQL-backed cluster, src/server/cluster.ts;
 * docs/deploy.md "A self-hosted server"), in order: `TEMPORAL_SERVER` and `TEMPORAL_SQL_TOOL`, the project cache
 * (`~/.cache/treadle/bin/server` and `sql`, beside the Temporal CLI), then one `go install` of both into that
 * cache when Go is available. v1.29.1 is the server the CLI 1.5.1 embeds, so both servers speak the same API.
 * Nothing is ever downloaded but Go modules.
 */
import path from 'node:path';
import { cacheBinDir, executable, goInstall, onPath } from './temporal-cli';

/** The server release we build: the one the Temporal CLI 1.5.1 dev server embeds. */
export const TEMPORAL_SERVER_VERSION = 'v1.29.1';
export const TEMPORAL_SERVER_MODULES = [
  `go.temporal.io/server/cmd/server@${TEMPORAL_SERVER_VERSION}`,
  `go.temporal.io/server/cmd/tools/sql@${TEMPORAL_SERVER_VERSION}`,
];

/** The two binaries a self-hosted SQL-backed server needs. */
export interface ServerTools {
  /** `server`: runs the frontend, history, matching and worker services. */
  server: string;
  /** `sql`: creates the databases and applies the embedded schemas (temporal-sql-tool). */
  sql: string;
  source: 'env' | 'cache' | 'go install';
}

/** Nothing could be found or built; `tried` says where it looked. */
export class ServerToolsNotFoundError extends Error {
  constructor(readonly tried: string[]) {
    super(
      [
        'the Temporal server and its sql tool could not be found or built. Tried:',
        ...tried.map((t) => `  - ${t}`),
        'Fix one of: set TEMPORAL_SERVER and TEMPORAL_SQL_TOOL to the two binaries; or install Go and let Treadle run',
        `go install ${TEMPORAL_SERVER_MODULES.join(' ')}`,
      ].join('\n'),
    );
    this.name = 'ServerToolsNotFoundError';
  }
}

/** Returns the two binaries, building them into the cache once when they are missing; throws when it cannot. */
export async function resolveServerTools(
  options: { allowBuild?: boolean; progress?: (message: string) => void } = {},
): Promise<ServerTools> {
  const progress = options.progress ?? ((m: string) => process.stderr.write(`${m}\n`));
  const tried: string[] = [];
  const { TEMPORAL_SERVER: server, TEMPORAL_SQL_TOOL: sql } = process.env;
  if (server || sql) {
    if (server && sql && executable(server) && executable(sql)) return { server, sql, source: 'env' };
    throw new ServerToolsNotFoundError([
      `TEMPORAL_SERVER=${server ?? '(not set)'} and TEMPORAL_SQL_TOOL=${sql ?? '(not set)'}: both must name executable files`,
    ]);
  }
  const cached = { server: path.join(cacheBinDir(), 'server'), sql: path.join(cacheBinDir(), 'sql') };
  if (executable(cached.server) && executable(cached.sql)) return { ...cached, source: 'cache' };
  tried.push(`${cached.server} and ${cached.sql} (not both there)`);
  if (options.allowBuild === false) throw new ServerToolsNotFoundError([...tried, 'go install (not allowed here)']);
  const go = onPath('go');
  if (!go) throw new ServerToolsNotFoundError([...tried, 'go install (go is not on PATH)']);
  progress(
    `Building the Temporal server and its sql tool once with "go install ${TEMPORAL_SERVER_MODULES.join(' ')}" into ${cacheBinDir()} (about 13 minutes on 2 cores; later runs reuse them)...`,
  );
  const result = await goInstall(go, TEMPORAL_SERVER_MODULES, 'the Temporal server', progress);
  if (result.ok && executable(cached.server) && executable(cached.sql)) {
    progress(`Built ${cached.server} and ${cached.sql}`);
    return { ...cached, source: 'go install' };
  }
  throw new ServerToolsNotFoundError([
    ...tried,
    `go install (failed: ${'error' in result ? result.error : 'no binaries after the build'})`,
  ]);
}
