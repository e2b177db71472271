/**
 * `treadle server-config` as an operator runs it (docs/deploy.md, step 3), read by the Temporal server itself: its
 * `render-config` loads the folder as `start` does (production.yaml, then production_<service>.yaml over it, the
 * template rendered with the environment), so what a service would run with is checked without taking the standard
 * ports. The cluster suite's own server starts from files the same code writes (src/server/cluster.ts).
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { resolveServerTools } from '../../src/server/server-tools';
import { runCli, runCommand } from '../support/cli';

const root = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'server-config-'));
const config = path.join(root, 'config');
const SERVICES = ['history', 'matching', 'frontend', 'worker'];

/** What the test reads of the configuration the server loaded (render-config prints it as YAML). */
interface LoadedConfig {
  persistence: { datastores: Record<string, { sql: Record<string, unknown> }> };
  dynamicConfigClient: { filepath: string };
  global: { membership: { broadcastAddress: string }; metrics: { prometheus: { listenAddress: string } } };
}

it('writes a folder the server loads: each service with its own metrics port, the password from the environment whatever it holds', async () => {
  const written = await runCli(['server-config', '--root', root, '--database', 'db.internal:6432', '--user', 'tmprl'], {
    timeoutMs: 20_000,
  });
  expect(written).toMatchObject({ code: 0 });
  expect(written.stdout.trim().split('\n').sort()).toEqual(
    ['dynamicconfig.yaml', 'production.yaml', ...SERVICES.map((s) => `production_${s}.yaml`)]
      .map((f) => path.join(config, f))
      .sort(),
  );
  expect(written.stderr).toContain(`server --root ${root} --config config --env production --zone <service>`);
  expect(readFileSync(path.join(config, 'production.yaml'), 'utf8')).not.toContain('s3cr');

  const { server } = await resolveServerTools({ allowBuild: false, progress: () => undefined });
  const render = async (zone: string, env: NodeJS.ProcessEnv) => {
    const run = await runCommand(server, ['--config', config, '--env', 'production', '--zone', zone, 'render-config'], {
      env,
      timeoutMs: 20_000,
    });
    if (run.code !== 0) throw new Error(`render-config --zone ${zone}: exit ${run.code}\n${run.stderr}`);
    return YAML.parse(run.stdout) as LoadedConfig;
  };
  // A password YAML would choke on if the template pasted it in as it is (render-config then fails; it masks the
  // value it loaded, so the unit test checks that value: test/unit/cluster-config.test.ts).
  const withPassword = { ...process.env, SQL_PASSWORD: `s3cr"et: 'with' quotes # and a hash` };
  const metrics: Record<string, string> = {};
  for (const service of SERVICES) {
    const loaded = await render(service, withPassword);
    const main = loaded.persistence.datastores['postgres-default']!.sql;
    expect({ service, ...main }).toMatchObject({
      service,
      pluginName: 'postgres12_pgx',
      connectAddr: 'db.internal:6432',
      user: 'tmprl',
    });
    expect(loaded.dynamicConfigClient.filepath).toBe(path.join(config, 'dynamicconfig.yaml'));
    // Read over production.yaml, the process's file keeps what it does not name.
    expect(loaded.global.membership.broadcastAddress).toBe('127.0.0.1');
    metrics[service] = loaded.global.metrics.prometheus.listenAddress;
  }
  // Four processes on one machine, four metrics ports.
  expect(metrics).toEqual({
    history: '127.0.0.1:9091',
    matching: '127.0.0.1:9092',
    frontend: '127.0.0.1:9093',
    worker: '127.0.0.1:9094',
  });
  // Again: nothing is replaced without --force.
  const again = await runCli(['server-config', '--root', root], { timeoutMs: 20_000 });
  expect(again.code).toBe(2);
  expect(again.stderr).toMatch(/^treadle: not replacing files that exist \(give --force to replace them\):\n {2}- /);
  expect((await runCli(['server-config', '--root', root, '--force'], { timeoutMs: 20_000 })).code).toBe(0);
  const bad = await runCli(['server-config', '--root', root, '--database', 'no-port'], { timeoutMs: 20_000 });
  expect(bad).toMatchObject({
    code: 2,
    stderr: 'treadle: --database must be host:port (e.g. 127.0.0.1:5432), not "no-port"\n',
  });
});
