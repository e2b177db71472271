/**
 * Starts a real Temporal dev server (the CLI's `server start-dev`) persisted to SQLite, with Treadle's
 * search attributes registered, and stops it cleanly. Used by `treadle dev`, the tests and the benchmarks,
 * so all three run the same server the same way.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync } from 'node:fs';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { createServer, type AddressInfo } from 'node:net';
import { SEARCH_ATTRIBUTE_DEFINITIONS, TreadlePendingReviews, TreadlePipeline, TreadleStatus } from '../model/search-attributes';
import { resolveTemporalCli, TemporalCliNotFoundError, type ResolvedBinary } from './temporal-cli';

/** Options for {@link startDevServer}. */
export interface DevServerOptions {
  port?: number;
  uiPort?: number;
  /** SQLite file; the folder is created. Default `.treadle/temporal.sqlite`. */
  dbFile?: string;
  ip?: string;
  namespace?: string;
  /** No Web UI (tests). */
  headless?: boolean;
  /** Extra `--sqlite-pragma` settings, e.g. `{ journal_mode: 'WAL', synchronous: 'OFF' }`. */
  sqlitePragmas?: Record<string, string>;
  /** Where the server's own log goes (default: next to the database). */
  logFile?: string;
  /** Build the CLI with go install when missing (default true). */
  allowBuild?: boolean;
  /** Fall back to the SDK's download of a dev server when no binary can be found or built (default true). */
  allowDownload?: boolean;
  /** How long to wait for the server to answer (default 60 s). */
  readyTimeoutMs?: number;
  progress?: (message: string) => void;
}

/** A running dev server. */
export interface DevServer {
  address: string;
  namespace: string;
  uiUrl?: string;
  dbFile: string;
  binary: string;
  /** The server process, when Treadle started it itself. */
  pid?: number;
  stop(): Promise<void>;
}

export const DEFAULT_PORT = 7233;
export const DEFAULT_UI_PORT = 8233;
export const DEFAULT_DB_FILE = path.join('.treadle', 'temporal.sqlite');
const STOP_GRACE_MS = 10_000;

