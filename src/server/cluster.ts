/**
 * A self-hosted Temporal server on PostgreSQL 15, started on this machine from nothing: the tests' second suite
 * (`npm run test:cluster`) and the benchmarks' second server run on it, and docs/deploy.md "A self-hosted server"
 * is this file's recipe by hand. In a folder of its own:
 *
 * 1. PostgreSQL: `initdb`, then `postgres` on a free port (src/server/postgres.ts);
 * 2. the schemas: the sql tool creates `temporal` and `temporal_visibility` and applies the schemas embedded in it
 *    (`setup-schema -v 0.0`, then `update-schema --schema-name postgresql/v12/...`);
 * 3. the server (`server start`): one process with all four services, or one process per service
 *    (frontend, history, matching, worker; `layout: 'per-service'`), each under the watchdog that stops it when
 *    this process ends (src/server/watchdog.ts);
 * 4. the namespace (a full server creates none) and Treadle's search attributes, then a visibility query that
 *    names one, so a caller can list work items at once.
 *
 * The binaries come from src/server/server-tools.ts (built once into the cache). Everything listens on 127.0.0.1.
 */
import { Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { createServer } from 'node:net';
import path from 'node:path';
import { ensureSearchAttributes } from './search-attributes';
import {
  CLUSTER_SERVICES,
  clusterSettings,
  BASE_POSTGRES_SETTINGS,
  serverConfigFiles,
  type ClusterPorts,
  type ClusterService,
  type ClusterSettings,
  type ServerProcessConfig,
} from './cluster-config';
import { initPostgres, type PostgresServer } from './postgres';
import { portAccepts, probeTemporal } from './probes';
import { resolveServerTools, type ServerTools } from './server-tools';
import { startWatched, type WatchedProcess } from './watchdog';
import { runSqlTool } from './sql-tool';

/** Options for {@link startCluster}. */
export interface ClusterOptions {
  /** An empty or missing folder for PostgreSQL's data, the config and the logs. */
  dir: string;
  /** One server process (default) or one per service. */
  layout?: 'one-process' | 'per-service';
  settings?: Partial<ClusterSettings>;
  /** The namespace to create (default `default`). */
  namespace?: string;
  /** Build the server with go install when missing (default true). */
  allowBuild?: boolean;
  progress?: (message: string) => void;
}

/** A running cluster. */
export interface Cluster {
  /** The frontend's `host:port`. */
  address: string;
  namespace: string;
  dir: string;
  settings: ClusterSettings;
  postgres: PostgresServer;
  /** The process id of each running server process, by the services it runs. */
  serverPids(): Record<string, number | undefined>;
  /** SIGKILLs every server process and resolves once they are gone (PostgreSQL keeps running). */
  killServer(): Promise<void>;
  /** Starts the server processes again and resolves once the namespace answers. */
  startServer(): Promise<void>;
  /** The last lines of every server log, for error messages. */
  logTail(lines?: number): string;
  /** Stops the server, then PostgreSQL. The folder stays (remove it yourself). */
  stop(): Promise<void>;
}

/** How long a started server has to answer for the namespace. */
const READY_TIMEOUT_MS = 120_000;

/** Starts PostgreSQL and a Temporal server on it; see the module comment. */
export async function startCluster(options: ClusterOptions): Promise<Cluster> {
  const progress = options.progress ?? ((m: string) => process.stderr.write(`${m}\n`));
  const settings = clusterSettings(options.settings);
  const namespace = options.namespace ?? 'default';
  const tools = await resolveServerTools({ allowBuild: options.allowBuild, progress });
  const ports = await allocatePorts();
  mkdirSync(options.dir, { recursive: true });
  const postgresDir = postgresFolder(options.dir);
  const postgres = initPostgres({
    dir: postgresDir,
    port: ports.postgres,
    user: DATABASE_USER,
    settings: { ...BASE_POSTGRES_SETTINGS, ...settings.postgres },
  });
  await postgres.start();
  const stopPostgres = async (): Promise<void> => {
    await postgres.stop();
    if (!postgresDir.startsWith(options.dir)) rmSync(postgresDir, { recursive: true, force: true });
  };
  const address = `127.0.0.1:${ports.frontend}`;
  let server: ServerProcesses | undefined;
  try {
    await createSchemas(tools, ports.postgres, DATABASE_USER);
    const groups = await writeServerConfig(options.dir, settings, ports, options.layout ?? 'one-process');
    server = serverProcesses({ tools, dir: options.dir, groups, ports, address, namespace, settings });
    progress(`starting a Temporal server on PostgreSQL (${groups.length} process${groups.length > 1 ? 'es' : ''})...`);
    await server.start();
    await registerSearchAttributes(address, namespace);
  } catch (error) {
    await server?.stop();
    await stopPostgres();
    throw error;
  }
  return {
    address,
    namespace,
    dir: options.dir,
    settings,
    postgres,
    serverPids: server.pids,
    killServer: server.kill,
    startServer: server.start,
    logTail: server.logTail,
    stop: async () => {
      await server.stop();
      await stopPostgres();
    },
  };
}

/** The database role the server connects as (trust authentication on 127.0.0.1). */
const DATABASE_USER = 'temporal';

/**
 * The server's configuration folder (serverConfigFiles: `cluster.yaml`, `cluster_<process>.yaml` with each process's
 * metrics port, the dynamic config); returns the processes.
 */
async function writeServerConfig(
  dir: string,
  settings: ClusterSettings,
  ports: ClusterPorts,
  layout: 'one-process' | 'per-service',
): Promise<ServerProcess[]> {
  const configDir = path.join(dir, 'config');
  mkdirSync(configDir, { recursive: true });
  const take = freePortsDistinct(Object.values(ports.services).flatMap((p) => [p.grpc, p.membership]));
  const groups: ServerProcess[] = [];
  for (const services of layout === 'per-service' ? CLUSTER_SERVICES.map((s) => [s]) : [[...CLUSTER_SERVICES]])
    groups.push({ name: services.length === 1 ? services[0]! : 'all', services, metricsPort: await take() });
  const files = serverConfigFiles({
    settings,
    ports,
    user: DATABASE_USER,
    env: CONFIG_ENV,
    configDir,
    processes: groups,
  });
  for (const [file, content] of Object.entries(files)) writeFileSync(path.join(configDir, file), content);
  return groups;
}

/** The name of the cluster's configuration (`--env`). */
const CONFIG_ENV = 'cluster';

/** The server's processes, started, killed and stopped together. */
interface ServerProcesses {
  start(): Promise<void>;
  kill(): Promise<void>;
  stop(): Promise<void>;
  pids(): Record<string, number | undefined>;
  logTail(lines?: number): string;
}

function serverProcesses(args: {
  tools: ServerTools;
  dir: string;
  groups: ServerProcess[];
  ports: ClusterPorts;
  address: string;
  namespace: string;
  settings: ClusterSettings;
}): ServerProcesses {
  const { tools, dir, groups, ports, address, namespace, settings } = args;
  let processes: Running[] = [];
  const logTail = (lines = 5): string =>
    processes.map((p) => `[${p.services.join(',')}] ${p.process.logTail(lines)}`).join('\n');
  const stop = async (): Promise<void> => {
    await Promise.all(processes.map((p) => p.process.stop()));
  };
  return {
    logTail,
    stop,
    pids: () => Object.fromEntries(processes.map((p) => [p.services.join(','), p.process.pid()])),
    // History first, alone, until its gRPC port is open, then the others: processes started together on a new
    // database race to write its cluster metadata, and the loser exits.
    start: async () => {
      processes = [];
      const launch = (group: ServerProcess): WatchedProcess => {
        const config = ['--root', dir, '--config', 'config', '--env', CONFIG_ENV, '--zone', group.name];
        const serverArgs = [...config, '--allow-no-auth'];
        const started = startWatched({
          command: tools.server,
          args: [...serverArgs, 'start', ...group.services.flatMap((s) => ['--service', s])],
          env: settings.goGc !== undefined ? { GOGC: String(settings.goGc) } : {},
          logFile: path.join(dir, `server-${group.name}.log`),
        });
        processes.push({ services: group.services, process: started });
        return started;
      };
      const [first, ...others] = groups;
      await launch(first!).started;
      await waitForPort(ports.services.history.grpc, processes, logTail);
      await Promise.all(others.map((group) => launch(group).started));
      await waitForNamespace(address, 'temporal-system', processes, logTail);
      await ensureNamespace(address, namespace);
      await waitForNamespace(address, namespace, processes, logTail);
    },
    kill: async () => {
      for (const p of processes) {
        const pid = p.process.pid();
        if (pid !== undefined && p.process.exited() === undefined) process.kill(pid, 'SIGKILL');
      }
      await stop();
    },
  };
}

/**
 * Where PostgreSQL keeps its data: `<dir>/postgres`, except when this process is root. PostgreSQL then runs as the
 * `postgres` user, which cannot enter a folder private to root (a test run's, for one), so its data goes to a
 * folder of its own in the system's tmp, removed by `stop()`.
 */
function postgresFolder(dir: string): string {
  return process.getuid?.() === 0
    ? mkdtempSync(path.join(os.tmpdir(), 'treadle-cluster-postgres-'))
    : path.join(dir, 'postgres');
}

/** A started server process and the services it runs. */
interface Running {
  services: ClusterService[];
  process: WatchedProcess;
}

/** One server process: the services it runs and the port of its metrics. */
interface ServerProcess extends ServerProcessConfig {
  services: ClusterService[];
}

async function allocatePorts(): Promise<ClusterPorts> {
  const take = freePortsDistinct();
  const services = {} as ClusterPorts['services'];
  for (const name of CLUSTER_SERVICES) services[name] = { grpc: await take(), membership: await take() };
  return {
    frontend: services.frontend.grpc,
    frontendHttp: await take(),
    postgres: await take(),
    services,
  };
}

/**
 * Free ports below Linux's ephemeral range (32768 and up), never the same one twice: the server stores membership
 * ports as a PostgreSQL smallint (at most 32767), and a port outside that range is never taken by a client's
 * outgoing connection between this probe and the server's bind.
 */
function freePortsDistinct(already: number[] = []): () => Promise<number> {
  const taken = new Set<number>(already);
  return async () => {
    for (;;) {
      const port = 20_000 + Math.floor(Math.random() * 12_000);
      if (!taken.has(port) && (await portFree(port))) {
        taken.add(port);
        return port;
      }
    }
  };
}

/** True when 127.0.0.1:port can be bound now. */
function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.unref();
    probe.once('error', () => resolve(false));
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)));
  });
}

