/**
 * Evaluations through the SDK (`client.evals`, issue 42), offline on the dev server:
 * - the policy answers its items' reviews as `eval-policy` (approve: the items complete, each with one escalation,
 *   and the audit names the policy; reject: they fail), and `wait` leaves them to a person;
 * - what cannot run is refused before anything starts;
 * - every scorer: `exact`, `json-schema` (with the project's schema checker), `llm-judge` against the fake Anthropic
 *   server (a well-formed reply scores; a malformed one is a null score with the reason, not a crash), and a module
 *   of the evaluator's own.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { eventually, startHarness, type Harness } from '../support/harness';
import { startFakeAnthropic, type FakeAnthropic } from '../support/fake-anthropic';
import type { EvalCase, EvalRunRecord } from '../../src/model/evals';
import type { EvalScorer } from '../../src/client/eval-scorers';

let h: Harness;
let fake: FakeAnthropic;
let dir: string;

beforeAll(async () => {
  [h, fake] = await Promise.all([startHarness(), startFakeAnthropic()]);
  dir = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'eval-scorers-'));
});
afterAll(async () => {
  await Promise.all([h?.shutdown(), fake?.close()]);
});
beforeEach(() => fake.reset());

/** `answer` (scripted), whose output is the case's `out`; with `review`, a person signs it off. */
function answerSpec(review: boolean): unknown {
  return {
    name: 'eval-answer',
    stages: [{ name: 'answer', run: 'scripted', ...(review ? { review_policy: 'always' } : {}) }],
  };
}
const caseOf = (id: string, out: unknown, expected?: unknown): EvalCase =>
  ({
    id,
    input: { script: { answer: [{ output: out }] } },
    ...(expected !== undefined ? { expected } : {}),
  }) as EvalCase;

let runs = 0;
async function evaluate(
  cases: EvalCase[],
  scorer: EvalScorer,
  extra: { review?: boolean; policy?: 'approve' | 'reject' | 'wait' } = {},
): Promise<EvalRunRecord> {
  return h.client.evals.run({
    run: `sc${++runs}-${h.taskQueue}`,
    pipeline: answerSpec(extra.review ?? false),
    variants: [{ name: 'base', overrides: {} }],
    cases,
    scorer,
    ...(extra.policy ? { policy: extra.policy } : {}),
  });
}

it('the approve policy answers each review as eval-policy, counted as an escalation and in the audit', async () => {
  const record = await evaluate(
    [caseOf('a', 1, 1), caseOf('b', 2, 2)],
    await h.client.evals.scorer({ scorer: 'exact' }),
    {
      review: true,
    },
  );
  expect(record.summaries[0]).toMatchObject({ passed: 2, escalations: 2, passRate: 1 });
  expect(record.results.map((r) => [r.outcome, r.escalations])).toEqual([
    ['completed', 1],
    ['completed', 1],
  ]);
  const audit = await h.client.audit(record.results[0]!.itemId);
  expect(audit.map((e) => e.message)).toContainEqual(
    expect.stringMatching(/^review of answer: approve by eval-policy/),
  );
}, 60_000);

it('the reject policy rejects them (the items fail); wait leaves them to a person', async () => {
  const exact = await h.client.evals.scorer({ scorer: 'exact' });
  const rejected = await evaluate([caseOf('a', 1, 1)], exact, { review: true, policy: 'reject' });
  expect(rejected.results[0]).toMatchObject({ outcome: 'failed', escalations: 1, passed: false });

  const waiting = evaluate([caseOf('w', 1, 1)], exact, { review: true, policy: 'wait' });
  const itemId = `eval-sc${runs}-${h.taskQueue}-base-w`;
  const pending = await eventually(
    async () => {
      const decisions = await h.client.decisions.list();
      return decisions.find((d) => d.itemId === itemId);
    },
    30_000,
    'the review to wait for a person',
  );
  await h.client.decide(pending.key, { action: 'approve' }, 'a-person');
  expect((await waiting).results[0]).toMatchObject({ outcome: 'completed', escalations: 1, passed: true });
}, 90_000);

