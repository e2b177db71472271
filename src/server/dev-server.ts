/**
 * Starts a real Temporal dev server (the CLI's `server start-dev`) persisted to SQLite, with Treadle's
 * search attributes registered, and stops it cleanly. Used by `treadle dev`, the tests and the benchmarks,
 * so all three run the same server the same way: under a watchdog that stops it when the starting process
 * ends however it ends (./watchdog.ts), with the SQLite pragmas of ./sqlite-pragmas.ts, and declared ready
 * only when it answers, never killed while it is alive and still starting.
 */
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { createServer, type AddressInfo } from 'node:net';
import {
  SEARCH_ATTRIBUTE_DEFINITIONS,
  TreadleApprovals,
  TreadleCorrelationId,
  TreadleEvalRun,
  TreadleForkOf,
  TreadleDecisionAt,
  TreadlePendingReviews,
  TreadlePipeline,
  TreadleStatus,
} from '../model/search-attributes';
import { devDatabaseFile } from '../config/home';
import { portAccepts, probeTemporal } from './probes';
import { resolveSqlitePragmas, sqlitePragmaArgs } from './sqlite-pragmas';
import { resolveTemporalCli, TemporalCliNotFoundError, type ResolvedBinary } from './temporal-cli';
import { startWatched, type WatchedProcess } from './watchdog';

/** Options for {@link startDevServer}. */
export interface DevServerOptions {
  port?: number;
  uiPort?: number;
  /** SQLite file; the folder is created. Default `<TREADLE_HOME>/temporal.sqlite` (src/config/home.ts). */
  dbFile?: string;
  ip?: string;
  namespace?: string;
  /** No Web UI (tests). */
  headless?: boolean;
  /**
   * `--sqlite-pragma` settings over the defaults (`journal_mode=WAL`, `synchronous=NORMAL`) and over
   * `TREADLE_SQLITE_PRAGMAS`, e.g. `{ synchronous: 'OFF' }` for benchmarks.
   */
  sqlitePragmas?: Record<string, string>;
  /** Where the server's own log goes (default: next to the database). */
  logFile?: string;
  /** Build the CLI with go install when missing (default true). */
  allowBuild?: boolean;
  /** Fall back to the SDK's download of a dev server when no binary can be found or built (default true). */
  allowDownload?: boolean;
  /**
   * How long a server that is alive may take to answer before Treadle gives up and stops it (default
   * `TREADLE_SERVER_START_TIMEOUT` seconds, else 5 minutes). A server that exits fails the start at once.
   */
  readyTimeoutMs?: number;
  /**
   * Serve the server's Prometheus metrics (`--metrics-port`) at `http://<ip>:<port>/metrics`; off by default.
   * The benchmark reads the persistence operations per item from them.
   */
  metricsPort?: number;
  /**
   * Dynamic config over {@link TASK_DISPATCH_DYNAMIC_CONFIG}, one `--dynamic-config-value` each (values as JSON),
   * e.g. `{ 'matching.numTaskqueueWritePartitions': 1 }` for dispatch in exact priority and fairness order.
   */
  dynamicConfig?: Record<string, unknown>;
  progress?: (message: string) => void;
}

/** A running dev server. */
export interface DevServer {
  address: string;
  namespace: string;
  uiUrl?: string;
  dbFile: string;
  binary: string;
  /** The SQLite pragmas it runs with. */
  sqlitePragmas: Record<string, string>;
  /** The server process, when Treadle started it itself. */
  pid?: number;
  /** Where its Prometheus metrics are served, with {@link DevServerOptions.metricsPort}. */
  metricsUrl?: string;
  stop(): Promise<void>;
}

