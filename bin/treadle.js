#!/usr/bin/env node
// The `treadle` command runs from the build output (npm run build); TypeScript is never run directly.
//
// `treadle validate` runs from `lib/cli/offline.js`, the same CLI bundled into one file with zod and yaml
// (scripts/bundle-cli.js), because loading their ~170 modules one by one was most of its start time. Every
// other command runs `lib/cli/main.js`: `--help` and `pipelines` load neither package and start faster
// without reading a 680 KB bundle, and the commands that talk to the server load the model with the SDK
// client anyway. A bundle older than main.js (tsc run without the bundling step) is never used.
const { statSync } = require('node:fs');
const path = require('node:path');

const BUNDLED_COMMANDS = new Set(['validate']);

function builtAt(file) {
  try {
    return statSync(file).mtimeMs;
  } catch {
    return undefined;
  }
}

function entryPoint() {
  const main = path.join(__dirname, '..', 'lib', 'cli', 'main.js');
  if (!BUNDLED_COMMANDS.has(process.argv[2])) return main;
  const offline = path.join(__dirname, '..', 'lib', 'cli', 'offline.js');
  const bundled = builtAt(offline);
  const compiled = builtAt(main);
  return bundled !== undefined && compiled !== undefined && bundled >= compiled ? offline : main;
}

try {
  require(entryPoint());
} catch (error) {
  if (error && error.code === 'MODULE_NOT_FOUND' && String(error.message).includes('lib/cli/main.js')) {
    process.stderr.write('treadle: not built yet; run "npm run build" first\n');
    process.exit(1);
  }
  throw error;
}
