/**
 * Every name README.md and docs/ tell SDK users to import from 'treadle' is exported by the package's entry point
 * (src/index.ts → lib/index.js): the ```ts samples' `import { … } from 'treadle'` lines, values and types alike.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import * as treadle from '../../src';
import { parseMarkdown } from '../support/markdown-samples';

const ROOT = path.join(__dirname, '..', '..');
const INDEX = path.join(ROOT, 'src', 'index.ts');

/** README.md and every Markdown file under docs/. */
function documents(): string[] {
  const docs = path.join(ROOT, 'docs');
  const pages = existsSync(docs)
    ? readdirSync(docs, { recursive: true, withFileTypes: true })
        .filter((entry) => entry.isFile() && entry.name.endsWith('.md'))
        .map((entry) => path.join(entry.parentPath, entry.name))
    : [];
  return [path.join(ROOT, 'README.md'), ...pages];
}

/** `name (file:line)` for each name a ```ts sample imports from 'treadle'. */
function documentedImports(): Map<string, string> {
  const names = new Map<string, string>();
  for (const file of documents()) {
    const { samples } = parseMarkdown(readFileSync(file, 'utf8'), path.relative(ROOT, file));
    for (const sample of samples.filter((s) => s.lang === 'ts' || s.lang === 'typescript')) {
      for (const [, list] of sample.code.matchAll(/import\s+(?:type\s+)?\{([^}]*)\}\s*from\s*'treadle'/g)) {
        for (const part of list!.split(',')) {
          const name = part
            .trim()
            .replace(/^type\s+/, '')
            .split(/\s+as\s+/)[0]!;
          if (name && !names.has(name)) names.set(name, `${sample.file}:${sample.line}`);
        }
      }
    }
  }
  return names;
}

/** The names a module declares as exported, types included (`export … from` lists and `export *` followed). */
function exportedNames(file: string, seen = new Set<string>()): Set<string> {
  const names = new Set<string>();
  if (seen.has(file)) return names;
  seen.add(file);
  const text = readFileSync(file, 'utf8');
  const declarations =
    /^export\s+(?:declare\s+)?(?:async\s+)?(?:function|const|let|class|interface|type|enum)\s+(\w+)/gm;
  for (const [, name] of text.matchAll(declarations)) names.add(name!);
  for (const [, list] of text.matchAll(/^export\s+(?:type\s+)?\{([^}]*)\}/gm))
    for (const part of list!.split(','))
      names.add(
        part
          .trim()
          .replace(/^type\s+/, '')
          .split(/\s+as\s+/)
          .pop()!,
      );
  for (const [, target] of text.matchAll(/^export\s+(?:type\s+)?\*\s+from\s+'(\.[^']+)'/gm)) {
    const base = path.resolve(path.dirname(file), target!);
    const resolved = [`${base}.ts`, path.join(base, 'index.ts')].find((candidate) => existsSync(candidate));
    if (resolved) for (const name of exportedNames(resolved, seen)) names.add(name);
  }
  names.delete('');
  return names;
}

it('exports every name the docs import from treadle', () => {
  const documented = documentedImports();
  // The extraction finds the samples it is meant to (README's tour, the SDK page's install sample).
  expect([...documented.keys()]).toEqual(
    expect.arrayContaining(['pipeline', 'TreadleClient', 'runWorker', 'treadleExternalStorage', 'CallLog']),
  );
  const exported = exportedNames(INDEX);
  const missing = [...documented].filter(([name]) => !exported.has(name)).map(([name, at]) => `${name} (${at})`);
  expect(missing).toEqual([]);
});

it('exports at run time every documented name that is a value, not a type', () => {
  const runtime = new Set(Object.keys(treadle));
  const values = [...documentedImports().keys()].filter((name) => !isDeclaredType(name));
  expect(values.filter((name) => !runtime.has(name))).toEqual([]);
});

/** Whether src/ declares `name` as an interface or a type alias (which exist only for the type checker). */
function isDeclaredType(name: string): boolean {
  const declaration = new RegExp(`^export\\s+(?:declare\\s+)?(?:interface|type)\\s+${name}\\b`, 'm');
  return readdirSync(path.join(ROOT, 'src'), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
    .some((entry) => declaration.test(readFileSync(path.join(entry.parentPath, entry.name), 'utf8')));
}
