#!/usr/bin/env node
/**
 * Prebuilds the workflow bundles into `lib/workflow-bundle/` after `tsc` has built `lib/` (`npm run build` runs
 * both): `plain.js`, `traced.js` (with the OpenTelemetry workflow interceptors) and `manifest.json`.
 *
 * Why (issue 26 §5): a worker that bundles its workflow code at start spends 5-6 s in webpack before it polls;
 * loading a prebuilt bundle takes milliseconds. The manifest records the SDK version and the size and sha256 of
 * every compiled file in the bundles, so a worker whose files changed since bundles at start instead
 * (src/worker/workflow-bundle.ts, which also does the bundling here, so the build and the check share one definition).
 */
const path = require('node:path');

const { buildWorkflowBundles, WORKFLOW_BUNDLE_DIR } = require(
  path.join(__dirname, '..', 'lib', 'worker', 'workflow-bundle'),
);

buildWorkflowBundles()
  .then((manifest) => {
    const kib = (bytes) => `${Math.round(bytes / 1024)} KiB`;
    process.stdout.write(
      `workflow bundles in ${path.relative(process.cwd(), WORKFLOW_BUNDLE_DIR)}: plain ${kib(manifest.bundles.plain.size)}, traced ${kib(manifest.bundles.traced.size)}, from ${manifest.inputs.length} files\n`,
    );
  })
  .catch((error) => {
    process.stderr.write(`build-workflow-bundle: ${error.stack ?? error}\n`);
    process.exit(1);
  });
