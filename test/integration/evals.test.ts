/**
 * Evaluations (issue 42), end to end on the dev server with the scripted stages, offline:
 * - `treadle eval run` over 50 cases × 2 variants (one stricter, so 10 cases fail on it), each case an item
 *   `eval-<run>-<variant>-<case>` tagged `TreadleEvalRun`; the record read back by `eval show --json`;
 * - the same run again resumes: nothing runs twice, the record is the same; with a variant's settings changed it is
 *   refused (exit 2), its record untouched;
 * - `eval compare` exits 1 when a variant's pass rate drops past the threshold and names it, 0 for a run against
 *   itself (equal) and for an improvement; an unknown run is one clear line;
 * - bad dataset lines (all of them, with their line numbers) and a variant naming a stage the spec lacks stop the
 *   run before anything starts (exit 2).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { startHarness, type Harness } from '../support/harness';
import { runCli, showRun, type CliRun } from '../support/cli';
import type { EvalComparison, EvalRunRecord } from '../../src/model/evals';

let h: Harness;
let dir: string;
const CASES = 50;

beforeAll(async () => {
  h = await startHarness();
  dir = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'evals-'));
  write(
    'pipeline.yaml',
    [
      'name: eval-draft',
      'stages:',
      '  - name: draft',
      '    run: scripted',
      '    gate: scripted',
      '    retry_budget: { max_attempts: 2, delay: 0s, on_exhausted: fail }',
      '  - name: answer',
      '    run: scripted',
      '    depends_on: [draft]',
    ].join('\n'),
  );
  // One attempt only: the cases whose first draft the gate rejects fail on it.
  write('strict.yaml', 'stages:\n  draft:\n    retry_budget: { max_attempts: 1 }\n');
  const lines = Array.from({ length: CASES }, (_, i) => {
    const draft = i % 5 === 0 ? [{ verdict: 'rejected' }, { verdict: 'accepted' }] : [{}];
    return JSON.stringify({
      id: `c${i}`,
      input: { script: { draft, answer: [{ output: { n: i } }] } },
      expected: { n: i },
    });
  });
  write('cases.jsonl', `${lines.join('\n')}\n`);
});
afterAll(async () => {
  await h?.shutdown();
});

function write(name: string, text: string): string {
  const file = path.join(dir, name);
  writeFileSync(file, text);
  return file;
}

/** `treadle eval …` against the harness's server, queue and blob store, in the test's folder. */
function evalCli(args: string[], timeoutMs = 150_000): Promise<CliRun> {
  return runCli(['eval', ...args], {
    env: {
      ...process.env,
      TEMPORAL_ADDRESS: h.address,
      TREADLE_TASK_QUEUE: h.taskQueue,
      TREADLE_BLOB_DIR: h.blobs.dir,
    },
    cwd: dir,
    timeoutMs,
  });
}

const runId = (name: string): string => `${name}-${h.taskQueue}`;

it('runs 50 cases on 2 variants as tagged items, records each, and resumes a rerun without running anything twice', async () => {
  const started = Date.now();
  const run = await evalCli([
    'run',
    'pipeline.yaml',
    '--dataset',
    'cases.jsonl',
    '--variant',
    'main',
    '--variant',
    'strict=strict.yaml',
    '--concurrency',
    '16',
    '--id',
    runId('a'),
    '--json',
  ]);
  const elapsed = Date.now() - started;
  expect(run.code).toBe(0);
  // The bound (under 3 minutes in CI) is the run's own timeout (evalCli); its time is in the test output.
  process.stderr.write(`eval run of ${CASES} cases × 2 variants: ${elapsed} ms\n`);
  const record = JSON.parse(run.stdout) as EvalRunRecord;
  expect(record.results).toHaveLength(2 * CASES);
  const [main, strict] = record.summaries;
  expect(main).toMatchObject({ variant: 'main', cases: CASES, completed: CASES, passed: CASES, passRate: 1 });
  expect(strict).toMatchObject({ variant: 'strict', cases: CASES, completed: 40, passed: 40, passRate: 0.8 });
  const c0 = record.results.find((r) => r.variant === 'main' && r.caseId === 'c0')!;
  expect(c0).toMatchObject({
    itemId: `eval-${runId('a')}-main-c0`,
    outcome: 'completed',
    verdicts: { passed: 1, rejected: 1, uncertain: 0 },
    attempts: 3,
    escalations: 0,
    score: 1,
    passed: true,
  });
  expect(c0.wallMs).toBeGreaterThan(0);
  expect(record.results.find((r) => r.variant === 'strict' && r.caseId === 'c0')).toMatchObject({
    outcome: 'failed',
    score: 0,
    passed: false,
  });
  // Every case item is listed under the run's search attribute.
  const tagged = await h.temporal.workflow.count(`TreadleEvalRun = '${runId('a')}'`);
  expect(tagged.count).toBe(2 * CASES);

  const again = await evalCli([
    'run',
    'pipeline.yaml',
    '--dataset',
    'cases.jsonl',
    '--variant',
    'main',
    '--variant',
    'strict=strict.yaml',
    '--id',
    runId('a'),
    '--json',
  ]);
  expect(again.code).toBe(0);
  const resumed = JSON.parse(again.stdout) as EvalRunRecord;
  expect(resumed.summaries).toEqual(record.summaries);
  expect((await h.temporal.workflow.count(`TreadleEvalRun = '${runId('a')}'`)).count).toBe(2 * CASES);

  // The same id with other settings for a variant is refused, not mixed into the run's record.
  write('looser.yaml', 'stages:\n  draft:\n    retry_budget: { max_attempts: 3 }\n');
  const changed = await evalCli([
    'run',
    'pipeline.yaml',
    '--dataset',
    'cases.jsonl',
    '--variant',
    'main',
    '--variant',
    'strict=looser.yaml',
    '--id',
    runId('a'),
  ]);
  expect(changed.code).toBe(2);
  expect(changed.stderr).toMatch(
    new RegExp(
      `^treadle: evaluation ${runId('a')} already ran case c\\d+ on variant strict with another spec or input`,
      'm',
    ),
  );

  const shown = await evalCli(['show', runId('a'), '--json']);
  expect((JSON.parse(shown.stdout) as EvalRunRecord).summaries).toEqual(record.summaries);
  const table = await evalCli(['show', runId('a')]);
  expect(table.stdout).toMatch(/^main +50 +50 \(100\.0%\)/m);
  expect(table.stdout).toMatch(/^strict +50 +40 \(80\.0%\)/m);
}, 300_000);

