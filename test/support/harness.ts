/**
 * Test harness: a worker on a unique task queue against the run's dev server, and a TreadleClient for it.
 */
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, type Worker, type WorkerOptions } from '@temporalio/worker';
import { mkdtempSync } from 'node:fs';
import path from 'node:path';
import { FileBlobStore, type BlobStore } from '../../src/storage/blob-store';
import type { Registry } from '../../src/activities/registry';
import type { ActionCatalog } from '../../src/kinds/approval/worker/activities';
import type { CallLog } from '../../src/storage/call-log';
import type { AgentProviders } from '../../src/agents/providers';
import { TreadleClient } from '../../src/client';
import { createWorker, type TreadleWorkerOptions } from '../../src/worker';
import { bundledActionRegistry, bundledRegistry } from '../../src/cli/bundled-examples';
import { treadleExternalStorage } from '../../src/storage/external-storage';

/** A running worker and a client bound to its task queue. */
export interface Harness<B extends BlobStore = FileBlobStore> {
  client: TreadleClient;
  temporal: Client;
  taskQueue: string;
  blobs: B;
  worker: Worker;
  address: string;
  /** Unique work item id for this test. */
  id(prefix?: string): string;
  shutdown(): Promise<void>;
}

/** Options for {@link startHarness}. */
export interface HarnessOptions<B extends BlobStore = FileBlobStore> {
  /** The blob store of the worker and the client; default a FileBlobStore in a fresh temporary folder. */
  blobs?: B;
  /** The stages and gates (default: the CLI worker's, the generic kinds and the bundled examples). */
  registry?: Registry;
  blobThresholdBytes?: number;
  worker?: Partial<WorkerOptions>;
  agents?: AgentProviders;
  /** The cross-run call log (default: the worker's, `TREADLE_CALL_LOG`, else in `TREADLE_HOME`, which the test setup points at its folder). */
  callLog?: CallLog | null;
  /** The action types approval stages may request (default: the CLI worker's, the examples' on TREADLE_TASKS_FILE). */
  approvalActions?: ActionCatalog;
  /** Reuse a task queue (e.g. to serve items another harness started); default: a fresh one. */
  taskQueue?: string;
  /** The engine version items start on (default the newest): runs older items' branches. */
  engineVersion?: number;
  /**
   * How long the harness's client waits for the worker to answer a query or update (default
   * {@link HARNESS_ANSWER_WAIT_MS}). Tests of the no-worker answer make their own client with the 2-s default.
   */
  answerWaitMs?: number;
  /** The worker's deployment version (default: none, an unversioned worker; the environment is not read). */
  deployment?: TreadleWorkerOptions['deployment'];
  /** The Temporal server (default: the run's dev server, `TREADLE_TEST_ADDRESS`), e.g. one a test started with settings of its own. */
  address?: string;
}

/**
 * The harness's client waits this long for its worker to answer: the worker runs, so an answer comes, but a
 * query may replay a whole history first (maxCachedWorkflows 0) on a machine the other suites load.
 */
export const HARNESS_ANSWER_WAIT_MS = 60_000;

export function testAddress(): string {
  const address = process.env.TREADLE_TEST_ADDRESS;
  if (!address)
    throw new Error(
      'TREADLE_TEST_ADDRESS is not set: run the tests through jest, whose global setup starts the dev server',
    );
  return address;
}

/** Starts a worker on a fresh task queue and returns a client for it. */
export async function startHarness<B extends BlobStore = FileBlobStore>(
  options: HarnessOptions<B> = {},
): Promise<Harness<B>> {
  const address = options.address ?? testAddress();
  const taskQueue = options.taskQueue ?? `test-${Math.random().toString(36).slice(2, 10)}`;
  // Without `blobs`, B is its default, FileBlobStore.
  const blobs =
    options.blobs ??
    (new FileBlobStore(mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'blobs-'))) as BlobStore as B);
  const nativeConnection = await NativeConnection.connect({ address });
  const worker = await createWorker({
    connection: nativeConnection,
    taskQueue,
    registry: options.registry ?? bundledRegistry(),
    blobs,
    ...(options.blobThresholdBytes !== undefined ? { blobThresholdBytes: options.blobThresholdBytes } : {}),
    workflowBundle: { codePath: process.env.TREADLE_TEST_BUNDLE! },
    ...(options.worker ? { worker: options.worker } : {}),
    ...(options.agents ? { agents: options.agents } : {}),
    approvalActions: options.approvalActions ?? bundledActionRegistry(),
    ...(options.callLog !== undefined ? { callLog: options.callLog } : {}),
    ...(options.engineVersion !== undefined ? { engineVersion: options.engineVersion } : {}),
    deployment: options.deployment ?? null,
  });
  const running = worker.run();
  const connection = await Connection.connect({ address });
  // The same claim-check the worker uses, so payloads it offloaded (over 256 KiB) read back here too.
  const temporal = new Client({ connection, dataConverter: { externalStorage: treadleExternalStorage(blobs) } });
  const client = new TreadleClient(temporal, {
    taskQueue,
    blobs,
    answerWaitMs: options.answerWaitMs ?? HARNESS_ANSWER_WAIT_MS,
  });
  let counter = 0;
  return {
    client,
    temporal,
    taskQueue,
    blobs,
    worker,
    address,
    id: (prefix = 'item') => `${prefix}-${taskQueue}-${++counter}`,
    shutdown: async () => {
      worker.shutdown();
      await running;
      await connection.close();
      await nativeConnection.close();
    },
  };
}

/** Polls `check` until it returns a value other than undefined, or fails after `timeoutMs`. */
export async function eventually<T>(
  check: () => Promise<T | undefined>,
  timeoutMs = 20_000,
  what = 'condition',
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`);
}
