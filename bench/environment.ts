/**
 * The benchmark environment: one Temporal dev server tuned as Temporal's own CI tunes it, a Treadle worker
 * and a baseline worker on separate task queues in this process, clients for both, and a record of the
 * machine, versions and settings that goes into the results.
 */
import { runCleanups } from './scenario';
import { Client, Connection } from '@temporalio/client';
import {
  bundleWorkflowCode,
  DefaultLogger,
  makeTelemetryFilterString,
  NativeConnection,
  Runtime,
  Worker,
  type WorkflowBundle,
} from '@temporalio/worker';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DEFAULT_BLOB_THRESHOLD_BYTES, FileBlobStore } from '../src/storage/blob-store';
import { TreadleClient } from '../src/client';
import { startBenchServer, type BenchServer, type ServerKind } from './bench-server';
import { createWorker } from '../src/worker';
import { createBaselineActivities } from './baseline-activities';
import { benchActions, benchRegistry } from './treadle-pipelines';

/**
 * How long the benchmarks' Treadle clients wait for a worker to answer a query or precheck before giving up: a loaded
 * benchmark worker may take more than a user's 2 s, and a benchmark measures the answer, not the "no worker" line.
 */
export const BENCH_ANSWER_WAIT_MS = 60_000;

const TREADLE_QUEUE = 'bench-treadle';
const BASELINE_QUEUE = 'bench-baseline';

/** The machine and versions a run measured on, whatever servers and workers it started. */
export interface HostRecord {
  machine: { cores: number; cpuModel: string; totalMemoryMiB: number; platform: string; release: string };
  /** 1/5/15-minute load averages when the run started: other jobs on the machine skew the numbers. */
  loadAverageAtStart: number[];
  node: string;
  temporalSdk: string;
}

/** What the results record about where and how they were measured: the host, and the environment's server and workers. */
export interface EnvironmentRecord extends HostRecord {
  server: string;
  /** What the server ran with: the dev server's SQLite pragmas, or a cluster's settings. */
  serverSettings: Record<string, unknown>;
  /** The resolved worker settings (the same for both workers). */
  worker: {
    maxCachedWorkflows: number;
    maxConcurrentWorkflowTaskExecutions: number | null;
    maxConcurrentActivityTaskExecutions: number | null;
    reuseV8Context: boolean;
    /** Threads that run workflow code, per worker. */
    workflowThreadPoolSize: number;
  };
  blobThresholdBytes: number;
}

/** A warning the SDK (TypeScript or native side) logged while the benchmark ran. */
export interface WorkerWarning {
  at: number;
  level: string;
  message: string;
  /** The native side's structured fields (e.g. the gRPC error of a failed completion). */
  meta?: Record<string, unknown>;
}

/** Everything a scenario needs. */
export interface BenchEnvironment {
  temporal: Client;
  /**
   * The same server through a connection that never retries: the client's default retries a refused
   * oversized start (RESOURCE_EXHAUSTED) for about 40 s before giving up with the same error.
   */
  temporalWithoutRetries: Client;
  treadle: TreadleClient;
  baselineQueue: string;
  /** The server: its processes for CPU accounting, its logs' trouble. */
  server: BenchServer;
  /** The dev server's Prometheus metrics. */
  serverMetricsUrl?: string;
  /** Every warning logged so far, oldest first. */
  warnings: readonly WorkerWarning[];
  record: EnvironmentRecord;
  /** Both sides' workflow bundles, for scenarios that start workers of their own. */
  bundles: WorkflowBundles;
  shutdown(): Promise<void>;
}

/** Records SDK warnings and prints them in one line each. */
function installRuntime(warnings: WorkerWarning[]): void {
  Runtime.install({
    // Workflow log lines (Treadle logs every event) would flood stdout; warnings still show.
    logger: new DefaultLogger('WARN', (entry) => {
      const meta = entry.meta as Record<string, unknown> | undefined;
      warnings.push({ at: Date.now(), level: entry.level, message: entry.message, ...(meta ? { meta } : {}) });
      const detail = meta && Object.keys(meta).length > 0 ? ` ${JSON.stringify(meta).slice(0, 400)}` : '';
      process.stderr.write(`[sdk ${entry.level}] ${entry.message}${detail}\n`);
    }),
    // Native (core) warnings go through the same logger, so scenarios can read them.
    telemetryOptions: { logging: { filter: makeTelemetryFilterString({ core: 'WARN', other: 'ERROR' }), forward: {} } },
  });
}

