/**
 * Request changes (issue 40) on the real server: an escalated review after three rejected attempts, answered
 * with `treadle review --request-changes`, runs attempt 4 with the reviewer's note beside the gate's last
 * feedback (the implementation is handed both); the gate rejects attempt 4, so the stage escalates to review
 * again instead of failing; a second request runs attempt 5. Bad notes and conflicting flags are refused.
 */
import { Registry } from '../../src/activities/registry';
import { pipeline } from '../../src/kinds/builder';
import type { QualityFeedback } from '../../src/model/shapes';
import { defaultRegistry } from '../../src/worker';
import { runTreadle, type CliRun } from '../support/cli';
import { eventually, startHarness, type Harness } from '../support/harness';

/** The feedback each attempt of the `feedback-spy` stage was handed, by item and attempt. */
const seen = new Map<string, (QualityFeedback | null)[]>();

jest.setTimeout(120_000);

let h: Harness;
beforeAll(async () => {
  const registry = defaultRegistry().merge(
    new Registry().stage('feedback-spy', async (ctx) => {
      // `<workflow id>/<stage>/<attempt>`: the item's id is its first part.
      const itemId = ctx.idempotencyKey.split('/')[0]!;
      const list = seen.get(itemId) ?? [];
      list[ctx.attempt - 1] = ctx.feedback;
      seen.set(itemId, list);
      return { outcome: 'completed', artefact: { attempt: ctx.attempt }, summary: `attempt ${ctx.attempt}` };
    }),
  );
  h = await startHarness({ registry });
});
afterAll(async () => {
  await h?.shutdown();
});

const treadle = (args: string[]): Promise<CliRun> => runTreadle(h, args, { TREADLE_REVIEWER: 'cli-user' });

const waitsForReview = (id: string, attempts: number) =>
  eventually(
    async () => {
      const state = await h.client.getState(id);
      return state.pendingReviews.some((r) => r.stage === 'draft') && state.stages.draft!.attempts.length === attempts
        ? state
        : undefined;
    },
    60_000,
    `draft of ${id} waiting for review after ${attempts} attempts`,
  );

it('request changes runs one more attempt with the note and the gate feedback; its rejection escalates again', async () => {
  const spec = pipeline('request-changes-cli')
    .stage('draft', 'feedback-spy')
    .qualityGate('draft', 'scripted')
    .retryBudget('draft', { maxAttempts: 3, onExhausted: 'escalate' });
  const id = h.id('changes');
  const rejected = (summary: string) => ({
    verdict: 'rejected',
    summary,
    criteria: [{ name: 'numbers', expected: 'a percentage', actual: 'none', passed: false }],
  });
  const script = { draft: [rejected('vague'), rejected('vague'), rejected('still vague'), rejected('no source'), {}] };
  await h.client.start(spec, { script }, { id });
  await waitsForReview(id, 3);

  // Refused before anything changes: flags that conflict, an empty note, a note over 4096 characters.
  const both = await treadle(['review', id, 'draft', '--request-changes', 'x', '--approve']);
  expect(both.code).toBe(2);
  expect(both.stderr).toContain(
    'give exactly one of --approve, --reject REASON, --edit FILE, --request-changes NOTE (got --approve, --request-changes)',
  );
  const withNote = await treadle(['review', id, 'draft', '--request-changes', 'x', '--note', 'y']);
  expect(withNote).toMatchObject({
    code: 2,
    stderr: 'treadle: --request-changes NOTE is the note; leave out --note\n',
  });
  await expect(h.client.requestChanges(id, 'draft', '  ')).rejects.toThrow(
    'outcome.note: request_changes needs a note saying what to change',
  );
  await expect(h.client.requestChanges(id, 'draft', 'x'.repeat(4097))).rejects.toThrow(
    'outcome.note: 4097 characters is over the 4096 a note may have; shorten it',
  );
  expect(seen.get(id)).toHaveLength(3);

  expect(await treadle(['review', id, 'draft', '--request-changes', 'Give the speed-up as a percentage.'])).toEqual({
    code: 0,
    stdout: `draft of ${id}: request changes by cli-user\n`,
    stderr: '',
  });
  // The gate rejects attempt 4: past max_attempts, the stage goes back to a person, it does not fail.
  const again = await waitsForReview(id, 4);
  expect(again.status).toBe('waiting_review');
  expect(again.stages.draft!.review).toMatchObject({
    reviewer: 'cli-user',
    kind: 'request_changes',
    note: 'Give the speed-up as a percentage.',
  });
  expect(seen.get(id)![3]).toEqual({
    summary: "changes requested by cli-user; the gate's last feedback: still vague",
    failedCriteria: [{ name: 'numbers', expected: 'a percentage', actual: 'none', passed: false }],
    guidance: 'Give the speed-up as a percentage.',
    reviewer: 'cli-user',
  });
  expect(again.pendingReviews[0]!.message).toContain('4 attempts used');

  await h.client.requestChanges(id, 'draft', 'Cite the benchmark.', { reviewer: 'ann' });
  const result = await h.client.result(id);
  expect(result.status).toBe('completed');
  expect(seen.get(id)![4]).toMatchObject({
    summary: "changes requested by ann; the gate's last feedback: no source",
    guidance: 'Cite the benchmark.',
  });
  expect(await h.client.readArtefact(result.artefacts.draft)).toEqual({ attempt: 5 });
  const events = (await h.client.getState(id, { eventLimit: 200 })).events.map((e) => `${e.type} ${e.message}`);
  expect(events).toContain(
    "RetryAttempt draft attempt 4 because: changes requested by cli-user; the gate's last feedback: still vague",
  );
});