/** Starts the server and resolves once it answers gRPC calls. */
export async function startDevServer(options: DevServerOptions = {}): Promise<DevServer> {
  const ip = options.ip ?? '127.0.0.1';
  const port = options.port ?? DEFAULT_PORT;
  const uiPort = options.uiPort ?? DEFAULT_UI_PORT;
  const namespace = options.namespace ?? 'default';
  const dbFile = path.resolve(options.dbFile ?? DEFAULT_DB_FILE);
  mkdirSync(path.dirname(dbFile), { recursive: true });
  const progress = options.progress ?? ((m: string) => process.stderr.write(`${m}\n`));

  const { binary, tried } = await resolveTemporalCli({ allowBuild: options.allowBuild ?? true, progress });
  if (!binary) {
    if (options.allowDownload === false) throw new TemporalCliNotFoundError(tried);
    return startWithSdkDownload({ ip, port, uiPort, namespace, dbFile, headless: options.headless ?? false, progress, tried });
  }

  const args = ['server', 'start-dev', '--ip', ip, '--port', String(port), '--db-filename', dbFile, '--namespace', namespace, '--log-level', 'warn'];
  if (options.headless) args.push('--headless');
  else args.push('--ui-port', String(uiPort));
  for (const [key, type] of Object.entries(SEARCH_ATTRIBUTE_DEFINITIONS)) args.push('--search-attribute', `${key}=${type}`);
  for (const [key, value] of Object.entries(options.sqlitePragmas ?? {})) args.push('--sqlite-pragma', `${key}=${value}`);

  const logFile = options.logFile ?? `${dbFile}.log`;
  const log = createWriteStream(logFile, { flags: 'a' });
  const child = spawn(binary.path, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let tail = '';
  const capture = (chunk: Buffer): void => {
    log.write(chunk);
    tail = (tail + chunk.toString()).slice(-4_000);
  };
  child.stdout!.on('data', capture);
  child.stderr!.on('data', capture);
  let exited: string | undefined;
  child.on('error', (error) => {
    exited = `could not be started: ${error.message}`;
  });
  child.on('exit', (code, signal) => {
    exited = `exited with ${signal ?? `code ${code}`}`;
  });
  // Never leave a server behind: if this process exits without stop(), the server goes with it.
  const killOnExit = (): void => {
    if (exited === undefined) child.kill('SIGKILL');
  };
  process.once('exit', killOnExit);

  const address = `${ip}:${port}`;
  try {
    await waitUntilReady(address, namespace, options.readyTimeoutMs ?? 60_000, () => exited);
  } catch (error) {
    child.kill('SIGKILL');
    process.removeListener('exit', killOnExit);
    log.end();
    const detail = tail.trim().split('\n').slice(-5).join('\n    ');
    throw new Error(`the Temporal dev server (${describe(binary)}) did not start on ${address}: ${(error as Error).message}${detail ? `\n    ${detail}` : ''}\n    (full log: ${logFile})`);
  }
  return {
    address,
    namespace,
    ...(options.headless ? {} : { uiUrl: `http://${ip === '0.0.0.0' ? 'localhost' : ip}:${uiPort}` }),
    dbFile,
    binary: binary.path,
    ...(child.pid !== undefined ? { pid: child.pid } : {}),
    stop: () =>
      stopChild(child, () => exited !== undefined).finally(() => {
        process.removeListener('exit', killOnExit);
        log.end();
      }),
  };
}

function describe(binary: ResolvedBinary): string {
  return `${binary.path}, from ${binary.source}`;
}

async function waitUntilReady(address: string, namespace: string, timeoutMs: number, exited: () => string | undefined): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError = 'no answer';
  while (Date.now() < deadline) {
    const gone = exited();
    if (gone) throw new Error(`the server process ${gone}`);
    try {
      const connection = await Connection.connect({ address, connectTimeout: 1_000 });
      try {
        await connection.workflowService.describeNamespace({ namespace });
        return;
      } finally {
        await connection.close();
      }
    } catch (error) {
      lastError = (error as Error).message;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`no answer within ${Math.round(timeoutMs / 1000)}s (last error: ${lastError})`);
}

async function stopChild(child: ChildProcess, hasExited: () => boolean): Promise<void> {
  if (hasExited()) return;
  const done = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
  await done;
  clearTimeout(timer);
}

async function startWithSdkDownload(args: {
  ip: string;
  port: number;
  uiPort: number;
  namespace: string;
  dbFile: string;
  headless: boolean;
  progress: (m: string) => void;
  tried: string[];
}): Promise<DevServer> {
  args.progress('No Temporal CLI found or built; trying the Temporal SDK\'s own download of the dev server...');
  const { TestWorkflowEnvironment } = await import('@temporalio/testing');
  try {
    const env = await TestWorkflowEnvironment.createLocal({
      server: {
        executable: { type: 'cached-download' },
        ip: args.ip,
        port: args.port,
        ui: !args.headless,
        uiPort: args.uiPort,
        dbFilename: args.dbFile,
        namespace: args.namespace,
        searchAttributes: [TreadlePipeline, TreadleStatus, TreadlePendingReviews],
      },
    });
    return {
      address: `${args.ip}:${args.port}`,
      namespace: args.namespace,
      ...(args.headless ? {} : { uiUrl: `http://${args.ip}:${args.uiPort}` }),
      dbFile: args.dbFile,
      binary: 'SDK download',
      stop: () => env.teardown(),
    };
  } catch (error) {
    throw new TemporalCliNotFoundError([...args.tried, `the SDK's dev-server download (failed: ${(error as Error).message})`]);
  }
}

/** A TCP port on 127.0.0.1 that nothing listens on right now (for servers started by tests and benchmarks). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.unref();
    probe.on('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}
