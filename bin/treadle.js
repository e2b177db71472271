#!/usr/bin/env node
// The `treadle` command runs from the build output (npm run build); TypeScript is never run directly.
try {
  require('../lib/cli/main.js');
} catch (error) {
  if (error && error.code === 'MODULE_NOT_FOUND' && String(error.message).includes('lib/cli/main.js')) {
    process.stderr.write('treadle: not built yet; run "npm run build" first\n');
    process.exit(1);
  }
  throw error;
}
