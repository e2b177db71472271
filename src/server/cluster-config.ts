/**
 * The configuration of a self-hosted Temporal server on PostgreSQL (src/server/cluster.ts): the server's YAML
 * (persistence, services, ports), its dynamic config, and the PostgreSQL settings, from one {@link ClusterSettings}.
 * The defaults are the settings measured to get the most from a small machine (BENCHMARKS.md "A production
 * Temporal on PostgreSQL"); docs/deploy.md explains each one.
 */
import path from 'node:path';
import YAML from 'yaml';
import { TASK_DISPATCH_DYNAMIC_CONFIG } from './dev-server';

/** What a cluster runs with. */
export interface ClusterSettings {
  /** The server's PostgreSQL driver: `postgres12` (lib/pq) or `postgres12_pgx` (pgx). */
  plugin: 'postgres12' | 'postgres12_pgx';
  /** History shards: fixed for the cluster's lifetime (a new database for another number). */
  historyShards: number;
  /** Connections each service keeps to the main database, and to the visibility database. */
  maxConns: number;
  visibilityMaxConns: number;
  /** Dynamic config values over {@link BASE_DYNAMIC_CONFIG}. */
  dynamicConfig: Record<string, unknown>;
  /** PostgreSQL `-c` settings over {@link BASE_POSTGRES_SETTINGS}. */
  postgres: Record<string, string>;
  /** The Go garbage collector's target (`GOGC`) of the server processes: higher trades memory for CPU. */
  goGc?: number;
}

/**
 * Dynamic config every Treadle cluster runs with: the module's development-sql.yaml (deployments and worker
 * versioning on, long ids), Temporal's priority and fairness of task dispatch (as on the dev server), and a
 * visibility rate the review inbox and `treadle decisions` fit in (10 listings a second by default; the dev server
 * allows 100).
 */
export const BASE_DYNAMIC_CONFIG: Readonly<Record<string, unknown>> = {
  'limit.maxIDLength': 255,
  'frontend.workerVersioningDataAPIs': true,
  'frontend.workerVersioningWorkflowAPIs': true,
  'frontend.workerVersioningRuleAPIs': true,
  'system.enableDeploymentVersions': true,
  'system.enableDeployments': true,
  'frontend.enableExecuteMultiOperation': true,
  'frontend.namespaceRPS.visibility': 100,
  ...TASK_DISPATCH_DYNAMIC_CONFIG,
};

/** PostgreSQL settings every cluster runs with: room for every service's pool. */
export const BASE_POSTGRES_SETTINGS: Readonly<Record<string, string>> = { max_connections: '400' };

/**
 * The settings a cluster starts with when none are given, measured on 2 cores (BENCHMARKS.md "A production Temporal
 * on PostgreSQL"): the pgx driver (a third less server CPU per work item than lib/pq), `GOGC=400` (less time in the
 * Go collector; each process keeps a few hundred MB more), four history shards, and PostgreSQL without fsync, the
 * durability of the dev server the benchmarks compare with (SQLite `synchronous=OFF`): it survives a crash of
 * PostgreSQL or of the server, not of the machine. A production database keeps fsync on (docs/deploy.md says
 * what that costs here).
 */
export const DEFAULT_CLUSTER_SETTINGS: ClusterSettings = {
  plugin: 'postgres12_pgx',
  historyShards: 4,
  maxConns: 20,
  visibilityMaxConns: 10,
  dynamicConfig: {},
  postgres: { fsync: 'off' },
  goGc: 400,
};

/** The defaults with `given` over them; its dynamic config and PostgreSQL settings over the defaults' key by key. */
export function clusterSettings(given: Partial<ClusterSettings> = {}): ClusterSettings {
  return {
    ...DEFAULT_CLUSTER_SETTINGS,
    ...given,
    dynamicConfig: { ...DEFAULT_CLUSTER_SETTINGS.dynamicConfig, ...given.dynamicConfig },
    postgres: { ...DEFAULT_CLUSTER_SETTINGS.postgres, ...given.postgres },
  };
}

/** The ports a cluster listens on (all on 127.0.0.1). */
export interface ClusterPorts {
  frontend: number;
  frontendHttp: number;
  postgres: number;
  /** gRPC and membership ports of each service. */
  services: Record<ClusterService, { grpc: number; membership: number }>;
}

/** The services, history first: a cluster's first process is the one that runs it (src/server/cluster.ts). */
export const CLUSTER_SERVICES = ['history', 'matching', 'frontend', 'worker'] as const;
export type ClusterService = (typeof CLUSTER_SERVICES)[number];

/**
 * The ports of a server on one machine, one process per service, as the module's configuration has them (the
 * frontend on 7233), with a Prometheus port per process: what `treadle server-config` writes.
 */
export const STANDARD_PORTS: ClusterPorts = {
  frontend: 7233,
  frontendHttp: 7243,
  postgres: 5432,
  services: {
    history: { grpc: 7234, membership: 6934 },
    matching: { grpc: 7235, membership: 6935 },
    frontend: { grpc: 7233, membership: 6933 },
    worker: { grpc: 7239, membership: 6939 },
  },
};
export const STANDARD_METRICS_PORTS: Readonly<Record<ClusterService, number>> = {
  history: 9091,
  matching: 9092,
  frontend: 9093,
  worker: 9094,
};