/** Creates both databases and applies the schemas embedded in the sql tool. */
async function createSchemas(tools: ServerTools, port: number, user: string): Promise<void> {
  for (const [database, schema] of [
    ['temporal', 'postgresql/v12/temporal'],
    ['temporal_visibility', 'postgresql/v12/visibility'],
  ] as const) {
    const connect = { tool: tools.sql, port, user, database };
    await runSqlTool(connect, ['create-database']);
    await runSqlTool(connect, ['setup-schema', '-v', '0.0']);
    await runSqlTool(connect, ['update-schema', '--schema-name', schema]);
  }
}

/** Waits until the frontend answers for `namespace`; fails at once when a server process exits. */
async function waitForNamespace(
  address: string,
  namespace: string,
  processes: Running[],
  logTail: (lines?: number) => string,
): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    failWhenExited(processes, logTail);
    const probe = await probeTemporal(address, namespace);
    if (probe.ok) return;
    if (Date.now() > deadline)
      throw new Error(
        `the Temporal server did not answer for ${namespace} within 120 s (${probe.reason}):\n${logTail(15)}`,
      );
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

/** Throws, with the logs' last lines, when a server process has exited. */
function failWhenExited(processes: Running[], logTail: (lines?: number) => string): void {
  const gone = processes.find((p) => p.process.exited() !== undefined);
  if (gone)
    throw new Error(`the Temporal server (${gone.services.join(', ')}) ${gone.process.exited()}:\n${logTail(15)}`);
}