it("a stage whose policy fails on an exhausted budget still goes back to a person after a reviewer's request", async () => {
  // One attempt, and an exhausted budget fails: only an uncertain gate asks a person.
  const spec = pipeline('request-changes-rule')
    .stage('draft', 'feedback-spy')
    .qualityGate('draft', 'scripted')
    .retryBudget('draft', { maxAttempts: 1, onExhausted: 'fail' })
    .reviewPolicy('draft', 'on_uncertain');
  const id = h.id('rule');
  const script = {
    draft: [
      { verdict: 'uncertain', summary: 'cannot tell' },
      { verdict: 'rejected', summary: 'wrong' },
    ],
  };
  await h.client.start(spec, { script }, { id });
  expect((await waitsForReview(id, 1)).pendingReviews[0]!.reason).toBe('uncertain');
  await h.client.requestChanges(id, 'draft', 'Say which release.', { reviewer: 'ann' });
  // Attempt 2 is past max_attempts 1 and its gate rejects it: escalated to review, not failed.
  const again = await waitsForReview(id, 2);
  expect(again.pendingReviews[0]).toMatchObject({ reason: 'escalated', attempt: 2 });
  expect(seen.get(id)![1]).toMatchObject({ summary: 'changes requested by ann', guidance: 'Say which release.' });
  await h.client.reject(id, 'draft', 'enough', { reviewer: 'ann' });
  expect((await h.client.result(id)).status).toBe('failed');
});

it('an item started on engine 7 refuses a request for changes, naming its engine, and still takes an approval', async () => {
  const old = await startHarness({ engineVersion: 7 });
  try {
    const id = old.id('engine-7');
    const spec = pipeline('request-changes-engine-7').stage('draft', 'scripted').reviewPolicy('draft', 'always');
    await old.client.start(spec, {}, { id });
    await eventually(async () => ((await old.client.getState(id)).pendingReviews.length > 0 ? true : undefined));
    await expect(old.client.requestChanges(id, 'draft', 'shorter')).rejects.toThrow(
      `work item ${id} runs on engine 7, which cannot request changes (engine 8 and later can)`,
    );
    await old.client.approve(id, 'draft');
    expect((await old.client.result(id)).status).toBe('completed');
  } finally {
    await old.shutdown();
  }
});
