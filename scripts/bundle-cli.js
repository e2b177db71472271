#!/usr/bin/env node
/**
 * Bundles the CLI for `treadle validate` into one file, `lib/cli/offline.js`, after `tsc` has built `lib/`
 * (`npm run build` runs both).
 *
 * Why (issue 7: commands that do not talk to the server start in under 300 ms): `validate` loads about 200
 * modules, zod's 95 and yaml's 72 among them, and on a slow machine resolving, reading and wrapping them
 * one by one cost ~70 ms of its ~300 (measured: 0.29-0.30 s → 0.22-0.23 s, `node -e 0` 0.10 s). The bundle
 * is the same JavaScript tsc emitted, in one file.
 *
 * What is in it: `lib/cli/main.js` with everything it loads at start, the pipeline validator and the loop-file
 * reader (what `validate` loads), and the three packages they use (commander, zod, yaml). What is not: every
 * other package, the modules commands load lazily to talk to the server (the SDK client, the worker,
 * the dev server, tracing, the bundled examples), and the stage kinds' worker code that their rows of the table
 * of kinds load when a worker registers their activities (`src/kinds/<kind>/worker/kind.ts` requiring
 * `./activities`): all stay `require`s of the files in `lib/`.
 * `bin/treadle.js` runs the bundle for `validate` only; every other command runs `lib/cli/main.js`, so no
 * process loads the pipeline model twice, and `--help` and `pipelines` (which need neither zod nor yaml) do
 * not read the 680 KB bundle.
 */
const path = require('node:path');
const esbuild = require('esbuild');

const ROOT = path.resolve(__dirname, '..');
/** Packages inlined into the bundle; every other package stays a `require` of node_modules. */
const INLINED_PACKAGES = new Set(['commander', 'zod', 'yaml']);
/** Modules `lib/cli/main.js` loads lazily for commands that talk to the server (its `load` object). */
const SERVER_MODULES = [
  '../client',
  './dev',
  '../server/temporal-cli',
  '../worker',
  '../observability/tracing',
  './bundled-examples',
  // `treadle eval run`: the variants' checks and the scorers (the judge loads the Anthropic SDK).
  '../client/eval-runner',
  '../client/eval-scorers',
];

/** A stage kind's row of the worker table, whose same-folder requires (its activities) load only in a worker. */
const KIND_ROW = /[\\/]lib[\\/]kinds[\\/][^\\/]+[\\/]worker[\\/]kind\.js$/;

/** The package a bare import names (`@scope/name/sub` → `@scope/name`). */
function packageOf(specifier) {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

esbuild
  .build({
    entryPoints: [path.join(ROOT, 'lib', 'cli', 'main.js')],
    // Next to main.js, so `__dirname` and the external relative requires mean what they mean there.
    outfile: path.join(ROOT, 'lib', 'cli', 'offline.js'),
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'cjs',
    minifyWhitespace: true,
    minifySyntax: true,
    logLevel: 'warning',
    external: SERVER_MODULES,
    plugins: [
      {
        // zod's classic API carries every locale as `z.locales`: 371 KB, a third of a 1 MB bundle. Treadle
        // uses only the English messages zod sets by default, so the bundle's `z.locales` has `en` alone
        // (680 KB in all; `validate` ~20 ms faster here).
        name: 'zod-english-only',
        setup(build) {
          build.onResolve({ filter: /^\.\.\/locales\/index\.cjs$/ }, (args) =>
            args.importer.includes(`${path.sep}node_modules${path.sep}zod${path.sep}`)
              ? { path: 'zod-locales-en', namespace: 'treadle-zod-locales' }
              : undefined,
          );
          build.onLoad({ filter: /.*/, namespace: 'treadle-zod-locales' }, () => ({
            contents: `const en = require(${JSON.stringify(require.resolve('zod/v4/locales/en.cjs', { paths: [ROOT] }))});\nexports.en = en.default || en;\n`,
            resolveDir: ROOT,
            loader: 'js',
          }));
        },
      },
      {
        // The bundle sits in lib/cli/: the kept require names the file from there.
        name: 'kind-activities-stay-external',
        setup(build) {
          build.onResolve({ filter: /^\.\// }, (args) => {
            if (!KIND_ROW.test(args.importer)) return undefined;
            const target = path.resolve(path.dirname(args.importer), args.path);
            const fromBundle = path.relative(path.join(ROOT, 'lib', 'cli'), target);
            return { path: fromBundle.split(path.sep).join('/'), external: true };
          });
        },
      },
      {
        name: 'packages-stay-external',
        setup(build) {
          build.onResolve({ filter: /^[^./]/ }, (args) =>
            INLINED_PACKAGES.has(packageOf(args.path)) ? undefined : { path: args.path, external: true },
          );
        },
      },
    ],
  })
  .catch(() => process.exit(1));
