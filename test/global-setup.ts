/**
 * Starts one real Temporal dev server for the whole test run (through the same resolver `treadle dev`
 * uses, never downloading) and bundles the workflow code once; tests connect to it through env vars.
 */
import { bundleWorkflowCode } from '@temporalio/worker';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startDevServer, type DevServer, freePort } from '../src/server/dev-server';

declare global {
  var __TREADLE_TEST_SERVER__: DevServer | undefined;
}


export default async function globalSetup(): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'treadle-test-'));
  const [server, bundle] = await Promise.all([
    startDevServer({
      port: await freePort(),
      dbFile: path.join(dir, 'temporal.sqlite'),
      headless: true,
      allowDownload: false,
      progress: (m) => process.stderr.write(`[global-setup] ${m}\n`),
    }),
    bundleWorkflowCode({ workflowsPath: require.resolve('../src/workflows'), logger: quietLogger() }),
  ]);
  const bundlePath = path.join(dir, 'workflow-bundle.js');
  writeFileSync(bundlePath, bundle.code);
  globalThis.__TREADLE_TEST_SERVER__ = server;
  process.env.TREADLE_TEST_ADDRESS = server.address;
  process.env.TREADLE_TEST_BUNDLE = bundlePath;
  process.env.TREADLE_TEST_DIR = dir;
  process.env.TREADLE_TEST_DB = server.dbFile;
}

function quietLogger() {
  const noop = (): void => undefined;
  return { trace: noop, debug: noop, info: noop, warn: noop, error: (m: string) => process.stderr.write(`${m}\n`), log: noop };
}
