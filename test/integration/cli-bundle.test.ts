/**
 * `treadle validate` runs from the bundled CLI (`lib/cli/offline.js`, scripts/bundle-cli.js) and every other
 * command from `lib/cli/main.js` (bin/treadle.js). The bundle must be the same program: each case below runs
 * both and compares exit code, stdout and stderr. It must also be what `validate` loads: one file, not zod's
 * and yaml's ~170 modules, with zod's English messages (its other locales are left out). A bundle older than
 * main.js is never used.
 */
import { mkdtempSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { runCommand, TREADLE_BIN as BIN, type CliRun } from '../support/cli';

const ROOT = path.join(__dirname, '..', '..');
const MAIN = path.join(ROOT, 'lib', 'cli', 'main.js');
const BUNDLE = path.join(ROOT, 'lib', 'cli', 'offline.js');

/** `node args…` in the repository, with the test process's environment. */
function node(args: string[]): Promise<CliRun> {
  return runCommand(process.execPath, args, { cwd: ROOT, timeoutMs: 60_000 });
}

/** The files `bin/treadle.js <args>` loaded, as `require.cache` holds them when the process exits. */
async function loadedBy(args: string[]): Promise<string[]> {
  const script = `process.argv = [process.argv[0], ${JSON.stringify(BIN)}, ...${JSON.stringify(args)}];
process.on('exit', () => process.stderr.write('\\nLOADED ' + JSON.stringify(Object.keys(require.cache)) + '\\n'));
require(${JSON.stringify(BIN)});`;
  const run = await node(['-e', script]);
  const line = run.stderr.split('\n').find((l) => l.startsWith('LOADED '));
  if (!line) throw new Error(`no module list from ${args.join(' ')}: ${run.stderr}`);
  return JSON.parse(line.slice('LOADED '.length)) as string[];
}

const dir = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'cli-bundle-'));
const write = (name: string, content: string): string => {
  const file = path.join(dir, name);
  writeFileSync(file, content);
  return file;
};

const cases: Record<string, () => string[]> = {
  'a valid YAML pipeline': () => ['validate', path.join(ROOT, 'examples', 'review-demo.yaml')],
  'a v3 loop pipeline file': () => ['validate', path.join(ROOT, 'examples', 'loops', 'full-ideation', 'pipeline.yaml')],
  'a JSON pipeline': () => [
    'validate',
    write('ok.json', JSON.stringify({ name: 'ok', stages: [{ name: 'a', run: 'scripted' }] })),
  ],
  'a pipeline with every kind of problem': () => [
    'validate',
    write(
      'bad.yaml',
      'name: bad\nstages:\n  - name: a\n    run: scriptd\n    depends_on: [b]\n  - name: b\n    run: scripted\n    depends_on: [a]\n    retry_budget: { max_attempts: 0 }\n',
    ),
  ],
  // zod's own English messages (the bundle keeps zod's English locale only).
  'a file zod rejects field by field (a TDD spec, not a pipeline)': () => [
    'validate',
    path.join(ROOT, 'examples', 'tdd', 'textkit.yaml'),
  ],
  'a file that is not YAML': () => ['validate', write('broken.yaml', 'name: [unclosed\n')],
  'a missing file': () => ['validate', path.join(dir, 'missing.yaml')],
  'validate --help': () => ['validate', '--help'],
  'validate with no file': () => ['validate'],
};

describe('the bundled validate is the same program as lib/cli/main.js', () => {
  for (const [name, args] of Object.entries(cases)) {
    it(name, async () => {
      const argv = args();
      const [bundled, compiled] = await Promise.all([node([BIN, ...argv]), node([MAIN, ...argv])]);
      expect(bundled).toEqual(compiled);
      // Not two empty outputs: each case prints something.
      expect(bundled.stdout.length + bundled.stderr.length).toBeGreaterThan(0);
    });
  }
});

it("prints zod's English messages from the bundle, which keeps zod's English locale only", async () => {
  const run = await node([
    BIN,
    'validate',
    write('many.yaml', 'name: many\nmax_parallel: many\nstages: [{ name: a, run: scripted }]\n'),
  ]);
  expect(run.code).toBe(1);
  expect(run.stderr).toContain('max_parallel: Invalid input: expected number, received string');
});

it('loads one bundled file for validate, and lib/cli/main.js for every other command', async () => {
  const validate = await loadedBy(['validate', path.join(ROOT, 'examples', 'review-demo.yaml')]);
  expect(validate).toEqual([BIN, BUNDLE]);

  const pipelines = await loadedBy(['pipelines']);
  expect(pipelines).toContain(MAIN);
  expect(pipelines).not.toContain(BUNDLE);
  // `pipelines` talks to no server and validates nothing: none of the heavy packages load for it.
  const packages = new Set(
    pipelines.flatMap((f) => {
      const inside = f.split(`${path.sep}node_modules${path.sep}`)[1];
      if (inside === undefined) return [];
      const parts = inside.split(path.sep);
      return [parts[0]!.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]!];
    }),
  );
  const heavy = [
    'zod',
    '@temporalio/client',
    '@temporalio/worker',
    '@temporalio/common',
    '@anthropic-ai/sdk',
    'nunjucks',
    'liquidjs',
    '@aws-sdk/client-s3',
  ];
  expect(heavy.filter((name) => packages.has(name))).toEqual([]);
  expect(packages.size).toBeGreaterThan(0); // the listing reached node_modules at all (commander)
});

it('never runs a bundle older than lib/cli/main.js', async () => {
  const { atime, mtime } = statSync(BUNDLE);
  const mainBuilt = statSync(MAIN).mtime;
  try {
    utimesSync(BUNDLE, atime, new Date(mainBuilt.getTime() - 60_000));
    const loaded = await loadedBy(['validate', path.join(ROOT, 'examples', 'review-demo.yaml')]);
    expect(loaded).toContain(MAIN);
    expect(loaded).not.toContain(BUNDLE);
  } finally {
    utimesSync(BUNDLE, atime, mtime);
  }
});
