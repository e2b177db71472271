/**
 * The optional peer dependencies (issue 37 §5, src/config/optional-packages.ts): a feature's missing package is one
 * configuration error naming the setting and an `npm install` at package.json's ranges; a module missing inside an
 * installed package, or any other failure, is not mistaken for it. (The packages really absent: pack-install.test.ts.)
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { loadOptional, OPTIONAL_FEATURES } from '../../src/config/optional-packages';
import { TreadleError } from '../../src/config/errors';

const manifest = JSON.parse(readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8')) as {
  dependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
  peerDependenciesMeta: Record<string, { optional?: boolean }>;
};

/** What Node's `require` throws for a specifier it cannot find. */
function notFound(specifier: string): Error {
  return Object.assign(new Error(`Cannot find module '${specifier}'\nRequire stack:\n- /app/lib/x.js`), {
    code: 'MODULE_NOT_FOUND',
  });
}

function thrownBy(load: () => unknown): unknown {
  try {
    load();
  } catch (error) {
    return error;
  }
  throw new Error('nothing thrown');
}

it('lists every package of every feature as an optional peer dependency, and none as a dependency', () => {
  const packages = Object.values(OPTIONAL_FEATURES).flatMap((feature) => [...feature.packages]);
  expect(packages.filter((name) => manifest.peerDependenciesMeta[name]?.optional !== true)).toEqual([]);
  expect(packages.filter((name) => name in manifest.dependencies)).toEqual([]);
  expect(Object.keys(manifest.peerDependencies).sort()).toEqual([...packages].sort());
});

it('turns a missing package (or a subpath of it) into one configuration error naming the npm install', () => {
  const pg = thrownBy(() =>
    loadOptional('postgres', () => {
      throw notFound('pg');
    }),
  );
  expect(pg).toBeInstanceOf(TreadleError);
  expect((pg as TreadleError).code).toBe('config');
  expect((pg as TreadleError).message).toBe(
    `A PostgreSQL call log (TREADLE_CALL_LOG=postgres://…) needs pg, which is not installed: npm install pg@${manifest.peerDependencies.pg}`,
  );

  const tracing = thrownBy(() =>
    loadOptional('tracing', () => {
      throw notFound('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors');
    }),
  ) as TreadleError;
  expect(tracing.code).toBe('config');
  const specs = OPTIONAL_FEATURES.tracing.packages.map((name) => `${name}@${manifest.peerDependencies[name]}`);
  expect(tracing.message).toMatch(
    /^Tracing \(.*\) needs @temporalio\/interceptors-opentelemetry, which is not installed/,
  );
  expect(tracing.message.endsWith(`: npm install ${specs.join(' ')}`)).toBe(true);
});

it('rethrows anything else as it is: a module missing inside an installed package, another error', () => {
  const inside = notFound('pg-pool');
  expect(
    thrownBy(() =>
      loadOptional('postgres', () => {
        throw inside;
      }),
    ),
  ).toBe(inside);
  const other = new Error('boom');
  expect(
    thrownBy(() =>
      loadOptional('s3', () => {
        throw other;
      }),
    ),
  ).toBe(other);
  expect(loadOptional('s3', () => 42)).toBe(42);
});
