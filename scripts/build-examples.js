#!/usr/bin/env node
/**
 * Builds the bundled examples (examples/**.ts) into `lib/examples/index.js` after `tsc` has built `lib/`
 * from `src/` (`npm run build` runs both); the default worker loads it (src/bundled-examples.ts).
 *
 * Why a bundle and not tsc: lib/ holds src/'s output at its top (`lib/worker.js`, `lib/cli/main.js`, what
 * `main`, bin/treadle.js and the image run), so tsc cannot emit examples/ beside it without moving all of it
 * under lib/src/. The examples import the core by source paths (`../../src/model/builder`), which suits the
 * type checker, ESLint and jest; here each such import becomes a `require` of the compiled core module in
 * lib/ (`../model/builder`), so the examples share the core's module instances. Packages stay `require`s.
 * esbuild only strips types: `npm run typecheck` checks examples/ with everything else.
 */
const path = require('node:path');
const esbuild = require('esbuild');

const ROOT = path.resolve(__dirname, '..');
const SRC = path.join(ROOT, 'src');
const OUT_DIR = path.join(ROOT, 'lib', 'examples');

esbuild
  .build({
    entryPoints: [path.join(ROOT, 'examples', 'index.ts')],
    outfile: path.join(OUT_DIR, 'index.js'),
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'cjs',
    sourcemap: true,
    logLevel: 'warning',
    plugins: [
      {
        name: 'core-from-lib',
        setup(build) {
          // A relative import that lands in src/ is the compiled module at the same place under lib/.
          build.onResolve({ filter: /^\./ }, (args) => {
            const target = path.resolve(args.resolveDir, args.path);
            if (!target.startsWith(SRC + path.sep)) return undefined;
            const inLib = path.relative(OUT_DIR, path.join(ROOT, 'lib', path.relative(SRC, target)));
            return { path: inLib.split(path.sep).join('/'), external: true };
          });
          // Every package stays a require of node_modules.
          build.onResolve({ filter: /^[^./]/ }, (args) => ({ path: args.path, external: true }));
        },
      },
    ],
  })
  .catch(() => process.exit(1));
