/**
 * The import graph in docs/architecture.md is the code's (scripts/import-graph.js draws it from src/'s imports):
 * the committed diagram matches, and the check fails on a diagram that has drifted from the code.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const root = path.join(__dirname, '..', '..');
const script = path.join(root, 'scripts', 'import-graph.js');
const doc = path.join(root, 'docs', 'architecture.md');

function check(...args: string[]): { status: number | null; stderr: string } {
  const result = spawnSync(process.execPath, [script, '--check', ...args], { cwd: root, encoding: 'utf8' });
  return { status: result.status, stderr: result.stderr };
}

it('docs/architecture.md draws the imports src/ has today (else: node scripts/import-graph.js)', () => {
  expect(check()).toEqual({ status: 0, stderr: '' });
});

it('fails on a diagram that has drifted from the code, naming the command that redraws it', () => {
  const text = readFileSync(doc, 'utf8');
  const edge = /^ {2}engine --> model$/m;
  expect(text).toMatch(edge);
  const stale = path.join(mkdtempSync(path.join(os.tmpdir(), 'import-graph-')), 'architecture.md');
  writeFileSync(stale, text.replace(edge, '  engine --> kinds'));
  const result = check('--doc', stale);
  expect(result.status).toBe(1);
  expect(result.stderr).toContain('the import graph is out of date with src/; run node scripts/import-graph.js');
});