export const DEFAULT_PORT = 7233;
export const DEFAULT_UI_PORT = 8233;
/** The environment variable for {@link DevServerOptions.readyTimeoutMs}, in seconds. */
export const SERVER_START_TIMEOUT_ENV = 'TREADLE_SERVER_START_TIMEOUT';
/** Generous: a cold machine, a first SQLite migration and a loaded CI box all fit. */
export const DEFAULT_READY_TIMEOUT_MS = 5 * 60_000;
const PROBE_INTERVAL_MS = 250;
const PROBE_TIMEOUT_MS = 2_000;
/** Quiet while a normal start takes its second or two; then say what we wait for, now and then. */
const FIRST_PROGRESS_AFTER_MS = 5_000;
const PROGRESS_EVERY_MS = 15_000;
/** A dev server that crashes while starting (a Go panic, exit code 2: seen once under a loaded CI) is started again, once. */
const START_ATTEMPTS_AFTER_CRASH = 2;

/**
 * Dynamic config every Treadle dev server runs with: Temporal's priority and fairness of task dispatch, off by
 * default in server 1.29 (what CLI 1.5.1 embeds). With them, a work item's `priority` goes before a backlog of
 * lower ones and its `fairness_key` shares the queue with other keys by weight; without them both are ignored
 * (docs/deploy.md says what a self-hosted server and Temporal Cloud need).
 */
export const TASK_DISPATCH_DYNAMIC_CONFIG: Readonly<Record<string, boolean>> = {
  'matching.useNewMatcher': true,
  'matching.enableFairness': true,
};

/** The `--dynamic-config-value KEY=VALUE` arguments (values as JSON) for {@link TASK_DISPATCH_DYNAMIC_CONFIG}. */
export function dynamicConfigArgs(values: Readonly<Record<string, unknown>> = TASK_DISPATCH_DYNAMIC_CONFIG): string[] {
  return Object.entries(values).flatMap(([key, value]) => [
    '--dynamic-config-value',
    `${key}=${JSON.stringify(value)}`,
  ]);
}

/** What {@link devServerArgs} builds a command line from. */
export interface DevServerCommand {
  ip: string;
  port: number;
  dbFile: string;
  namespace: string;
  /** No Web UI; otherwise it is served on `uiPort` (default {@link DEFAULT_UI_PORT}). */
  headless?: boolean;
  uiPort?: number;
  /** One `--sqlite-pragma` each; none when absent or empty (SQLite's and the CLI's own defaults). */
  sqlitePragmas?: Record<string, string>;
  metricsPort?: number;
  /** Dynamic config over {@link TASK_DISPATCH_DYNAMIC_CONFIG}. */
  dynamicConfig?: Record<string, unknown>;
}

/**
 * The arguments of `temporal server start-dev` for a Treadle dev server: address, database, namespace, quiet
 * log, Web UI or headless, Treadle's search attributes, the SQLite pragmas, priority and fairness of task
 * dispatch ({@link TASK_DISPATCH_DYNAMIC_CONFIG}) and the metrics port. The
 * benchmark starts its "no pragmas" server with these too, so both start the same server the same way.
 */
export function devServerArgs(command: DevServerCommand): string[] {
  const args = [
    'server',
    'start-dev',
    '--ip',
    command.ip,
    '--port',
    String(command.port),
    '--db-filename',
    command.dbFile,
    '--namespace',
    command.namespace,
    '--log-level',
    'warn',
  ];
  if (command.headless) args.push('--headless');
  else args.push('--ui-port', String(command.uiPort ?? DEFAULT_UI_PORT));
  for (const [key, type] of Object.entries(SEARCH_ATTRIBUTE_DEFINITIONS))
    args.push('--search-attribute', `${key}=${type}`);
  args.push(...sqlitePragmaArgs(command.sqlitePragmas ?? {}));
  args.push(...dynamicConfigArgs({ ...TASK_DISPATCH_DYNAMIC_CONFIG, ...command.dynamicConfig }));
  if (command.metricsPort !== undefined) args.push('--metrics-port', String(command.metricsPort));
  return args;
}

