/**
 * README and docs/ stay true to the code and to themselves: every environment variable src/ reads is in the
 * configuration table; in every document, every "see X" names a heading or a bold paragraph lead of that
 * document, and "above" or "below" points the way it lies; every relative link reaches a file, and its
 * anchor a heading of that file. Also the code-block extractor the samples test uses (fences, markers).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parseMarkdown, parseMarker } from '../support/markdown-samples';

const ROOT = path.join(__dirname, '..', '..');
const README = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
/** Every document checked here: README.md and everything under docs/, by path from the root. */
const DOCUMENTS = [
  'README.md',
  ...(existsSync(path.join(ROOT, 'docs')) ? sourceFiles(path.join(ROOT, 'docs'), '.md') : []),
]
  .map((file) => path.relative(ROOT, path.resolve(ROOT, file)))
  .map((file) => ({ file, text: readFileSync(path.join(ROOT, file), 'utf8') }));

/** Read by src/ but set by the platform or another tool, not Treadle's configuration (why, for each). */
const NOT_TREADLE_SETTINGS: Record<string, string> = {
  PATH: 'the operating system',
  USER: "the operating system's; TREADLE_REVIEWER's default in the table",
  GOTOOLCHAIN: "Go's own, passed on to the `go install` that builds the Temporal CLI",
  GOFLAGS: "Go's own, passed on to that `go install`",
  AWS_REGION: "the AWS SDK's; TREADLE_S3_REGION's default in the table",
  AWS_DEFAULT_REGION: "the AWS SDK's, read with AWS_REGION",
  COLUMNS: "the terminal's width, set by the shell; docs/cli.md says how tables use it",
  XDG_CONFIG_HOME: "the XDG base directory; TEMPORAL_CONFIG_FILE's default in the table follows it",
  XDG_STATE_HOME: "the XDG base directory; TREADLE_HOME's default in the table follows it",
  HOME: "the operating system's; TREADLE_HOME's default in the table is under it",
  USERPROFILE: "Windows' HOME, for TREADLE_HOME's default when LOCALAPPDATA is unset",
  LOCALAPPDATA: "Windows' per-user state folder; TREADLE_HOME's default in the table follows it",
};

function sourceFiles(dir: string, extension = '.ts'): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith(extension))
    .map((entry) => path.join(entry.parentPath, entry.name));
}

