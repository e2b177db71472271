/**
 * The "rebundled" side of the worker-start scenario: `treadle worker` as it started before the bundle was
 * prebuilt, bundling the workflow code at start (the same worker options, from the build in lib/, with the
 * workflow sources in place of the prebuilt bundle). Prints the same ready line.
 */
import path from 'node:path';
import type * as BundledExamplesModule from '../src/cli/bundled-examples';
import type * as WorkerModule from '../src/worker';

/** The repository (this file runs from `.bench-build/bench`). */
const ROOT = path.resolve(__dirname, '..', '..');
/* eslint-disable @typescript-eslint/no-require-imports -- the build in lib/, as the CLI runs it */
const { runWorker } = require(path.join(ROOT, 'lib', 'worker')) as typeof WorkerModule;
const { bundledWorkerOptions } = require(
  path.join(ROOT, 'lib', 'cli', 'bundled-examples'),
) as typeof BundledExamplesModule;
/* eslint-enable @typescript-eslint/no-require-imports */

const options = bundledWorkerOptions();
runWorker({
  ...options,
  // `worker` options are spread last: the sources replace the prebuilt bundle.
  worker: { workflowBundle: undefined, workflowsPath: path.join(ROOT, 'lib', 'workflows') },
}).catch((error: unknown) => {
  process.stderr.write(`worker-start-process: ${String(error)}\n`);
  process.exit(1);
});
