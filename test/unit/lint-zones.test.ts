/**
 * The layer zones and the determinism convention in eslint.config.mjs bite (issue 38): each fixture in
 * test/fixtures/lint/ is linted as if it sat at a path in one zone, where its import is forbidden, and at a path
 * where the same import is allowed. Workflow code is found by convention: every file of a kind's folder is
 * workflow code except its `worker/` folder and its `client.ts` / `client-*.ts` files. A lazy `require` is allowed
 * only in the lazy-loading files, also found by name.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';

const root = path.join(__dirname, '..', '..');
const fixture = (name: string): string =>
  readFileSync(path.join(root, 'test', 'fixtures', 'lint', `${name}.ts.txt`), 'utf8');

const ZONE = 'import-x/no-restricted-paths';
const DETERMINISM = 'no-restricted-imports';
const REQUIRE = '@typescript-eslint/no-require-imports';

/** One lint: the fixture's text linted as `as`, and the rule expected to flag it (none: it must pass clean). */
interface Case {
  fixture: string;
  as: string;
  flaggedBy: string | null;
}

const cases: Case[] = [
  { fixture: 'model-imports-kind', as: 'src/model/duration.ts', flaggedBy: ZONE },
  // The last model file that imported a kind (the fan-out's checks now come in as a parameter): no exception left.
  { fixture: 'model-imports-kind', as: 'src/model/pipeline-checks.ts', flaggedBy: ZONE },
  { fixture: 'model-imports-kind', as: 'src/workflows/stage-run.ts', flaggedBy: ZONE },
  { fixture: 'model-imports-kind', as: 'src/ui/address.ts', flaggedBy: null },
  { fixture: 'kind-imports-workflows', as: 'src/kinds/loop/termination.ts', flaggedBy: ZONE },
  { fixture: 'kind-worker-imports-workflows', as: 'src/kinds/loop/worker/probe.ts', flaggedBy: ZONE },
  { fixture: 'config-imports-client', as: 'src/config/home.ts', flaggedBy: ZONE },
  { fixture: 'config-imports-client', as: 'src/ui/address.ts', flaggedBy: null },
  { fixture: 'kind-imports-node-fs', as: 'src/kinds/loop/termination.ts', flaggedBy: DETERMINISM },
  // Missed by the hand-kept list this convention replaced: it imports @temporalio/workflow and runs in workflows.
  { fixture: 'kind-imports-node-fs', as: 'src/kinds/tdd/node-publishing.ts', flaggedBy: DETERMINISM },
  { fixture: 'kind-imports-node-fs', as: 'src/kinds/loop/worker/probe.ts', flaggedBy: null },
  { fixture: 'kind-imports-node-fs', as: 'src/kinds/loop/client.ts', flaggedBy: null },
  { fixture: 'kind-imports-node-fs', as: 'src/kinds/loop/client-probe.ts', flaggedBy: null },
  { fixture: 'kind-client-imports-client', as: 'src/kinds/loop/client.ts', flaggedBy: null },
  { fixture: 'kind-client-imports-client', as: 'src/kinds/loop/termination.ts', flaggedBy: ZONE },
  // Lazy loading lives in a folder's lazy-modules.ts or a `<module>-lazy.ts` (docs/architecture.md "Lazy loading").
  { fixture: 'lazy-require', as: 'src/pipelines/lazy-modules.ts', flaggedBy: null },
  { fixture: 'lazy-require', as: 'src/agents/output-schema-checks-lazy.ts', flaggedBy: null },
  { fixture: 'lazy-require', as: 'src/pipelines/spec-lines.ts', flaggedBy: REQUIRE },
  { fixture: 'lazy-require', as: 'src/storage/blob-store.ts', flaggedBy: REQUIRE },
];

/**
 * Lints every case in one child process (ESLint's ESM config cannot load inside jest's VM, and one process builds
 * the type-aware program once). Paths that do not exist yet (a kind's worker/ and client files) are linted in
 * TypeScript's default project; the project's own config is otherwise used as is. A message without a rule id
 * (a parse error) is reported with its text, so it fails every case.
 */
function lintAll(): string[][] {
  const script = `
    import { ESLint } from 'eslint';
    const cases = JSON.parse(await new Promise((done) => {
      let text = ''; process.stdin.on('data', (c) => (text += c)); process.stdin.on('end', () => done(text));
    }));
    const eslint = new ESLint({
      overrideConfig: {
        // For every file: typescript-eslint builds one project service per process, from the first file's options.
        files: ['**/*.ts'],
        languageOptions: {
          parserOptions: {
            projectService: {
              allowDefaultProject: ['src/kinds/*/worker/probe.ts', 'src/kinds/*/client-probe.ts'],
              defaultProject: 'tsconfig.json',
            },
            tsconfigRootDir: process.cwd(),
          },
        },
      },
    });
    const out = [];
    for (const { text, filePath } of cases) {
      const [result] = await eslint.lintText(text, { filePath });
      out.push(result.messages.map((m) => String(m.ruleId) + (m.ruleId ? '' : ': ' + m.message)));
    }
    process.stdout.write(JSON.stringify(out));
  `;
  const input = cases.map((c) => ({ text: fixture(c.fixture), filePath: path.join(root, c.as) }));
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], {
    cwd: root,
    input: JSON.stringify(input),
    encoding: 'utf8',
  });
  return JSON.parse(out) as string[][];
}

let ruleIds: string[][];
beforeAll(() => {
  ruleIds = lintAll();
}, 300_000);

it.each(cases.map((c, index) => ({ ...c, index })))(
  '$fixture linted as $as: flagged by $flaggedBy',
  ({ index, flaggedBy }) => {
    if (flaggedBy === null) expect(ruleIds[index]).toEqual([]);
    else expect(ruleIds[index]).toContain(flaggedBy);
  },
);
