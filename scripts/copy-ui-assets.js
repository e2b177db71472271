// Copies the review inbox's browser assets (src/ui/assets: plain JS and CSS, no bundler) next to the compiled
// server in lib/ui/assets, where its /assets/* route reads them. Run by `npm run build` after tsc.
'use strict';
const { cpSync, mkdirSync } = require('node:fs');
const { join } = require('node:path');

const from = join(__dirname, '..', 'src', 'ui', 'assets');
const to = join(__dirname, '..', 'lib', 'ui', 'assets');
mkdirSync(to, { recursive: true });
cpSync(from, to, { recursive: true });
