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

/** Lints the probe as if it were `file`, through the ESLint CLI (its ESM config cannot load inside jest's VM). */
async function ruleIds(file: string): Promise<string[]> {
  let out: string;
  try {
    out = execFileSync(
      process.execPath,
      [
        path.join(root, 'node_modules', 'eslint', 'bin', 'eslint.js'),
        '--stdin',
        '--stdin-filename',
        file,
        '--format',
        'json',
      ],
      { cwd: root, input: probe, encoding: 'utf8' },
    );
  } catch (error) {
    out = (error as { stdout: string }).stdout; // exit 1 when there are errors
  }
  const [result] = JSON.parse(out) as { messages: { ruleId: string; line: number }[] }[];
  return result!.messages.map((m) => `${m.ruleId}:${m.line}`);
}

// The work item's files, and each kind's workflow-side files (DESIGN.md "Layout").
it.each([
  'src/workflows/work-item.ts',
  'src/workflows/legacy/engine-1.ts',
  'src/kinds/tdd/workflow.ts',
  'src/kinds/tdd/node-run.ts',
  'src/kinds/tdd/routes.ts',
  'src/kinds/loop/termination.ts',
  'src/kinds/fan-out/workflow.ts',
  'src/kinds/approval/stage.ts',
  'src/kinds/contract/shapes.ts',
  'src/engine/dag.ts',
  'src/model/state.ts',
])(
  'flags every nondeterministic construct in %s',
  async (file) => {
    expect(await ruleIds(file)).toEqual(
      expect.arrayContaining([
        'no-restricted-imports:2',
        'no-restricted-imports:3',
        'no-restricted-imports:4',
        'no-restricted-globals:6',
        'no-restricted-globals:7',
        'no-restricted-properties:7',
      ]),
    );
  },
  30_000,
);

it.each(['src/activities/index.ts', 'src/kinds/tdd/activities.ts', 'src/kinds/loop/activities.ts'])(
  'allows the same code in activities (%s)',
  async (file) => {
    const ids = await ruleIds(file);
    expect(ids.filter((id) => /^no-restricted/.test(id))).toEqual([]);
  },
  30_000,
);

it('keeps zod out of the workflow bundle (modules there are evaluated again for every execution)', () => {
  const bundle = readFileSync(process.env.TREADLE_TEST_BUNDLE!, 'utf8');
  expect(bundle.length).toBeGreaterThan(100_000);
  expect(bundle).toContain('workItem');
  expect(bundle).not.toMatch(/node_modules\/zod\//);
});