it('exact and json-schema score the last stage output; a case without expected has no exact score, with the reason', async () => {
  const exact = await evaluate(
    [caseOf('same', { a: [1, 2] }, { a: [1, 2] }), caseOf('other', { a: [2] }, { a: [1] }), caseOf('none', 1)],
    await h.client.evals.scorer({ scorer: 'exact' }),
  );
  expect(exact.results.map((r) => [r.caseId, r.score, r.passed])).toEqual([
    ['same', 1, true],
    ['other', 0, false],
    ['none', null, false],
  ]);
  expect(exact.results[2]!.scoreError).toBe('the case has no "expected" to compare with');
  expect(exact.summaries[0]!.meanScore).toBe(0.5);

  const schemaFile = path.join(dir, 'schema.json');
  writeFileSync(
    schemaFile,
    JSON.stringify({ type: 'object', required: ['title'], properties: { title: { type: 'string' } } }),
  );
  const schema = await evaluate(
    [caseOf('ok', { title: 'x' }), caseOf('bad', { title: 3 })],
    await h.client.evals.scorer({ scorer: 'json-schema', schemaFile }),
  );
  expect(schema.results.map((r) => r.score)).toEqual([1, 0]);
  await expect(
    h.client.evals.scorer({ scorer: 'json-schema', schemaFile: path.join(dir, 'none.json') }),
  ).rejects.toThrow(/cannot read the schema/);
}, 60_000);

it('llm-judge scores through the Anthropic SDK; a malformed reply is a null score with the reason', async () => {
  fake.enqueue(
    { kind: 'tool', input: { score: 0.9, reason: 'says what was asked' } },
    { kind: 'tool', input: { score: 7, reason: 'very good' } },
  );
  const judge = await h.client.evals.scorer({
    scorer: 'llm-judge',
    judge: { apiKey: 'test-key', baseURL: fake.baseURL, model: 'claude-judge-test' },
  });
  expect(judge.passMark).toBe(0.5);
  const record = h.client.evals.run({
    run: `judge-${h.taskQueue}`,
    pipeline: answerSpec(false),
    variants: [{ name: 'base', overrides: {} }],
    cases: [caseOf('good', 'Paris', 'Paris'), caseOf('odd', 'Lyon', 'Paris')],
    scorer: judge,
    concurrency: 1,
  });
  const { results } = await record;
  expect(results.map((r) => [r.caseId, r.score, r.passed])).toEqual([
    ['good', 0.9, true],
    ['odd', null, false],
  ]);
  expect(results[1]!.scoreError).toMatch(/^the judge's reply is malformed: score: /);
  expect(fake.requests).toHaveLength(2);
  const body = fake.requests[0]!.body as { model: string; messages: { content: string }[] };
  expect(body.model).toBe('claude-judge-test');
  expect(body.messages[0]!.content).toContain('"Paris"');
}, 60_000);

it('a scorer module of your own scores in this process; one that returns no score is a null score, not a crash', async () => {
  const file = path.join(dir, 'my-scorer.js');
  writeFileSync(
    file,
    'exports.passMark = 0.75;\nexports.score = async (c) => (c.output === "bad" ? "nope" : c.output.length / 4);\n',
  );
  const scorer = await h.client.evals.scorer({ scorer: file });
  expect(scorer).toMatchObject({ name: 'my-scorer.js', passMark: 0.75 });
  const record = await evaluate([caseOf('four', 'four'), caseOf('two', 'tw'), caseOf('bad', 'bad')], scorer);
  expect(record.results.map((r) => [r.score, r.passed])).toEqual([
    [1, true],
    [0.5, false],
    [null, false],
  ]);
  expect(record.results[2]!.scoreError).toBe('the scorer returned "nope", not a score from 0 to 1');
}, 60_000);

it('refuses what cannot run before starting anything: no cases, a bad policy, run id or concurrency, an unknown scorer', async () => {
  const exact = await h.client.evals.scorer({ scorer: 'exact' });
  const base = { pipeline: answerSpec(false), variants: [{ name: 'base', overrides: {} }], scorer: exact };
  const one = [caseOf('a', 1, 1)];
  await expect(h.client.evals.run({ ...base, cases: [] })).rejects.toThrow('an evaluation needs at least one case');
  await expect(h.client.evals.run({ ...base, cases: one, policy: 'maybe' as never })).rejects.toThrow(
    'the policy must be one of approve, reject, wait, got maybe',
  );
  await expect(h.client.evals.run({ ...base, cases: one, run: 'a b' })).rejects.toThrow('the run id "a b" is not');
  await expect(h.client.evals.run({ ...base, cases: one, concurrency: 0 })).rejects.toThrow('the concurrency must be');
  await expect(h.client.evals.run({ ...base, cases: one, outputStage: 'nope' })).rejects.toThrow(
    'no stage named "nope" to score (the stages: answer)',
  );
  await expect(h.client.evals.scorer({ scorer: 'fuzzy' })).rejects.toThrow('unknown scorer "fuzzy"');
  await expect(h.client.evals.compare('x', 'y', 2)).rejects.toThrow('the threshold is a pass-rate drop from 0 to 1');
  expect((await h.temporal.workflow.count(`TreadleEvalRun = 'a b'`)).count).toBe(0);
});
