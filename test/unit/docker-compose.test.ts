/**
 * docker-compose.yml, read as data (there is no Docker engine on CI machines): every published port is bound
 * to 127.0.0.1, the dev server runs SQLite in WAL mode with synchronous=NORMAL (Treadle's default), it
 * registers exactly Treadle's search attributes, and it turns on priority and fairness of task dispatch as every
 * dev server Treadle starts does.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { SEARCH_ATTRIBUTE_DEFINITIONS } from '../../src/model/search-attributes';
import { DEFAULT_SQLITE_PRAGMAS } from '../../src/server/sqlite-pragmas';
import { devServerArgs, dynamicConfigArgs } from '../../src/server/dev-server';

interface Service {
  command?: string[];
  ports?: string[];
}

const compose = YAML.parse(readFileSync(path.join(__dirname, '..', '..', 'docker-compose.yml'), 'utf8')) as {
  services: Record<string, Service>;
};

it('publishes every port on 127.0.0.1 only', () => {
  const published = Object.entries(compose.services).flatMap(([name, service]) =>
    (service.ports ?? []).map((port) => ({ name, port: String(port) })),
  );
  expect(published.length).toBeGreaterThan(0);
  for (const { name, port } of published)
    expect({ name, port, bound: port.split(':')[0] }).toEqual({ name, port, bound: '127.0.0.1' });
});

it("runs the dev server with Treadle's SQLite pragmas and exactly Treadle's search attributes", () => {
  const command = compose.services.temporal?.command ?? [];
  expect(command.slice(0, 2)).toEqual(['server', 'start-dev']);
  const pragmas = Object.fromEntries(
    command.flatMap((arg, i) => (arg === '--sqlite-pragma' ? [command[i + 1]!.split('=') as [string, string]] : [])),
  );
  expect(pragmas).toEqual(DEFAULT_SQLITE_PRAGMAS);
  const attributes = Object.fromEntries(
    command
      .filter((arg) => arg.startsWith('--search-attribute='))
      .map((arg) => arg.slice('--search-attribute='.length).split('=') as [string, string]),
  );
  expect(attributes).toEqual(SEARCH_ATTRIBUTE_DEFINITIONS);
});

it('runs the dev server with the dynamic config of every dev server Treadle starts (priority and fairness)', () => {
  const command = compose.services.temporal?.command ?? [];
  const given = command.flatMap((arg, i) => (arg === '--dynamic-config-value' ? [arg, command[i + 1]!] : []));
  expect(given).toEqual(dynamicConfigArgs());
  expect(given).toContain('matching.enableFairness=true');
  // The same flags every dev server Treadle starts itself gets (`treadle dev`, the tests, the benchmarks).
  const args = devServerArgs({ ip: '127.0.0.1', port: 7233, dbFile: 'x.sqlite', namespace: 'default', headless: true });
  expect(args.join(' ')).toContain(
    '--dynamic-config-value matching.useNewMatcher=true --dynamic-config-value matching.enableFairness=true',
  );
});
