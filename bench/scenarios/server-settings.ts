/**
 * Server settings: what the dev server's SQLite settings do to Treadle. The same 10-stage no-op work items,
 * N at a time, on three fresh dev servers one after another, each with its own Treadle worker:
 *
 * - `sqlite defaults`: no `--sqlite-pragma` at all (rollback journal, SQLite's own synchronous setting),
 *   which is what `temporal server start-dev --db-filename` gives anyone who passes nothing;
 * - `treadle default`: what `startDevServer` applies unless told otherwise (`journal_mode=WAL`,
 *   `synchronous=NORMAL`; src/server/sqlite-pragmas.ts), i.e. `treadle dev`, the tests, docker-compose;
 * - `tuned`: the benchmark's own server (`journal_mode=WAL`, `synchronous=OFF`, as Temporal's CI runs it).
 *
 * Runs after the main environment has shut down, so nothing else is in flight. Treadle side only: the
 * question is what the server costs Treadle, not the ratio to the baseline (the other scenarios give that).
 */
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, type Worker, type WorkflowBundle } from '@temporalio/worker';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TreadleClient } from '../../src/client';
import { devServerArgs, freePort, startDevServer } from '../../src/server/dev-server';
import { probeTemporal } from '../../src/server/probes';
import { DEFAULT_SQLITE_PRAGMAS } from '../../src/server/sqlite-pragmas';
import { resolveTemporalCli } from '../../src/server/temporal-cli';
import { startWatched } from '../../src/server/watchdog';
import { FileBlobStore } from '../../src/storage/blob-store';
import { createWorker } from '../../src/worker';
import { cpuSnapshot, cpuSpent } from '../cpu';
import { SQLITE_PRAGMAS } from '../bench-server';
import { BENCH_ANSWER_WAIT_MS } from '../environment';
import {
  readHistories,
  fmt,
  fmtRatio,
  mapLimited,
  nowMs,
  type ScenarioContext,
  type ScenarioResult,
  runCleanups,
} from '../scenario';
import { schedulingLatencies } from '../history';
import { distribution, ratio, round, type Distribution } from '../statistics';
import { treadleSide } from '../sides';
import { benchRegistry } from '../treadle-pipelines';

const TASK_QUEUE = 'bench-server-settings';
/** Items per configuration before measuring (JIT, connections, the server's caches). */
const WARM_UP_ITEMS = 10;
/** A server that does not answer within this long is reported as failed to start. */
const READY_TIMEOUT_MS = 120_000;

/** The three configurations, by name, and the pragmas each asks for (`null`: pass none at all). */
export const SERVER_CONFIGURATIONS: { name: string; pragmas: Record<string, string> | null }[] = [
  { name: 'sqlite defaults (no pragmas)', pragmas: null },
  { name: 'treadle default (WAL, synchronous=NORMAL)', pragmas: { ...DEFAULT_SQLITE_PRAGMAS } },
  { name: 'tuned (WAL, synchronous=OFF)', pragmas: { ...SQLITE_PRAGMAS } },
];

export interface ServerConfigurationResult {
  name: string;
  /** The `--sqlite-pragma` settings the server ran with; empty when none were passed. */
  sqlitePragmas: Record<string, string>;
  items: number;
  rounds: { wallMs: number; itemsPerSecond: number }[];
  itemsPerSecond: number;
  /** Previous stage's activity completed → next stage's activity started. */
  gapMs: Distribution;
  cpuPerItemMs: { process: number; server: number | null };
}

export interface ServerSettingsResult {
  itemsAtOnce: number;
  rounds: number;
  stages: number;
  configurations: ServerConfigurationResult[];
}

/** A dev server for one configuration and a way to stop it. */
interface ServerHandle {
  address: string;
  namespace: string;
  pid?: number;
  sqlitePragmas: Record<string, string>;
  stop(): Promise<void>;
}

/**
 * `temporal server start-dev` with nothing but the essentials: `startDevServer` always applies Treadle's
 * default pragmas, so the "no pragmas" server is started here with the same binary, arguments
 * (`devServerArgs`, without pragmas) and watchdog.
 */