/** Treadle's default: artefacts above this many bytes of JSON go to the blob store. */
const BLOB_THRESHOLD_BYTES = DEFAULT_BLOB_THRESHOLD_BYTES;

function sdkVersion(): string {
  const main = require.resolve('@temporalio/worker');
  const manifest = path.join(path.dirname(main), '..', 'package.json');
  return (JSON.parse(readFileSync(manifest, 'utf8')) as { version: string }).version;
}

/** Bundler logging: errors only. */
export const quietBundlerLogger = {
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: (message: string) => process.stderr.write(`${message}\n`),
  log: () => undefined,
};

/** Treadle's workflows and the baseline's, each bundled once a run. */
export interface WorkflowBundles {
  treadle: WorkflowBundle;
  baseline: WorkflowBundle;
}

/** Bundles both sides' workflows (at once: the bundler mostly waits on files). */
export async function bundleWorkflows(): Promise<WorkflowBundles> {
  const [treadle, baseline] = await Promise.all([
    bundleWorkflowCode({ workflowsPath: require.resolve('../src/workflows'), logger: quietBundlerLogger }),
    bundleWorkflowCode({ workflowsPath: require.resolve('./baseline-workflows'), logger: quietBundlerLogger }),
  ]);
  return { treadle, baseline };
}

/**
 * Starts the server, bundles both sides' workflows, starts both workers; `shutdown` undoes all of it.
 * `onWorkerFailure` is called if a worker stops on its own (the scenarios would otherwise wait forever).
 */
export async function startEnvironment(
  progress: (message: string) => void,
  onWorkerFailure: (error: unknown) => void,
  serverKind: ServerKind = 'dev',
): Promise<BenchEnvironment> {
  const warnings: WorkerWarning[] = [];
  installRuntime(warnings);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'treadle-bench-'));
  // The run's local state (the call log its workers append to) stays in its folder, not the user's home.
  process.env.TREADLE_HOME ??= path.join(dir, 'home');
  const cleanups: (() => Promise<void> | void)[] = [() => rmSync(dir, { recursive: true, force: true })];
  let stopped: Promise<void> | undefined;
  // Idempotent: a failure handler and the normal path may both ask for it.
  const shutdown = (): Promise<void> =>
    (stopped ??= (async () => {
      await runCleanups(cleanups, (m) => process.stderr.write(`bench: ${m}\n`));
    })());
  try {
    progress(`starting the Temporal server (${serverKind}) and bundling workflows...`);
    const [server, bundles] = await Promise.all([
      // Metrics for the server-work scenario's operation counts; both sides run on this server alike.
      startBenchServer(serverKind, dir, progress, { metrics: true }),
      bundleWorkflows(),
    ]);
    cleanups.push(() => server.stop());

    // One connection per worker, as two separate worker processes would have.
    const treadleConnection = await NativeConnection.connect({ address: server.address });
    cleanups.push(() => treadleConnection.close());
    const baselineConnection = await NativeConnection.connect({ address: server.address });
    cleanups.push(() => baselineConnection.close());
    const blobs = new FileBlobStore(path.join(dir, 'blobs'));
    const treadleWorker = await createBenchWorker('treadle', {
      connection: treadleConnection,
      namespace: server.namespace,
      taskQueue: TREADLE_QUEUE,
      workflowBundle: bundles.treadle,
      blobs,
    });
    const baselineWorker = await createBenchWorker('baseline', {
      connection: baselineConnection,
      namespace: server.namespace,
      taskQueue: BASELINE_QUEUE,
      workflowBundle: bundles.baseline,
      blobs,
    });
    let stopping = false;
    for (const worker of [treadleWorker, baselineWorker]) {
      const running = worker.run().then(
        () => {
          if (!stopping)
            onWorkerFailure(new Error(`the worker on task queue ${worker.options.taskQueue} stopped unexpectedly`));
        },
        (error: unknown) => {
          if (!stopping) onWorkerFailure(error);
          else throw error;
        },
      );
      cleanups.push(async () => {
        stopping = true;
        if (worker.getState() === 'RUNNING') worker.shutdown();
        await running;
      });
    }

    const connection = await Connection.connect({ address: server.address });
    cleanups.push(() => connection.close());
    const temporal = new Client({ connection, namespace: server.namespace });
    const noRetryConnection = await Connection.connect({ address: server.address, interceptors: [] });
    cleanups.push(() => noRetryConnection.close());
    const temporalWithoutRetries = new Client({ connection: noRetryConnection, namespace: server.namespace });
    const treadle = new TreadleClient(temporal, {
      taskQueue: TREADLE_QUEUE,
      blobs,
      answerWaitMs: BENCH_ANSWER_WAIT_MS,
    });

    return {
      temporal,
      temporalWithoutRetries,
      treadle,
      baselineQueue: BASELINE_QUEUE,
      server,
      ...(server.metricsUrl !== undefined ? { serverMetricsUrl: server.metricsUrl } : {}),
      warnings,
      record: describeEnvironment(server, treadleWorker),
      bundles,
      shutdown,
    };
  } catch (error) {
    await shutdown();
    throw error;
  }
}

