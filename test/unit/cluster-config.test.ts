/**
 * The self-hosted server's configuration (src/server/cluster-config.ts): the YAML the server reads, parsed back, and
 * the dynamic config file in the shape the server's file client takes.
 */
import YAML from 'yaml';
import {
  CLUSTER_SERVICES,
  DEFAULT_CLUSTER_SETTINGS,
  clusterSettings,
  dynamicConfigYaml,
  serverConfigFiles,
  type ClusterPorts,
} from '../../src/server/cluster-config';

const ports: ClusterPorts = {
  frontend: 21001,
  frontendHttp: 21002,
  postgres: 21003,
  services: {
    history: { grpc: 21010, membership: 21011 },
    matching: { grpc: 21020, membership: 21021 },
    frontend: { grpc: 21001, membership: 21031 },
    worker: { grpc: 21040, membership: 21041 },
  },
};

/** The server's file as the server reads it: the template rendered with `password` as SQL_PASSWORD. */
const rendered = (file: string, password: string): string =>
  file.replace('{{ env "SQL_PASSWORD" | toJson }}', JSON.stringify(password));

it('points both stores at the local PostgreSQL with the pools and shards of the settings, each service at its ports', () => {
  const settings = clusterSettings({ plugin: 'postgres12', historyShards: 8, maxConns: 30, visibilityMaxConns: 6 });
  const files = serverConfigFiles({
    settings,
    ports,
    user: 'temporal',
    env: 'cluster',
    configDir: '/x/config',
    processes: [
      { name: 'history', metricsPort: 21050 },
      { name: 'frontend', metricsPort: 21051 },
    ],
  });
  expect(Object.keys(files).sort()).toEqual([
    'cluster.yaml',
    'cluster_frontend.yaml',
    'cluster_history.yaml',
    'dynamicconfig.yaml',
  ]);
  // A template the server renders, the password from its environment, so no secret is in the file.
  expect(files['cluster.yaml']!.split('\n')[0]).toMatch(/^# enable-template\b/);
  const config = YAML.parse(rendered(files['cluster.yaml']!, `it's "quoted"`));
  expect(config.persistence.datastores['postgres-default'].sql.password).toBe(`it's "quoted"`);
  expect(config.persistence).toMatchObject({
    defaultStore: 'postgres-default',
    visibilityStore: 'postgres-visibility',
    numHistoryShards: 8,
  });
  expect(config.persistence.datastores['postgres-default'].sql).toMatchObject({
    pluginName: 'postgres12',
    databaseName: 'temporal',
    connectAddr: '127.0.0.1:21003',
    user: 'temporal',
    maxConns: 30,
    maxIdleConns: 30,
  });
  expect(config.persistence.datastores['postgres-visibility'].sql).toMatchObject({
    databaseName: 'temporal_visibility',
    maxConns: 6,
  });
  for (const name of CLUSTER_SERVICES)
    expect(config.services[name].rpc).toMatchObject({
      grpcPort: ports.services[name].grpc,
      membershipPort: ports.services[name].membership,
      bindOnLocalHost: true,
    });
  expect(config.services.frontend.rpc.httpPort).toBe(21002);
  expect(config.clusterMetadata.clusterInformation.active.rpcAddress).toBe('127.0.0.1:21001');
  // Each process's metrics port in a file of its own, read over the server's (--zone).
  expect(config.global.metrics).toBeUndefined();
  expect(YAML.parse(files['cluster_history.yaml']!)).toEqual({
    global: { metrics: { prometheus: expect.objectContaining({ listenAddress: '127.0.0.1:21050' }) } },
  });
  expect(YAML.parse(files['cluster_frontend.yaml']!).global.metrics.prometheus.listenAddress).toBe('127.0.0.1:21051');
  expect(config.dynamicConfigClient.filepath).toBe('/x/config/dynamicconfig.yaml');
  // Membership ports are stored in a smallint column.
  for (const name of CLUSTER_SERVICES) expect(ports.services[name].membership).toBeLessThan(32_768);
});

it('writes dynamic config as lists of one value per key, the settings over the base (versioning, fairness, visibility rate)', () => {
  const file = YAML.parse(
    dynamicConfigYaml({ ...DEFAULT_CLUSTER_SETTINGS, dynamicConfig: { 'history.persistenceMaxQPS': 12000 } }),
  );
  expect(file['history.persistenceMaxQPS']).toEqual([{ value: 12000 }]);
  expect(file['system.enableDeploymentVersions']).toEqual([{ value: true }]);
  expect(file['matching.enableFairness']).toEqual([{ value: true }]);
  expect(file['frontend.namespaceRPS.visibility']).toEqual([{ value: 100 }]);
  for (const entry of Object.values(file)) expect(entry).toEqual([{ value: expect.anything() }]);
});

it('takes the measured defaults (pgx, GOGC 400, fsync off) and merges given PostgreSQL settings and dynamic config key by key', () => {
  expect(clusterSettings()).toEqual(DEFAULT_CLUSTER_SETTINGS);
  expect(DEFAULT_CLUSTER_SETTINGS).toMatchObject({ plugin: 'postgres12_pgx', goGc: 400, postgres: { fsync: 'off' } });
  const given = clusterSettings({ postgres: { fsync: 'on', shared_buffers: '256MB' }, dynamicConfig: { a: 1 } });
  expect(given.postgres).toEqual({ fsync: 'on', shared_buffers: '256MB' });
  expect(given.dynamicConfig).toEqual({ a: 1 });
  expect(given.plugin).toBe('postgres12_pgx');
});