async function startWithoutPragmas(dbFile: string, progress: (m: string) => void): Promise<ServerHandle> {
  const { binary, tried } = await resolveTemporalCli({ allowBuild: false, progress });
  if (!binary) throw new Error(`no temporal CLI found (tried ${tried.join(', ')})`);
  const port = await freePort();
  const namespace = 'default';
  const args = devServerArgs({ ip: '127.0.0.1', port, dbFile, namespace, headless: true });
  const server = startWatched({ command: binary.path, args, logFile: `${dbFile}.log` });
  const address = `127.0.0.1:${port}`;
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    const gone = server.exited();
    if (gone) throw new Error(`the dev server without pragmas ${gone}: ${server.logTail()}`);
    if ((await probeTemporal(address, namespace)).ok) break;
    if (Date.now() > deadline) {
      await server.stop();
      throw new Error(`the dev server without pragmas did not answer within ${READY_TIMEOUT_MS / 1000}s`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  return { address, namespace, pid: await server.started, sqlitePragmas: {}, stop: () => server.stop() };
}

async function startServer(
  pragmas: Record<string, string> | null,
  dbFile: string,
  progress: (m: string) => void,
): Promise<ServerHandle> {
  if (pragmas === null) return startWithoutPragmas(dbFile, progress);
  const server = await startDevServer({
    port: await freePort(),
    dbFile,
    headless: true,
    allowDownload: false,
    allowBuild: false,
    sqlitePragmas: pragmas,
    progress,
  });
  return {
    address: server.address,
    namespace: server.namespace,
    ...(server.pid !== undefined ? { pid: server.pid } : {}),
    sqlitePragmas: { ...server.sqlitePragmas },
    stop: () => server.stop(),
  };
}

async function measureConfiguration(
  ctx: ScenarioContext,
  bundle: WorkflowBundle,
  configuration: (typeof SERVER_CONFIGURATIONS)[number],
  itemsAtOnce: number,
  rounds: number,
): Promise<ServerConfigurationResult> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'treadle-bench-server-'));
  const stops: (() => Promise<void> | void)[] = [() => rmSync(dir, { recursive: true, force: true })];
  try {
    ctx.progress(`server settings: ${configuration.name}: starting a dev server and a Treadle worker`);
    const server = await startServer(configuration.pragmas, path.join(dir, 'temporal.sqlite'), ctx.progress);
    stops.push(() => server.stop());
    const workerConnection = await NativeConnection.connect({ address: server.address });
    stops.push(() => workerConnection.close());
    const blobs = new FileBlobStore(path.join(dir, 'blobs'));
    const worker: Worker = await createWorker({
      connection: workerConnection,
      namespace: server.namespace,
      taskQueue: TASK_QUEUE,
      registry: benchRegistry(),
      blobs,
      workflowBundle: bundle,
    });
    const running = worker.run();
    stops.push(async () => {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running;
    });
    const connection = await Connection.connect({ address: server.address });
    stops.push(() => connection.close());
    const side = treadleSide(
      new TreadleClient(new Client({ connection, namespace: server.namespace }), {
        taskQueue: TASK_QUEUE,
        blobs,
        answerWaitMs: BENCH_ANSWER_WAIT_MS,
      }),
    );
    const stages = ctx.sizes.stages;
    const runItems = async (ids: string[]): Promise<void> => {
      await mapLimited(ids, ids.length, async (id) => {
        await side.startLinear(id, stages);
        await side.result(id);
      });
    };
    await runItems(Array.from({ length: WARM_UP_ITEMS }, (_, i) => `${ctx.tag}-server-warmup-${i}`));
    const ids: string[] = [];
    const walls: number[] = [];
    let processMs = 0;
    let serverMs: number | null = 0;
    for (let r = 0; r < rounds; r++) {
      const roundIds = Array.from({ length: itemsAtOnce }, (_, i) => `${ctx.tag}-server-r${r}-${i}`);
      ctx.progress(
        `server settings: ${configuration.name}: round ${r + 1}/${rounds}, ${itemsAtOnce} items × ${stages} stages`,
      );
      const before = cpuSnapshot(server.pid);
      const started = nowMs();
      await runItems(roundIds);
      walls.push(nowMs() - started);
      const spent = cpuSpent(before, cpuSnapshot(server.pid));
      processMs += spent.processMs;
      serverMs = serverMs === null || spent.serverMs === null ? null : serverMs + spent.serverMs;
      ids.push(...roundIds);
    }
    const read = await readHistories(ids.map((id) => side.handle(id)));
    const total = itemsAtOnce * rounds;
    return {
      name: configuration.name,
      sqlitePragmas: server.sqlitePragmas,
      items: total,
      rounds: walls.map((wallMs) => ({ wallMs: round(wallMs), itemsPerSecond: round((itemsAtOnce / wallMs) * 1000) })),
      itemsPerSecond: round((total / walls.reduce((a, b) => a + b, 0)) * 1000),
      gapMs: distribution(read.flatMap((r) => schedulingLatencies(r.history))),
      cpuPerItemMs: { process: round(processMs / total), server: serverMs === null ? null : round(serverMs / total) },
    };
  } finally {
    await runCleanups(stops, (m) => ctx.progress(`server settings: ${m}`));
  }
}

/** Runs the server-settings scenario; needs Treadle's workflow bundle and no other server busy. */
export async function serverSettings(
  ctx: ScenarioContext,
  bundle: WorkflowBundle,
): Promise<ScenarioResult<ServerSettingsResult>> {
  const { serverItemsAtOnce: itemsAtOnce, serverRounds: rounds, stages } = ctx.sizes;
  const configurations: ServerConfigurationResult[] = [];
  for (const configuration of SERVER_CONFIGURATIONS)
    configurations.push(await measureConfiguration(ctx, bundle, configuration, itemsAtOnce, rounds));
  const tuned = configurations[configurations.length - 1]!;
  const scenario = `server settings (Treadle, ${itemsAtOnce}×${rounds} items × ${stages} stages)`;
  return {
    result: { itemsAtOnce, rounds, stages, configurations },
    rows: configurations.flatMap((c) => [
      {
        scenario,
        metric: `${c.name}: items/s (÷ tuned)`,
        treadle: fmt(c.itemsPerSecond),
        baseline: '',
        ratio: fmtRatio(ratio(c.itemsPerSecond, tuned.itemsPerSecond)),
      },
      {
        scenario,
        metric: `${c.name}: stage gap p50 / p99 (÷ tuned p50)`,
        treadle: `${fmt(c.gapMs.p50, ' ms')} / ${fmt(c.gapMs.p99, ' ms')}`,
        baseline: '',
        ratio: fmtRatio(ratio(c.gapMs.p50, tuned.gapMs.p50)),
      },
    ]),
  };
}
