/**
 * The pure parts of evaluations (src/model/evals.ts): a dataset's cases and every bad line, a variant's aggregates,
 * and the comparison's regression rule at its threshold.
 */
import {
  compareRuns,
  evalItemId,
  parseDataset,
  summarizeVariant,
  type EvalCaseRecord,
  type EvalVariantSummary,
} from '../../src/model/evals';

it('reads a JSONL dataset: ids given or the line number, blank lines skipped, expected kept when given', () => {
  const parsed = parseDataset('{"id":"x","input":{"q":1},"expected":2}\n\n{"input":null}\r\n');
  expect(parsed).toEqual({
    ok: true,
    cases: [
      { id: 'x', input: { q: 1 }, expected: 2 },
      { id: '3', input: null },
    ],
  });
});

it('lists every bad line with its number: not JSON, not an object, no input, a bad or repeated id, unknown keys', () => {
  const text = [
    'nope',
    '[1]',
    '{"expected":1}',
    '{"id":"a/b","input":1}',
    '{"id":"k","input":1}',
    '{"id":"k","input":2,"note":3}',
  ];
  expect(parseDataset(text.join('\n'))).toEqual({
    ok: false,
    problems: [
      expect.stringMatching(/^line 1: not JSON/),
      'line 2: a case is an object: { "id"?, "input", "expected"? }',
      'line 3: no "input"',
      'line 4: "id" must be 1 to 64 letters, digits, "_", "." or "-"',
      'line 6: unknown key note',
      'line 6: case id "k" is also on line 5',
    ],
  });
  expect(parseDataset('\n\n')).toEqual({ ok: false, problems: ['the dataset has no cases'] });
});

const record = (over: Partial<EvalCaseRecord>): EvalCaseRecord => ({
  caseId: 'c',
  variant: 'v',
  itemId: 'i',
  outcome: 'completed',
  verdicts: { passed: 1, rejected: 0, uncertain: 0 },
  attempts: 1,
  escalations: 0,
  tokens: { input: 10, output: 5 },
  costUsd: 0.01,
  wallMs: 100,
  score: 1,
  passed: true,
  ...over,
});

it('summarizes a variant: pass rate, mean of the scores there are, totals, and an unknown cost as unknown', () => {
  const summary = summarizeVariant('v', [
    record({}),
    record({ score: null, passed: false, escalations: 2, attempts: 3, wallMs: 300 }),
  ]);
  expect(summary).toEqual({
    variant: 'v',
    cases: 2,
    completed: 2,
    passed: 1,
    passRate: 0.5,
    meanScore: 1,
    meanAttempts: 2,
    escalations: 2,
    tokens: { input: 20, output: 10 },
    costUsd: 0.02,
    meanWallMs: 200,
  });
  expect(summarizeVariant('v', [record({ costUsd: null })]).costUsd).toBeNull();
});

const summary = (variant: string, passRate: number): EvalVariantSummary => ({
  ...summarizeVariant(variant, [record({})]),
  passRate,
});

it('a variant regresses only when its pass rate drops by more than the threshold', () => {
  const a = { run: 'a', summaries: [summary('x', 0.9), summary('y', 0.9), summary('gone', 1)] };
  const b = { run: 'b', summaries: [summary('x', 0.85), summary('y', 0.84), summary('new', 1)] };
  const c = compareRuns(a, b, 0.05);
  expect(c.regressions).toEqual(['y']);
  expect(c.onlyInA).toEqual(['gone']);
  expect(c.onlyInB).toEqual(['new']);
  expect(compareRuns(a, a, 0).regressions).toEqual([]);
});

it('names a case item eval-<run>-<variant>-<case>', () => {
  expect(evalItemId('r1', 'main', 'c7')).toBe('eval-r1-main-c7');
});