/**
 * One side's worker with the SDK's default options: Treadle's as `createWorker` builds it (the benchmark's
 * no-op registry and `note` action, the default blob threshold), or the baseline's. The in-process environment and the forked
 * worker processes (`worker-process.ts`) both build theirs here, so the two setups measure the same workers.
 */
export function createBenchWorker(
  side: 'treadle' | 'baseline',
  options: {
    connection: NativeConnection;
    namespace: string;
    taskQueue: string;
    workflowBundle: WorkflowBundle | { code: string };
    blobs: FileBlobStore;
    /** The workflow cache bound; absent: Treadle's `TREADLE_WORKFLOW_CACHE` default, or the SDK's for the baseline. */
    maxCachedWorkflows?: number;
  },
): Promise<Worker> {
  const { connection, namespace, taskQueue, workflowBundle, blobs, maxCachedWorkflows } = options;
  const cache = maxCachedWorkflows !== undefined ? { maxCachedWorkflows } : {};
  return side === 'treadle'
    ? createWorker({
        connection,
        namespace,
        taskQueue,
        registry: benchRegistry(),
        approvalActions: benchActions(),
        blobs,
        blobThresholdBytes: BLOB_THRESHOLD_BYTES,
        workflowBundle,
        worker: cache,
      })
    : Worker.create({
        connection,
        namespace,
        taskQueue,
        workflowBundle,
        activities: createBaselineActivities(),
        ...cache,
      });
}

/** The machine, its load now, and the Node and SDK versions. */
export function describeHost(): HostRecord {
  const cpus = os.cpus();
  return {
    machine: {
      cores: cpus.length,
      cpuModel: cpus[0]?.model ?? 'unknown',
      totalMemoryMiB: Math.round(os.totalmem() / 2 ** 20),
      platform: os.platform(),
      release: os.release(),
    },
    loadAverageAtStart: os.loadavg().map((l) => Math.round(l * 100) / 100),
    node: process.version,
    temporalSdk: sdkVersion(),
  };
}

function describeEnvironment(server: BenchServer, worker: Worker): EnvironmentRecord {
  return {
    ...describeHost(),
    server: server.description,
    serverSettings: server.settings,
    worker: {
      maxCachedWorkflows: worker.options.maxCachedWorkflows,
      maxConcurrentWorkflowTaskExecutions: worker.options.maxConcurrentWorkflowTaskExecutions ?? null,
      maxConcurrentActivityTaskExecutions: worker.options.maxConcurrentActivityTaskExecutions ?? null,
      reuseV8Context: worker.options.reuseV8Context ?? false,
      workflowThreadPoolSize: worker.options.workflowThreadPoolSize,
    },
    blobThresholdBytes: BLOB_THRESHOLD_BYTES,
  };
}
