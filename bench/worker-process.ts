/**
 * One benchmark worker in a process of its own (`bench/separate-processes.ts` forks two of these): the
 * Treadle worker or the raw-Temporal baseline worker, built by `createBenchWorker` exactly as the in-process
 * benchmark builds it, from a prebundled workflow file.
 *
 *   node .bench-build/bench/worker-process.js <treadle|baseline> <address> <namespace> <task queue> <bundle file> <blob dir> [--max-cached=N]
 *
 * `--max-cached=N` bounds the workflow cache of either side (the inbox scenario gives both Treadle's
 * `TREADLE_WORKFLOW_CACHE`); without it each side keeps its own default. Prints `ready` on stdout once the worker runs; stops on SIGTERM.
 */
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { readFileSync } from 'node:fs';
import { FileBlobStore } from '../src/storage/blob-store';
import { createBenchWorker } from './environment';

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const maxCachedFlag = args.find((a) => a.startsWith('--max-cached='));
  const [side, address, namespace, taskQueue, bundleFile, blobDir] = args.filter((a) => a !== maxCachedFlag);
  const maxCachedWorkflows = maxCachedFlag ? Number(maxCachedFlag.slice('--max-cached='.length)) : undefined;
  if (
    (side !== 'treadle' && side !== 'baseline') ||
    !address ||
    !namespace ||
    !taskQueue ||
    !bundleFile ||
    !blobDir ||
    (maxCachedWorkflows !== undefined && !(Number.isInteger(maxCachedWorkflows) && maxCachedWorkflows >= 0))
  ) {
    throw new Error(
      'usage: worker-process.js <treadle|baseline> <address> <namespace> <task queue> <bundle file> <blob dir> [--max-cached=N]',
    );
  }
  // Workflow log lines would flood the parent's stderr; warnings still show.
  Runtime.install({ logger: new DefaultLogger('WARN') });
  const connection = await NativeConnection.connect({ address });
  const workflowBundle = { code: readFileSync(bundleFile, 'utf8') };
  const worker = await createBenchWorker(side, {
    connection,
    namespace,
    taskQueue,
    workflowBundle,
    blobs: new FileBlobStore(blobDir),
    ...(maxCachedWorkflows !== undefined ? { maxCachedWorkflows } : {}),
  });
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