/** One server process: its name (a service's, or `all`) and the port of its metrics. */
export interface ServerProcessConfig {
  name: string;
  metricsPort: number;
}

/**
 * The server's configuration folder, file name to content: `<env>.yaml`, which every process reads, one
 * `<env>_<process>.yaml` per process with its metrics port, which the server reads over the first (`server --config
 * <dir> --env <env> --zone <process>`: processes on one machine cannot share a metrics port), and
 * `dynamicconfig.yaml`, named in the first by its path in `configDir`.
 */
export function serverConfigFiles(args: {
  settings: ClusterSettings;
  ports: ClusterPorts;
  /** PostgreSQL's host (default 127.0.0.1); its port is `ports.postgres`. */
  databaseHost?: string;
  user: string;
  env: string;
  /** Where the files will be read from: the dynamic config's path is written into the server's file. */
  configDir: string;
  processes: ServerProcessConfig[];
}): Record<string, string> {
  const { settings, env, processes } = args;
  const dynamicConfigFile = path.join(args.configDir, 'dynamicconfig.yaml');
  return {
    [`${env}.yaml`]: serverConfigYaml({ ...args, dynamicConfigFile }),
    ...Object.fromEntries(processes.map((p) => [`${env}_${p.name}.yaml`, processConfigYaml(p.metricsPort)])),
    'dynamicconfig.yaml': dynamicConfigYaml(settings),
  };
}

/**
 * The server's YAML for these settings and ports. A template (the server renders files that say `enable-template`):
 * the database password is read from `SQL_PASSWORD` in the server's environment, as the sql tool reads it, so no
 * secret is written into the file.
 */
export function serverConfigYaml(args: {
  settings: ClusterSettings;
  ports: ClusterPorts;
  databaseHost?: string;
  user: string;
  dynamicConfigFile: string;
}): string {
  const { settings, ports, user } = args;
  const store = (databaseName: string, maxConns: number): unknown => ({
    sql: {
      pluginName: settings.plugin,
      databaseName,
      connectAddr: `${args.databaseHost ?? '127.0.0.1'}:${ports.postgres}`,
      connectProtocol: 'tcp',
      user,
      password: PASSWORD_PLACEHOLDER,
      maxConns,
      maxIdleConns: maxConns,
      maxConnLifetime: '1h',
    },
  });
  const services = Object.fromEntries(
    CLUSTER_SERVICES.map((name) => [
      name,
      {
        rpc: {
          grpcPort: ports.services[name].grpc,
          membershipPort: ports.services[name].membership,
          bindOnLocalHost: true,
          ...(name === 'frontend' ? { httpPort: ports.frontendHttp } : {}),
        },
      },
    ]),
  );
  const config = YAML.stringify({
    log: { stdout: true, level: 'warn' },
    persistence: {
      defaultStore: 'postgres-default',
      visibilityStore: 'postgres-visibility',
      numHistoryShards: settings.historyShards,
      datastores: {
        'postgres-default': store('temporal', settings.maxConns),
        'postgres-visibility': store('temporal_visibility', settings.visibilityMaxConns),
      },
    },
    global: { membership: { maxJoinDuration: '30s', broadcastAddress: '127.0.0.1' } },
    services,
    clusterMetadata: {
      enableGlobalNamespace: false,
      failoverVersionIncrement: 10,
      masterClusterName: 'active',
      currentClusterName: 'active',
      clusterInformation: {
        active: {
          enabled: true,
          initialFailoverVersion: 1,
          rpcName: 'frontend',
          rpcAddress: `127.0.0.1:${ports.frontend}`,
          httpAddress: `127.0.0.1:${ports.frontendHttp}`,
        },
      },
    },
    dcRedirectionPolicy: { policy: 'noop' },
    archival: { history: { state: 'disabled' }, visibility: { state: 'disabled' } },
    namespaceDefaults: { archival: { history: { state: 'disabled' }, visibility: { state: 'disabled' } } },
    dynamicConfigClient: { filepath: args.dynamicConfigFile, pollInterval: '10s' },
  });
  // As JSON, a YAML string whatever the password holds.
  const password = `{{ env "SQL_PASSWORD" | toJson }}`;
  return `# enable-template (the server renders this file: SQL_PASSWORD from its environment)\n${config.replaceAll(PASSWORD_PLACEHOLDER, password)}`;
}

/** Where the password template goes (YAML would quote the template itself). */
const PASSWORD_PLACEHOLDER = 'SQL-PASSWORD-FROM-THE-ENVIRONMENT';

/** A process's own file, read over the server's: the port of its Prometheus metrics. */
export function processConfigYaml(metricsPort: number): string {
  return YAML.stringify({
    global: {
      metrics: {
        prometheus: { framework: 'tally', timerType: 'histogram', listenAddress: `127.0.0.1:${metricsPort}` },
      },
    },
  });
}

/** The dynamic config file: each key as a list of one unconstrained value, as the server reads it. */
export function dynamicConfigYaml(settings: ClusterSettings): string {
  const values = { ...BASE_DYNAMIC_CONFIG, ...settings.dynamicConfig };
  return YAML.stringify(Object.fromEntries(Object.entries(values).map(([key, value]) => [key, [{ value }]])));
}