/** Names src/ reads from the environment: `env.X`, `env['X']`, and the `X_ENV = 'NAME'` constants read through. */
function environmentReads(): Map<string, string> {
  const reads = new Map<string, string>();
  const patterns = [
    /\benv\.([A-Z][A-Z0-9_]*)\b/g,
    /\benv\[\s*['"]([A-Z][A-Z0-9_]*)['"]\s*\]/g,
    /\bconst\s+[A-Z][A-Z0-9_]*_ENV\s*=\s*'([A-Z][A-Z0-9_]*)'/g,
  ];
  for (const file of sourceFiles(path.join(ROOT, 'src'))) {
    const text = readFileSync(file, 'utf8');
    for (const pattern of patterns) {
      for (const [, name] of text.matchAll(pattern)) if (!reads.has(name!)) reads.set(name!, path.relative(ROOT, file));
    }
  }
  return reads;
}

/** The first column of the configuration table: in README, or in docs/ once README is split. */
function configurationTable(): Set<string> {
  const docs = path.join(ROOT, 'docs');
  const others = existsSync(docs) ? sourceFiles(docs, '.md').map((file) => readFileSync(file, 'utf8')) : [];
  // From the heading to the next one, or to the end of the file.
  const heading = /^#{1,3} Configuration\n([\s\S]*?)(?=^#{1,3} |(?![\s\S]))/m;
  const sectionOf = (text: string): string | undefined => heading.exec(text)?.[1];
  const section = [README, ...others].map(sectionOf).find((s) => s !== undefined) ?? '';
  return new Set([...section.matchAll(/^\| `([A-Z][A-Z0-9_]*)` \|/gm)].map((m) => m[1]!));
}

it('lists every environment variable src/ reads in the configuration table', () => {
  const reads = environmentReads();
  const table = configurationTable();
  // The scan finds what it is meant to: names read directly and through constants.
  const sure = ['TEMPORAL_PROFILE', 'TREADLE_TDD_REPOS', 'TREADLE_GIT_AUTHOR_NAME', 'OTEL_SERVICE_NAME'];
  expect([...reads.keys()]).toEqual(expect.arrayContaining(sure));
  const missing = [...reads]
    .filter(([name]) => !table.has(name) && !(name in NOT_TREADLE_SETTINGS))
    .map(([name, file]) => `${name} (read in ${file})`);
  expect(missing).toEqual([]);
});

/** Where a "see X" may point: headings and bold paragraph leads (`**Idempotent runs.**`), by line. */
function targets(text: string, file: string): { text: string; line: number }[] {
  const { headings } = parseMarkdown(text, file);
  const leads = [...text.matchAll(/^\*\*([^*]+?)\.?\*\*/gm)].map((m) => ({ text: m[1]!, line: lineAt(text, m.index) }));
  return [...headings, ...leads];
}

const lineAt = (text: string, offset: number): number => text.slice(0, offset).split('\n').length;

it('points every "see X" at a section of the same document, in the direction it says', () => {
  const problems: string[] = [];
  for (const { file, text } of DOCUMENTS) {
    const all = targets(text, file);
    // A reference may break across lines: match on the text with newlines as spaces (offsets unchanged).
    for (const m of text.replace(/\n/g, ' ').matchAll(/\b[Ss]ee (?:\*([^*]+)\*|"([^"]+)")(?:\s+(above|below))?/g)) {
      const name = (m[1] ?? m[2]!).trim();
      const line = `${file}:${lineAt(text, m.index)}`;
      const found = all.filter(
        (t) => t.text === name || t.text.startsWith(`${name}:`) || t.text.startsWith(`${name} (`),
      );
      if (found.length === 0) problems.push(`${line}: "${name}" is no heading or bold lead`);
      else if (m[3] === 'above' && !found.some((t) => t.line < lineAt(text, m.index)))
        problems.push(`${line}: "${name}" is below`);
      else if (m[3] === 'below' && !found.some((t) => t.line > lineAt(text, m.index)))
        problems.push(`${line}: "${name}" is above`);
    }
  }
  expect(problems).toEqual([]);
});

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens; repeats get -1, -2, … */
function anchors(text: string, file: string): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  for (const { text: heading } of parseMarkdown(text, file).headings) {
    const plain = heading.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1');
    const slug = plain
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    result.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return result;
}

it('links only to files that exist, and to headings they have', () => {
  const problems: string[] = [];
  let checked = 0;
  for (const { file, text } of DOCUMENTS) {
    // Code blocks and code spans hold no links.
    const prose = text.replace(/^(\s*)(`{3,}|~{3,})[\s\S]*?^\1\2\s*$/gm, '').replace(/`[^`\n]*`/g, '');
    for (const m of prose.matchAll(/\]\(([^()\s]+)\)/g)) {
      const target = m[1]!;
      if (/^[a-z]+:/i.test(target)) continue; // https:, mailto:
      const [where = '', anchor] = target.split('#');
      const linked = where === '' ? path.join(ROOT, file) : path.resolve(path.dirname(path.join(ROOT, file)), where);
      checked++;
      if (!existsSync(linked)) problems.push(`${file}: ${target}: no such file`);
      else if (anchor !== undefined && !anchors(readFileSync(linked, 'utf8'), linked).has(anchor))
        problems.push(`${file}: ${target}: no such heading in ${path.relative(ROOT, linked)}`);
    }
  }
  expect(problems).toEqual([]);
  expect(checked).toBeGreaterThan(20);
});

describe('the code-block extractor', () => {
  it('reads fences of any length and indentation, their language, section and marker', () => {
    const text = [
      '# One',
      '<!-- sample: not-run (starts a server (for good)) -->',
      '```sh',
      'npx treadle dev',
      '```',
      '## Two',
      '- a list item:',
      '  ````yaml',
      '  a: 1',
      '  ```',
      '  b: 2',
      '  ````',
      '<!-- sample: fragment examples/x.yaml -->',
      '~~~',
      '# not a heading',
      '~~~',
    ].join('\n');
    const { samples, headings } = parseMarkdown(text, 'doc.md');
    expect(samples).toEqual([
      {
        file: 'doc.md',
        line: 3,
        lang: 'sh',
        code: 'npx treadle dev',
        section: 'One',
        marker: { mode: 'not-run', argument: '', reason: 'starts a server (for good)' },
      },
      { file: 'doc.md', line: 8, lang: 'yaml', code: 'a: 1\n```\nb: 2', section: 'Two' },
      {
        file: 'doc.md',
        line: 14,
        lang: '',
        code: '# not a heading',
        section: 'Two',
        marker: { mode: 'fragment', argument: 'examples/x.yaml' },
      },
    ]);
    expect(headings.map((h) => h.text)).toEqual(['One', 'Two']);
  });

  it('refuses an unclosed fence and an empty marker', () => {
    const unclosed = (): unknown => parseMarkdown('text\n```ts\nconst a = 1;\n', 'doc.md');
    expect(unclosed).toThrow('doc.md:2: the code block opened here is never closed');
    expect(() => parseMarker('  ')).toThrow('a sample marker needs a mode');
  });
});
