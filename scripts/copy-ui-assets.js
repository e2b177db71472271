// Copies the review inbox's browser assets (src/ui/assets: plain JS and CSS, no bundler) next to a compiled server,
// where its /assets/* route reads them: `<root>/ui/assets`, root given relative to the repository (default lib, as
// `npm run build` compiles src/ there; the benchmark's build passes .bench-build/src). Always copies, so an edited
// asset never runs stale.
'use strict';
const { cpSync, mkdirSync } = require('node:fs');
const { join, resolve } = require('node:path');

const repository = join(__dirname, '..');
const from = join(repository, 'src', 'ui', 'assets');
const to = join(resolve(repository, process.argv[2] ?? 'lib'), 'ui', 'assets');
mkdirSync(to, { recursive: true });
cpSync(from, to, { recursive: true });
