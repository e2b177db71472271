/**
 * The Temporal server a benchmark runs on: the dev server (one process, SQLite in WAL mode without fsync, as
 * Temporal's own CI runs it), or a self-hosted server on PostgreSQL 15 (src/server/cluster.ts: four processes, the
 * settings of src/server/cluster-config.ts). `--server=postgres` runs a benchmark on the second; `--only=servers`
 * runs the throughput scenario and the review inbox on both in one run (bench/scenarios/servers.ts).
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { startCluster } from '../src/server/cluster';
import type { ClusterSettings } from '../src/server/cluster-config';
import { startDevServer, freePort } from '../src/server/dev-server';
import { TEMPORAL_SERVER_VERSION } from '../src/server/server-tools';
import { cliVersion } from '../src/server/temporal-cli';

/** SQLite settings of Temporal's own CI for the dev server: no fsync per write, write-ahead log. */
export const SQLITE_PRAGMAS = { journal_mode: 'WAL', synchronous: 'OFF' } as const;

export const SERVER_KINDS = ['dev', 'postgres'] as const;
export type ServerKind = (typeof SERVER_KINDS)[number];

/** A running server, whichever kind. */
export interface BenchServer {
  kind: ServerKind;
  address: string;
  namespace: string;
  /** What it is: the CLI's version line, or the server's version and its layout. */
  description: string;
  /** The settings it runs with: the dev server's SQLite pragmas, or the cluster's settings. */
  settings: Record<string, unknown>;
  /** The processes whose CPU is the server's (now: PostgreSQL's backends come and go). */
  pids(): number[];
  /** The dev server's Prometheus metrics, when asked for (the server-work scenario reads them). */
  metricsUrl?: string;
  /** Lines of the server's logs that say it failed work under load (see {@link ServerTrouble}). */
  trouble(): ServerTrouble;
  stop(): Promise<void>;
}

/**
 * What the server's logs say went wrong under load: persistence calls that ran out of time, and workflow updates
 * that failed (the two the issue names; each is retried by the server, and costs time).
 */
export interface ServerTrouble {
  deadlineExceeded: number;
  failedExecutionUpdates: number;
}

/** `--server=dev|postgres` (default dev). */
export function parseServerKind(argv: readonly string[]): ServerKind {
  const given = argv.find((a) => a.startsWith('--server='))?.slice('--server='.length);
  if (given === undefined) return 'dev';
  if (!(SERVER_KINDS as readonly string[]).includes(given))
    throw new Error(`--server=${given}: no such server; use one of ${SERVER_KINDS.join(', ')}`);
  return given as ServerKind;
}

/** Starts a server of `kind` with its state in `dir`. */
export async function startBenchServer(
  kind: ServerKind,
  dir: string,
  progress: (message: string) => void,
  options: { metrics?: boolean } = {},
): Promise<BenchServer> {
  if (kind === 'postgres') {
    const tuning = clusterTuning();
    const cluster = await startCluster({
      dir: path.join(dir, 'cluster'),
      layout: tuning.layout ?? 'one-process',
      ...(tuning.settings ? { settings: tuning.settings } : {}),
      progress,
    });
    const logs = () =>
      readdirSync(cluster.dir)
        .filter((f) => f.startsWith('server-') && f.endsWith('.log'))
        .map((f) => path.join(cluster.dir, f));
    return {
      kind,
      address: cluster.address,
      namespace: cluster.namespace,
      description: `Temporal server ${TEMPORAL_SERVER_VERSION} on PostgreSQL 15, ${tuning.layout === 'per-service' ? 'one process per service' : 'all services in one process'}`,
      settings: { ...cluster.settings, layout: tuning.layout ?? 'one-process' },
      pids: () => {
        const postmaster = cluster.postgres.pid();
        const temporal = Object.values(cluster.serverPids()).filter((p): p is number => p !== undefined);
        return postmaster === undefined ? temporal : [...temporal, postmaster, ...childrenOf(postmaster)];
      },
      trouble: () => troubleIn(logs()),
      stop: () => cluster.stop(),
    };
  }
  const server = await startDevServer({
    port: await freePort(),
    dbFile: path.join(dir, 'temporal.sqlite'),
    headless: true,
    allowDownload: false,
    sqlitePragmas: { ...SQLITE_PRAGMAS },
    ...(options.metrics ? { metricsPort: await freePort() } : {}),
    progress,
  });
  const logFile = `${server.dbFile}.log`;
  return {
    kind,
    address: server.address,
    namespace: server.namespace,
    description: cliVersion(server.binary) ?? `unknown (${server.binary})`,
    settings: { sqlitePragmas: { ...server.sqlitePragmas } },
    pids: () => (server.pid === undefined ? [] : [server.pid]),
    ...(server.metricsUrl !== undefined ? { metricsUrl: server.metricsUrl } : {}),
    trouble: () => troubleIn([logFile]),
    stop: () => server.stop(),
  };
}

/**
 * `TREADLE_BENCH_CLUSTER`, JSON `{ "layout": "one-process" | "per-service", "settings": { …ClusterSettings } }`: other
 * settings for the PostgreSQL-backed server than src/server/cluster-config.ts's, to measure them against each other.
 */
function clusterTuning(): { layout?: 'one-process' | 'per-service'; settings?: Partial<ClusterSettings> } {
  const given = process.env.TREADLE_BENCH_CLUSTER;
  if (!given) return {};
  try {
    return JSON.parse(given) as ReturnType<typeof clusterTuning>;
  } catch (error) {
    throw new Error(`TREADLE_BENCH_CLUSTER is not JSON: ${(error as Error).message}`);
  }
}

/** The processes whose parent is `pid` (PostgreSQL's backends), from /proc. */
function childrenOf(pid: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (parent === pid) children.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return children;
}

/** Counts the lines of {@link ServerTrouble} in the logs. */
function troubleIn(files: string[]): ServerTrouble {
  const trouble: ServerTrouble = { deadlineExceeded: 0, failedExecutionUpdates: 0 };
  for (const file of files) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n')) {
      if (line.includes('context deadline exceeded')) trouble.deadlineExceeded++;
      if (
        /UpdateWorkflowExecution operation failed|Persistent store operation failure.*UpdateWorkflowExecution/i.test(
          line,
        )
      )
        trouble.failedExecutionUpdates++;
    }
  }
  return trouble;
}
