/**
 * The configuration of a self-hosted Temporal server on PostgreSQL (src/server/cluster.ts): the server's YAML
 * (persistence, services, ports), its dynamic config, and the PostgreSQL settings, from one {@link ClusterSettings}.
 * The defaults are the settings measured to get the most from a small machine (BENCHMARKS.md "A production
 * Temporal on PostgreSQL"); docs/deploy.md explains each one.
 */
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

/** The server's YAML for these settings and ports (`server --config <dir> --env <name>`). */
export function serverConfigYaml(args: {
  settings: ClusterSettings;
  ports: ClusterPorts;
  user: string;
  dynamicConfigFile: string;
  /** The Prometheus port of the process that reads this file (each process of a cluster has its own). */
  metricsPort: number;
}): string {
  const { settings, ports, user } = args;
  const store = (databaseName: string, maxConns: number): unknown => ({
    sql: {
      pluginName: settings.plugin,
      databaseName,
      connectAddr: `127.0.0.1:${ports.postgres}`,
      connectProtocol: 'tcp',
      user,
      password: '',
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
  return YAML.stringify({
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
    global: {
      membership: { maxJoinDuration: '30s', broadcastAddress: '127.0.0.1' },
      metrics: {
        prometheus: { framework: 'tally', timerType: 'histogram', listenAddress: `127.0.0.1:${args.metricsPort}` },
      },
    },
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
}

/** The dynamic config file: each key as a list of one unconstrained value, as the server reads it. */
export function dynamicConfigYaml(settings: ClusterSettings): string {
  const values = { ...BASE_DYNAMIC_CONFIG, ...settings.dynamicConfig };
  return YAML.stringify(Object.fromEntries(Object.entries(values).map(([key, value]) => [key, [{ value }]])));
}