it('compare exits 1 when a variant passes less by more than the threshold, 0 against an equal run or a better one', async () => {
  // Run B: `main` made strict, on the same cases: its pass rate drops from 100% to 80%.
  const b = await evalCli([
    'run',
    'pipeline.yaml',
    '--dataset',
    'cases.jsonl',
    '--variant',
    'main=strict.yaml',
    '--concurrency',
    '16',
    '--id',
    runId('b'),
  ]);
  expect(b.code).toBe(0);

  const worse = await evalCli(['compare', runId('a'), runId('b')]);
  expect(worse.code).toBe(1);
  expect(worse.stdout).toContain('regression: main passes 80.0%, down from 100.0% (-20.0 pts');
  expect(worse.stdout).toContain(`only in ${runId('a')}: strict`);
  const json = await evalCli(['compare', runId('a'), runId('b'), '--json']);
  expect(json.code).toBe(1);
  const comparison = JSON.parse(json.stdout) as EvalComparison;
  expect(comparison.regressions).toEqual(['main']);
  expect(comparison.deltas[0]).toMatchObject({ variant: 'main', regressed: true });
  expect(comparison.deltas[0]!.passRate).toBeCloseTo(-0.2);

  // A drop within a looser threshold passes; a run against itself has no delta; an improvement is no regression.
  expect((await evalCli(['compare', runId('a'), runId('b'), '--threshold', '0.25'])).code).toBe(0);
  const equal = await evalCli(['compare', runId('a'), runId('a')]);
  expect(equal.code).toBe(0);
  expect(equal.stdout).toContain('no regression');
  expect((await evalCli(['compare', runId('b'), runId('a')])).code).toBe(0);

  const unknown = await evalCli(['compare', runId('a'), 'no-such-run']);
  expect(unknown.code).toBe(1);
  expect(unknown.stderr).toMatch(/^treadle: unknown evaluation run "no-such-run" \(runs: .*\)\n$/);
}, 300_000);

it('lists every bad line of a dataset, and the problems of a variant, before anything starts (exit 2)', async () => {
  write('bad.jsonl', '{"input": 1}\nnot json\n{"id":"a b","input":2}\n{"expected":3}\n\n{"input":1,"extra":2}\n');
  const bad = await evalCli(['run', 'pipeline.yaml', '--dataset', 'bad.jsonl', '--id', runId('bad')]);
  expect(bad.code).toBe(2);
  expect(bad.stderr).toContain('treadle: the dataset bad.jsonl has problems:');
  for (const line of ['line 2: not JSON', 'line 3: "id" must be', 'line 4: no "input"', 'line 6: unknown key extra'])
    expect(bad.stderr).toContain(line);

  write('nostage.yaml', 'stages:\n  polish: { with: { tone: dry } }\n');
  const variant = await evalCli([
    'run',
    'pipeline.yaml',
    '--dataset',
    'cases.jsonl',
    '--variant',
    'main',
    '--variant',
    'odd=nostage.yaml',
    '--id',
    runId('odd'),
  ]);
  expect(variant.code).toBe(2);
  expect(variant.stderr).toContain('variant odd: overrides: no stage named "polish" (the stages: draft, answer)');
  // Nothing started for either.
  for (const name of ['bad', 'odd'])
    expect((await h.temporal.workflow.count(`TreadleEvalRun = '${runId(name)}'`)).count).toBe(0);
  expect(showRun(variant)).toContain('exit 2');
}, 60_000);
