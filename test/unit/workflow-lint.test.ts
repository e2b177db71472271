/**
 * The determinism rule on workflow code is real: the project's ESLint config flags Node built-ins,
 * side-effecting imports and nondeterministic globals in src/workflows and each kind's workflow-side files,
 * and allows them in activities.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';

const root = path.join(__dirname, '..', '..');
const probe = `
import { readFileSync } from 'node:fs';
import { Client } from '@temporalio/client';
import { createActivities } from '../activities';
export function f(): unknown {
  setTimeout(() => undefined, 10);
  return [readFileSync, Client, createActivities, process.env.X, Math.random()];
}
`;

const deterministic = [
  'src/workflows/work-item.ts',
  'src/workflows/legacy/engine-1.ts',
  'src/kinds/tdd/workflow.ts',
  'src/kinds/tdd/node-run.ts',
  'src/kinds/loop/termination.ts',
  'src/kinds/fan-out/workflow.ts',
  'src/kinds/contract/shapes.ts',
];
const sideEffecting = ['src/activities/index.ts', 'src/kinds/approval/worker/activities.ts'];

/**
 * Lints the probe as if it were each file, in one child process (ESLint's ESM config cannot load inside jest's
 * VM, and one process builds the type-aware program once instead of once per file).
 */
function lintProbeAs(files: string[]): Map<string, string[]> {
  const script = `
    import { ESLint } from 'eslint';
    const { probe, files } = JSON.parse(await new Promise((done) => {
      let text = ''; process.stdin.on('data', (c) => (text += c)); process.stdin.on('end', () => done(text));
    }));
    const eslint = new ESLint();
    const out = {};
    for (const filePath of files) {
      const [result] = await eslint.lintText(probe, { filePath });
      out[filePath] = result.messages.map((m) => m.ruleId + ':' + m.line);
    }
    process.stdout.write(JSON.stringify(out));
  `;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], {
    cwd: root,
    input: JSON.stringify({ probe, files }),
    encoding: 'utf8',
  });
  return new Map(Object.entries(JSON.parse(out) as Record<string, string[]>));
}

let ruleIdsByFile: Map<string, string[]>;
beforeAll(() => {
  ruleIdsByFile = lintProbeAs([...deterministic, ...sideEffecting].map((file) => path.join(root, file)));
}, 120_000);
const ruleIds = (file: string): string[] => ruleIdsByFile.get(path.join(root, file)) ?? ['(not linted)'];

// The work item's files, and each kind's workflow-side files (DESIGN.md "Layout").
it.each(deterministic)('flags every nondeterministic construct in %s', (file) => {
  expect(ruleIds(file)).toEqual(
    expect.arrayContaining([
      'no-restricted-imports:2',
      'no-restricted-imports:3',
      'no-restricted-imports:4',
      'no-restricted-globals:6',
      'no-restricted-globals:7',
      'no-restricted-properties:7',
    ]),
  );
});

it.each(sideEffecting)('allows the same code in activities (%s)', (file) => {
  const ids = ruleIds(file);
  expect(ids).not.toContain('(not linted)');
  expect(ids.filter((id) => /^no-restricted/.test(id))).toEqual([]);
});

it('keeps zod and Ajv out of the workflow bundle (modules there are evaluated again for every execution)', () => {
  const bundle = readFileSync(process.env.TREADLE_TEST_BUNDLE!, 'utf8');
  expect(bundle.length).toBeGreaterThan(100_000);
  expect(bundle).toContain('workItem');
  expect(bundle).not.toMatch(/node_modules\/zod\//);
  // Output schemas are compiled by clients and activities only (src/agents/output-schema-checks.ts).
  expect(bundle).not.toMatch(/node_modules\/ajv(-formats)?\//);
});
