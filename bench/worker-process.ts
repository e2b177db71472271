/**
 * One benchmark worker in a process of its own (`bench/separate-processes.ts` forks two of these): the
 * Treadle worker as `createWorker` builds it, or the raw-Temporal baseline worker, each with the SDK's
 * default options and the same prebundled workflows and activities as the in-process benchmark.
 *
 *   node .bench-build/bench/worker-process.js <treadle|baseline> <address> <namespace> <task queue> <bundle file> <blob dir>
 *
 * Prints `ready` on stdout once the worker runs; stops on SIGTERM.
 */
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { readFileSync } from 'node:fs';
import { DEFAULT_BLOB_THRESHOLD_BYTES, FileBlobStore } from '../src/storage/blob-store';
import { createWorker } from '../src/worker';
import { createBaselineActivities } from './baseline-activities';
import { benchRegistry } from './treadle-pipelines';

async function main(): Promise<void> {
  const [side, address, namespace, taskQueue, bundleFile, blobDir] = process.argv.slice(2);
  if ((side !== 'treadle' && side !== 'baseline') || !address || !namespace || !taskQueue || !bundleFile || !blobDir) {
    throw new Error('usage: worker-process.js <treadle|baseline> <address> <namespace> <task queue> <bundle file> <blob dir>');
  }
  // Workflow log lines would flood the parent's stderr; warnings still show.
  Runtime.install({ logger: new DefaultLogger('WARN') });
  const connection = await NativeConnection.connect({ address });
  const workflowBundle = { code: readFileSync(bundleFile, 'utf8') };
  const worker =
    side === 'treadle'
      ? await createWorker({ connection, namespace, taskQueue, registry: benchRegistry(), blobs: new FileBlobStore(blobDir), blobThresholdBytes: DEFAULT_BLOB_THRESHOLD_BYTES, workflowBundle })
      : await Worker.create({ connection, namespace, taskQueue, workflowBundle, activities: createBaselineActivities() });
  process.once('SIGTERM', () => worker.shutdown());
  const running = worker.run();
  process.stdout.write('ready\n');
  try {
    await running;
  } finally {
    await connection.close();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`worker-process failed: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