/** Starts the server and resolves once it answers gRPC calls for `namespace`. */
export async function startDevServer(options: DevServerOptions = {}): Promise<DevServer> {
  const ip = options.ip ?? '127.0.0.1';
  const port = options.port ?? DEFAULT_PORT;
  const uiPort = options.uiPort ?? DEFAULT_UI_PORT;
  const namespace = options.namespace ?? 'default';
  const dbFile = path.resolve(options.dbFile ?? devDatabaseFile());
  const sqlitePragmas = resolveSqlitePragmas(options.sqlitePragmas);
  const readyTimeoutMs = options.readyTimeoutMs ?? readyTimeoutFromEnv();
  mkdirSync(path.dirname(dbFile), { recursive: true });
  const progress = options.progress ?? ((m: string) => process.stderr.write(`${m}\n`));
  // Probe where a client on this machine would connect (a server bound to every interface answers on loopback).
  const address = `${connectableHost(ip)}:${port}`;
  if (await portAccepts(connectableHost(ip), port)) {
    throw new Error(
      `cannot start a Temporal dev server on ${address}: another process already listens there (stop it, or choose another port)`,
    );
  }

  const { binary, tried } = await resolveTemporalCli({ allowBuild: options.allowBuild ?? true, progress });
  if (!binary) {
    if (options.allowDownload === false) throw new TemporalCliNotFoundError(tried);
    return startWithSdkDownload({
      ip,
      port,
      uiPort,
      namespace,
      dbFile,
      headless: options.headless ?? false,
      sqlitePragmas,
      dynamicConfig: { ...TASK_DISPATCH_DYNAMIC_CONFIG, ...options.dynamicConfig },
      progress,
      tried,
    });
  }

  const args = devServerArgs({
    ip,
    port,
    dbFile,
    namespace,
    headless: options.headless,
    uiPort,
    sqlitePragmas,
    metricsPort: options.metricsPort,
    dynamicConfig: options.dynamicConfig,
  });

  const logFile = options.logFile ?? `${dbFile}.log`;
  // The hint names the variable only when the variable (or its default) set the deadline.
  const hint =
    options.readyTimeoutMs === undefined ? `; raise ${SERVER_START_TIMEOUT_ENV} (seconds) if this machine is slow` : '';
  const server = await startReady({
    binary,
    args,
    logFile,
    address,
    namespace,
    timeoutMs: readyTimeoutMs,
    hint,
    progress,
  });
  const pid = await server.started;
  return {
    address,
    namespace,
    ...(options.headless ? {} : { uiUrl: `http://${ip === '0.0.0.0' ? 'localhost' : ip}:${uiPort}` }),
    dbFile,
    binary: binary.path,
    sqlitePragmas,
    pid,
    ...(options.metricsPort !== undefined
      ? { metricsUrl: `http://${connectableHost(ip)}:${options.metricsPort}/metrics` }
      : {}),
    stop: () => server.stop(),
  };
}

/**
 * Starts the CLI's dev server and resolves once it answers; a crash while starting (exit code 2, a Go panic or
 * fatal runtime error, not a refusal of these arguments, which is code 1) is started again, once.
 */
async function startReady(args: {
  binary: ResolvedBinary;
  args: string[];
  logFile: string;
  address: string;
  namespace: string;
  timeoutMs: number;
  hint: string;
  progress: (message: string) => void;
}): Promise<WatchedProcess> {
  const { binary, logFile, address, progress } = args;
  for (let attempt = 1; ; attempt++) {
    const server = startWatched({ command: binary.path, args: args.args, logFile });
    try {
      await waitUntilReady({ ...args, server });
      return server;
    } catch (error) {
      await server.stop();
      const detail = server.logTail();
      if (/exited with code 2 /.test((error as Error).message) && attempt < START_ATTEMPTS_AFTER_CRASH) {
        progress(`The Temporal dev server crashed while starting (${detail.split('\n')[0]}); starting it again`);
        continue;
      }
      throw new Error(
        `the Temporal dev server (${describe(binary)}) did not start on ${address}: ${(error as Error).message}${detail ? `\n    ${detail.split('\n').join('\n    ')}` : ''}\n    (full log: ${logFile})`,
      );
    }
  }
}

