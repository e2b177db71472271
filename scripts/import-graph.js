#!/usr/bin/env node
/**
 * Draws which folders of `src/` import which, as a Mermaid flowchart between the markers in
 * docs/architecture.md, so the picture of the layers is made from the code and cannot drift from it.
 *
 *   node scripts/import-graph.js            rewrites the diagram in docs/architecture.md
 *   node scripts/import-graph.js --check    exits 1 when the committed diagram differs from the code's
 *   --doc <file>                            another markdown file (the unit test checks a stale copy)
 *
 * A node is a folder directly under `src/` (or a file still loose there); an edge `a --> b` says some file in
 * `a` imports (or lazily requires, or imports only types from) some file in `b`. `src/index.ts`, the package
 * entry that re-exports the public API of every layer, is left out: it would point at everything.
 * test/unit/import-graph.test.ts runs `--check`.
 */
'use strict';
const { existsSync, readFileSync, readdirSync, statSync, writeFileSync } = require('node:fs');
const path = require('node:path');
const ts = require('typescript');

const ROOT = path.join(__dirname, '..');
const SRC = path.join(ROOT, 'src');
const START = '<!-- import-graph:start (scripts/import-graph.js writes this block) -->';
const END = '<!-- import-graph:end -->';
/** The package entry: re-exports from every layer, so it is no part of the layering. */
const ENTRY = 'index.ts';

/** Every TypeScript file under `dir`, recursively. */
function sourceFiles(dir) {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) return sourceFiles(full);
    return name.endsWith('.ts') && !name.endsWith('.d.ts') ? [full] : [];
  });
}

/** The file a relative specifier names (`./x` → x.ts or x/index.ts), or undefined for a package or non-TS file. */
function resolve(fromFile, specifier) {
  if (!specifier.startsWith('.')) return undefined;
  const base = path.resolve(path.dirname(fromFile), specifier.replace(/\.js$/, ''));
  return [`${base}.ts`, path.join(base, 'index.ts')].find((candidate) => existsSync(candidate));
}

/** The graph node a file of `src/` belongs to: its top folder, or the file's own name when it sits in src/. */
function nodeOf(file) {
  return path.relative(SRC, file).split(path.sep)[0];
}

/** The folder-to-folder import edges of `src/`, sorted: `[importer, imported]` pairs. */
function importEdges(srcDir = SRC) {
  const edges = new Set();
  for (const file of sourceFiles(srcDir)) {
    if (path.relative(srcDir, file) === ENTRY) continue;
    const from = nodeOf(file);
    const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
    for (const { fileName } of importedFiles) {
      const target = resolve(file, fileName);
      if (target === undefined || !target.startsWith(srcDir + path.sep)) continue;
      const to = nodeOf(target);
      if (to !== from && to !== ENTRY) edges.add(`${from}\t${to}`);
    }
  }
  return [...edges].sort().map((edge) => edge.split('\t'));
}

/** A Mermaid-safe id for a node name (`fan-out.ts` → `fan_out_ts`). */
const idOf = (name) => name.replace(/[^A-Za-z0-9]/g, '_');

/** The Mermaid block: importers above what they import, one line per edge. */
function mermaid(edges) {
  const nodes = [...new Set(edges.flat())].sort();
  // The marker tells test/integration/readme-samples.test.ts the block is not code to run.
  const lines = ['<!-- sample: not-run (a diagram drawn by scripts/import-graph.js) -->', '```mermaid', 'flowchart TD'];
  for (const node of nodes) lines.push(`  ${idOf(node)}["${node.endsWith('.ts') ? node : `${node}/`}"]`);
  for (const [from, to] of edges) lines.push(`  ${idOf(from)} --> ${idOf(to)}`);
  lines.push('```');
  return lines.join('\n');
}

/** `doc` with the text between the markers replaced by `block`; throws when the markers are missing. */
function withDiagram(doc, block) {
  const start = doc.indexOf(START);
  const end = doc.indexOf(END);
  if (start < 0 || end < start) throw new Error(`the markers ${START} … ${END} are missing`);
  return `${doc.slice(0, start + START.length)}\n${block}\n${doc.slice(end)}`;
}

function main(argv) {
  const docIndex = argv.indexOf('--doc');
  const docFile = docIndex >= 0 ? path.resolve(argv[docIndex + 1]) : path.join(ROOT, 'docs', 'architecture.md');
  const doc = readFileSync(docFile, 'utf8');
  const updated = withDiagram(doc, mermaid(importEdges()));
  if (argv.includes('--check')) {
    if (updated === doc) return 0;
    process.stderr.write(
      `${path.relative(ROOT, docFile)}: the import graph is out of date with src/; run node scripts/import-graph.js\n`,
    );
    return 1;
  }
  if (updated !== doc) writeFileSync(docFile, updated);
  return 0;
}

if (require.main === module) {
  try {
    process.exitCode = main(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`import-graph: ${error.message}\n`);
    process.exitCode = 2;
  }
}

module.exports = { importEdges, mermaid, withDiagram };
