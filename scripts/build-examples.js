#!/usr/bin/env node
/**
 * Builds the bundled examples (examples/**.ts) into `lib/examples/index.js` after `tsc` has built `lib/`
 * from `src/` (`npm run build` runs both); the CLI's worker loads it (src/cli/bundled-examples.ts), and SDK users
 * import it as `treadle/examples` (package.json "exports"), typed by the `index.d.ts` written beside it.
 *
 * Why a bundle and not tsc: lib/ holds src/'s output at its top (`lib/worker/index.js`, `lib/cli/main.js`, what
 * `main`, bin/treadle.js and the image run), so tsc cannot emit examples/ beside it without moving all of it
 * under lib/src/. The examples import the core by source paths (`../../src/kinds/builder`), which suits the
 * type checker, ESLint and jest; here each such import becomes a `require` of the compiled core module in
 * lib/ (`../kinds/builder`), so the examples share the core's module instances. Packages stay `require`s.
 * esbuild only strips types: `npm run typecheck` checks examples/ with everything else.
 */
const { writeFileSync } = require('node:fs');
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
  // esbuild emits no types: the entry's one export has the shape tsc declared in lib/cli/bundled-examples.d.ts.
  .then(() => {
    const exported = Object.keys(require(path.join(OUT_DIR, 'index.js')));
    if (exported.join() !== 'bundledExamples')
      throw new Error(`examples/index.ts exports ${exported.join(', ')}: declare them in lib/examples/index.d.ts here`);
    writeFileSync(
      path.join(OUT_DIR, 'index.d.ts'),
      [
        '/** The bundled examples (examples/index.ts): written by scripts/build-examples.js. */',
        "import type { BundledExamples } from '../cli/bundled-examples';",
        'export declare const bundledExamples: BundledExamples;',
        '',
      ].join('\n'),
    );
  })
  .catch((error) => {
    if (!error.errors) process.stderr.write(`build-examples: ${error.message}\n`);
    process.exit(1);
  });