function describe(binary: ResolvedBinary): string {
  return `${binary.path}, from ${binary.source}`;
}

function connectableHost(ip: string): string {
  if (ip === '0.0.0.0') return '127.0.0.1';
  if (ip === '::') return '::1';
  return ip;
}

function readyTimeoutFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const text = env[SERVER_START_TIMEOUT_ENV];
  if (text === undefined || text === '') return DEFAULT_READY_TIMEOUT_MS;
  const seconds = Number(text);
  if (!Number.isFinite(seconds) || seconds <= 0)
    throw new Error(`${SERVER_START_TIMEOUT_ENV} must be a positive number of seconds, got "${text}"`);
  return seconds * 1_000;
}

/**
 * Waits until the server answers `DescribeNamespace`, saying now and then what it waits for. Fails at once
 * when the server process is gone, and after `timeoutMs` otherwise (the caller then stops the server).
 */
async function waitUntilReady(args: {
  server: WatchedProcess;
  address: string;
  namespace: string;
  timeoutMs: number;
  hint: string;
  logFile: string;
  progress: (message: string) => void;
}): Promise<void> {
  const { server, address, namespace, timeoutMs, hint, logFile, progress } = args;
  const started = Date.now();
  let nextProgress = started + FIRST_PROGRESS_AFTER_MS;
  let lastReason = 'no answer yet';
  for (;;) {
    const gone = server.exited();
    if (gone) throw new Error(`the server process ${gone}${gone.startsWith('exited') ? ' before it answered' : ''}`);
    const probe = await probeTemporal(address, namespace, PROBE_TIMEOUT_MS);
    if (probe.ok) return;
    lastReason = probe.reason;
    const now = Date.now();
    if (now - started >= timeoutMs) {
      throw new Error(
        `no answer within ${seconds(timeoutMs)} although the process is alive (last: ${lastReason})${hint}`,
      );
    }
    if (now >= nextProgress) {
      const pid = server.pid();
      progress(
        `Waiting for the Temporal dev server${pid ? ` (pid ${pid})` : ''} to answer on ${address}: ${seconds(now - started)} so far, giving up after ${seconds(timeoutMs)} (last: ${lastReason}); its log: ${logFile}`,
      );
      nextProgress = now + PROGRESS_EVERY_MS;
    }
    await new Promise((r) => setTimeout(r, PROBE_INTERVAL_MS));
  }
}

function seconds(ms: number): string {
  return `${Math.round(ms / 1000)}s`;
}

async function startWithSdkDownload(args: {
  ip: string;
  port: number;
  uiPort: number;
  namespace: string;
  dbFile: string;
  headless: boolean;
  sqlitePragmas: Record<string, string>;
  dynamicConfig: Record<string, unknown>;
  progress: (m: string) => void;
  tried: string[];
}): Promise<DevServer> {
  args.progress("No Temporal CLI found or built; trying the Temporal SDK's own download of the dev server...");
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
        searchAttributes: [
          TreadlePipeline,
          TreadleStatus,
          TreadlePendingReviews,
          TreadleApprovals,
          TreadleCorrelationId,
          TreadleDecisionAt,
          TreadleForkOf,
          TreadleEvalRun,
        ],
        extraArgs: [...sqlitePragmaArgs(args.sqlitePragmas), ...dynamicConfigArgs(args.dynamicConfig)],
      },
    });
    return {
      address: `${args.ip}:${args.port}`,
      namespace: args.namespace,
      ...(args.headless ? {} : { uiUrl: `http://${args.ip}:${args.uiPort}` }),
      dbFile: args.dbFile,
      binary: 'SDK download',
      sqlitePragmas: args.sqlitePragmas,
      stop: () => env.teardown(),
    };
  } catch (error) {
    throw new TemporalCliNotFoundError([
      ...args.tried,
      `the SDK's dev-server download (failed: ${(error as Error).message})`,
    ]);
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
