/**
 * Starts one real Temporal dev server for the whole test run (through the same resolver `treadle dev`
 * uses, never downloading) and bundles the workflow code once; tests connect to it through env vars.
 */
import { bundleWorkflowCode } from '@temporalio/worker';
import { mkdtempSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startDevServer, type DevServer, freePort } from '../src/server/dev-server';

declare global {
  var __TREADLE_TEST_SERVER__: { stop(): Promise<void> } | undefined;
}

/** The server a run's tests connect to: the dev server here, a PostgreSQL-backed cluster in test/cluster/global-setup.ts. */
export interface RunServer {
  address: string;
  /** The dev server's SQLite file, which some tests read; a cluster has none. */
  dbFile?: string;
  stop(): Promise<void>;
}

const ROOT = path.join(__dirname, '..');

/** The part of jest's global config this setup reads: the test paths the run was given. */
export interface RunSelection {
  testPathPatterns?: { patterns?: readonly string[] };
}

/**
 * Dynamic config of the servers the suites start, over their own: a Worker Deployment Version's drainage status is
 * refreshed every few seconds instead of every three minutes, so the versioning test sees an old build drained.
 */
export const TEST_SERVER_DYNAMIC_CONFIG: Readonly<Record<string, unknown>> = {
  'matching.wv.VersionDrainageStatusRefreshInterval': '3s',
  'matching.wv.VersionDrainageStatusVisibilityGracePeriod': '3s',
};

/**
 * A free port is free only when probed: a client's outgoing connection may take it (from the same ephemeral
 * range) before the server binds it. So a start that fails is tried again, twice, on a new port and database.
 */
async function startOnFreePort(dir: string): Promise<DevServer> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startDevServer({
        port: await freePort(),
        dbFile: path.join(dir, attempt === 1 ? 'temporal.sqlite' : `temporal-${attempt}.sqlite`),
        headless: true,
        allowDownload: false,
        dynamicConfig: { ...TEST_SERVER_DYNAMIC_CONFIG },
        progress: (m) => process.stderr.write(`[global-setup] ${m}\n`),
      });
    } catch (error) {
      if (attempt === 3) throw error;
      process.stderr.write(`[global-setup] the dev server did not start (${String(error).split('\n')[0]}); again\n`);
    }
  }
}

export default async function globalSetup(globalConfig?: RunSelection): Promise<void> {
  await prepareRun(globalConfig, startOnFreePort);
}

/**
 * What every run needs around its server: a current build, a folder of its own, the workflow code bundled once,
 * and the env vars the tests read (`TREADLE_TEST_ADDRESS`, `TREADLE_TEST_BUNDLE`, `TREADLE_TEST_DIR`, `TREADLE_HOME`).
 */
export async function prepareRun(
  globalConfig: RunSelection | undefined,
  startServer: (dir: string) => Promise<RunServer>,
): Promise<void> {
  if (!unitTestsOnly(globalConfig)) ensureBuildIsCurrent();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'treadle-test-'));
  const [server, bundle] = await Promise.all([
    startServer(dir),
    bundleWorkflowCode({ workflowsPath: require.resolve('../src/workflows'), logger: quietLogger() }),
  ]);
  const bundlePath = path.join(dir, 'workflow-bundle.js');
  writeFileSync(bundlePath, bundle.code);
  globalThis.__TREADLE_TEST_SERVER__ = server;
  process.env.TREADLE_TEST_ADDRESS = server.address;
  process.env.TREADLE_TEST_BUNDLE = bundlePath;
  process.env.TREADLE_TEST_DIR = dir;
  // Every worker and CLI command of the run keeps its local state (call log, task list, default blob folder,
  // loop workspace, TDD repos) here, never in the user's own home (src/config/home.ts).
  process.env.TREADLE_HOME = path.join(dir, 'home');
  if (server.dbFile) process.env.TREADLE_TEST_DB = server.dbFile;
}

function quietLogger() {
  const noop = (): void => undefined;
  return {
    trace: noop,
    debug: noop,
    info: noop,
    warn: noop,
    error: (m: string) => process.stderr.write(`${m}\n`),
    log: noop,
  };
}

/**
 * The CLI, bad-input, server-lifetime, dev-command and agents tests run the build output (lib/), as users
 * do; `npm test` builds first, `npx jest` does not. Stop before anything starts when lib/ is missing or
 * older than src/ or the examples' TypeScript, instead of testing old code.
 */
function ensureBuildIsCurrent(): void {
  // The bundled examples' TypeScript is built into lib/ too (scripts/build-examples.js).
  const source = newer(newestFile(path.join(ROOT, 'src')), newestFile(path.join(ROOT, 'examples'), '.ts'));
  const build = newestFile(path.join(ROOT, 'lib'));
  if (!source) return;
  if (!build)
    throw new Error(
      'lib/ is missing: the CLI tests run the build output. Run "npm run build" first (npm test builds before it runs jest).',
    );
  if (source.mtimeMs > build.mtimeMs) {
    throw new Error(
      `lib/ is older than its sources (${path.relative(ROOT, source.file)} changed after the last build): the CLI tests would run old code. ` +
        'Run "npm run build" first (npm test builds before it runs jest).',
    );
  }
}

/** The more recently modified of two files. */
function newer(
  a: { file: string; mtimeMs: number } | undefined,
  b: { file: string; mtimeMs: number } | undefined,
): { file: string; mtimeMs: number } | undefined {
  return !a || (b && b.mtimeMs > a.mtimeMs) ? b : a;
}

/** The most recently modified file under `dir` (ending in `extension`, when given), or undefined when there is none. */
function newestFile(dir: string, extension = ''): { file: string; mtimeMs: number } | undefined {
  let newest: { file: string; mtimeMs: number } | undefined;
  let entries;
  try {
    entries = readdirSync(dir, { recursive: true, withFileTypes: true });
  } catch {
    return undefined;
  }
  for (const entry of entries) {
    if (!entry.isFile() || !entry.name.endsWith(extension)) continue;
    const file = path.join(entry.parentPath, entry.name);
    const { mtimeMs } = statSync(file);
    if (!newest || mtimeMs > newest.mtimeMs) newest = { file, mtimeMs };
  }
  return newest;
}

/** True when every path the run was given lies under test/unit/: those tests never load lib/. */
function unitTestsOnly(globalConfig: RunSelection | undefined): boolean {
  const unit = path.join(ROOT, 'test', 'unit');
  const patterns = globalConfig?.testPathPatterns?.patterns ?? [];
  return (
    patterns.length > 0 &&
    patterns.every((pattern) => {
      const absolute = path.resolve(ROOT, pattern);
      return absolute === unit || absolute.startsWith(`${unit}${path.sep}`);
    })
  );
}