/** Waits until a server process's gRPC port accepts connections; fails at once when a server process exits. */
async function waitForPort(port: number, processes: Running[], logTail: (lines?: number) => string): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    failWhenExited(processes, logTail);
    if (await portAccepts('127.0.0.1', port)) return;
    if (Date.now() > deadline)
      throw new Error(`the Temporal server opened no port ${port} within 120 s:\n${logTail(15)}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** Registers the namespace (one day's retention of closed items) unless it exists. */
async function ensureNamespace(address: string, namespace: string): Promise<void> {
  const connection = await Connection.connect({ address });
  try {
    await connection.workflowService.registerNamespace({
      namespace,
      workflowExecutionRetentionPeriod: msToTs('1 day'),
    });
  } catch (error) {
    if ((error as { code?: number }).code !== 6 /* ALREADY_EXISTS */) throw error;
  } finally {
    await connection.close();
  }
}

/** Adds Treadle's search attributes, then waits until a visibility query naming one is accepted. */
async function registerSearchAttributes(address: string, namespace: string): Promise<void> {
  const connection = await Connection.connect({ address });
  try {
    await ensureSearchAttributes(connection, namespace);
    const deadline = Date.now() + 60_000;
    for (;;) {
      try {
        await connection.workflowService.listWorkflowExecutions({
          namespace,
          query: `TreadleStatus = 'running' AND TreadleDecisionAt > '2000-01-01T00:00:00Z'`,
          pageSize: 1,
        });
        return;
      } catch (error) {
        if (Date.now() > deadline) throw error;
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
  } finally {
    await connection.close();
  }
}
