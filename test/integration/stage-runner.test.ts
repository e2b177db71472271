/**
 * The stage runner on a real Temporal dev server. Cases: retry with feedback threading and event order,
 * escalation then approval (latest and chosen attempt), reject, approve-with-edits flowing downstream,
 * Uncertain routing (to review, and as a rejection), `always`, attempt timeout, delay between attempts,
 * mechanical retries that recover and ones that give up, stage-requested review, skipped outcomes, review TTL.
 */
import { startHarness, type Harness } from '../support/harness';
import { draftPublish } from '../support/pipelines';
import {
  ATTEMPT_TIMEOUT,
  ATTEMPT_TIMEOUT_TEXT,
  FAR_TOO_SLOW_MS,
  PROMPT_CANCELLATION,
} from '../support/attempt-timeout';
import { pipeline } from '../../src/kinds/builder';
import type { TreadleEvent } from '../../src/model/shapes';
import type { WorkItemState } from '../../src/model/state';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ worker: PROMPT_CANCELLATION });
});
afterAll(async () => {
  await h?.shutdown();
});

const waitForStatus = async (id: string, status: WorkItemState['status']): Promise<WorkItemState> => {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const state = await h.client.getState(id);
    if (state.status === status) return state;
    if (Date.now() > deadline)
      throw new Error(
        `item ${id} stayed ${state.status}, expected ${status}: ${JSON.stringify(state.events.map((e) => e.message))}`,
      );
    await new Promise((r) => setTimeout(r, 100));
  }
};
const eventsOf = (state: WorkItemState, stage: string): Pick<TreadleEvent, 'type' | 'attempt'>[] =>
  state.events.filter((e) => e.stage === stage).map((e) => ({ type: e.type, attempt: e.attempt }));

describe('retry with feedback', () => {
  it('threads the gate feedback into the next attempt and emits the seed 000 event order', async () => {
    const id = h.id();
    const input = {
      script: {
        draft: [
          {
            verdict: 'rejected',
            summary: 'too short',
            criteria: [{ name: 'length', expected: '>= 100 words', actual: '12 words' }],
          },
          { verdict: 'accepted' },
        ],
      },
    };
    await h.client.start(draftPublish({ maxAttempts: 3 }), input, { id });
    const result = await h.client.result(id);
    expect(result.status).toBe('completed');

    const state = await h.client.getState(id);
    const draft = state.stages.draft!;
    expect(draft.attempts).toHaveLength(2);
    expect(draft.attempts[0]!.verdict).toEqual({
      kind: 'rejected',
      feedback: {
        summary: 'too short',
        failedCriteria: [{ name: 'length', expected: '>= 100 words', actual: '12 words', passed: false }],
      },
    });
    expect(draft.attempts[0]!.feedback?.summary).toBe('too short');
    expect(draft.attempts[1]!.verdict).toEqual({ kind: 'accepted' });
    // Attempt 2 received attempt 1's feedback; attempt 1 received none.
    expect((draft.attempts[0]!.artefact as { feedback: unknown }).feedback).toBeNull();
    expect((draft.attempts[1]!.artefact as { feedback: { summary: string } }).feedback.summary).toBe('too short');
    // The downstream stage received draft's final artefact.
    expect((state.stages.publish!.artefact as { upstream: Record<string, unknown> }).upstream.draft).toEqual(
      draft.artefact,
    );
    expect(result.artefacts.draft).toEqual(draft.artefact);

    expect(eventsOf(state, 'draft').map((e) => `${e.type}(${e.attempt})`)).toEqual([
      'StageStarted(1)',
      'QualityCheckFailed(1)',
      'RetryScheduled(2)',
      'RetryAttempt(2)',
      'QualityCheckPassed(2)',
      'StageCompleted(2)',
    ]);
    const seqs = state.events.map((e) => e.seq);
    expect(seqs).toEqual(seqs.map((_, i) => i + 1));
    expect(state.events[state.events.length - 1]!.type).toBe('ItemCompleted');
  });

  it('waits the configured delay between attempts (durable timer)', async () => {
    const id = h.id();
    await h.client.start(
      draftPublish({ maxAttempts: 2, delay: '2s' }),
      { script: { draft: [{ verdict: 'rejected' }, { verdict: 'accepted' }] } },
      { id },
    );
    await h.client.result(id);
    const [first, second] = (await h.client.getState(id)).stages.draft!.attempts;
    const gap = Date.parse(second!.startedAt) - Date.parse(first!.completedAt!);
    expect(gap).toBeGreaterThanOrEqual(2_000);
  });
});

describe('escalation and review', () => {
  const exhausting = {
    script: {
      draft: [
        { verdict: 'rejected', summary: 'first try weak' },
        { verdict: 'rejected', summary: 'second try weak' },
      ],
    },
  };

  it('escalates an exhausted budget, waits, and continues with the latest attempt on approve', async () => {
    const id = h.id();
    await h.client.start(draftPublish({ maxAttempts: 2, onExhausted: 'escalate' }), exhausting, { id });
    const waiting = await waitForStatus(id, 'waiting_review');
    expect(waiting.stages.draft!.status).toBe('waiting_review');
    expect(waiting.stages.publish!.status).toBe('pending');
    expect(waiting.pendingReviews).toEqual([
      expect.objectContaining({ stage: 'draft', reason: 'escalated', attempt: 2 }),
    ]);
    expect(waiting.pendingReviews[0]!.message).toContain('second try weak');
    expect(waiting.events.map((e) => e.type)).toEqual(expect.arrayContaining(['Escalated', 'ReviewRequested']));

    const accepted = await h.client.approve(id, 'draft', { reviewer: 'ann' });
    expect(accepted).toEqual({ itemId: id, stage: 'draft', outcome: 'approve', reviewer: 'ann' });
    const result = await h.client.result(id);
    expect(result.status).toBe('completed');
    const state = await h.client.getState(id);
    expect(state.stages.draft!.artefact).toEqual(state.stages.draft!.attempts[1]!.artefact);
    expect(state.stages.draft!.review).toEqual(expect.objectContaining({ reviewer: 'ann', kind: 'approve' }));
    expect(state.pendingReviews).toEqual([]);
  });

  it('approves a chosen earlier attempt', async () => {
    const id = h.id();
    await h.client.start(draftPublish({ maxAttempts: 2 }, 'on_escalation'), exhausting, { id });
    await waitForStatus(id, 'waiting_review');
    await h.client.approve(id, 'draft', { attempt: 1 });
    await h.client.result(id);
    const state = await h.client.getState(id);
    expect(state.stages.draft!.artefact).toEqual(state.stages.draft!.attempts[0]!.artefact);
    expect(
      (state.stages.publish!.artefact as { upstream: { draft: { attempt: number } } }).upstream.draft.attempt,
    ).toBe(1);
  });

  it('fails the stage on reject and skips its dependents', async () => {
    const id = h.id();
    await h.client.start(draftPublish({ maxAttempts: 2, onExhausted: 'escalate' }), exhausting, { id });
    await waitForStatus(id, 'waiting_review');
    await h.client.reject(id, 'draft', 'not publishable', { reviewer: 'bob' });
    const result = await h.client.result(id);
    expect(result.status).toBe('failed');
    expect(result.failedStages).toEqual(['draft']);
    const state = await h.client.getState(id);
    expect(state.stages.draft!.error).toBe('rejected by bob: not publishable');
    expect(state.stages.publish).toEqual(expect.objectContaining({ status: 'skipped', skipReason: 'upstream_failed' }));
    expect(state.status).toBe('failed');
  });

  it('fails the stage when the budget is exhausted and nothing escalates', async () => {
    const id = h.id();
    await h.client.start(draftPublish({ maxAttempts: 2, onExhausted: 'fail' }), exhausting, { id });
    const result = await h.client.result(id);
    expect(result.status).toBe('failed');
    const state = await h.client.getState(id);
    expect(state.stages.draft!.error).toContain(
      'retry budget exhausted (2 attempts used); last feedback: second try weak',
    );
    expect(state.stages.publish!.status).toBe('skipped');
  });

  it("sends the reviewer's edited artefact downstream instead of the original", async () => {
    const id = h.id();
    await h.client.start(draftPublish({ maxAttempts: 1 }, 'always'), null, { id });
    await waitForStatus(id, 'waiting_review');
    const edited = { title: 'Edited by a human', body: 'better text' };
    await h.client.approveWithEdits(id, 'draft', edited, { reviewer: 'cy', note: 'fixed the title' });
    await h.client.result(id);
    const state = await h.client.getState(id);
    expect(state.stages.draft!.artefact).toEqual(edited);
    expect(state.stages.draft!.review).toEqual(
      expect.objectContaining({ kind: 'approve_with_edits', note: 'fixed the title', reviewer: 'cy' }),
    );
    expect((state.stages.publish!.artefact as { upstream: unknown }).upstream).toEqual({ draft: edited });
  });

  it('reviews accepted output under the always policy', async () => {
    const id = h.id();
    await h.client.start(draftPublish({ maxAttempts: 3 }, 'always'), null, { id });
    const waiting = await waitForStatus(id, 'waiting_review');
    expect(waiting.pendingReviews).toEqual([expect.objectContaining({ stage: 'draft', reason: 'always', attempt: 1 })]);
    expect(eventsOf(waiting, 'draft').map((e) => e.type)).toEqual([
      'StageStarted',
      'QualityCheckPassed',
      'ReviewRequested',
    ]);
    await h.client.approve(id, 'draft');
    expect((await h.client.result(id)).status).toBe('completed');
  });

  it('reviews when the stage itself returns awaiting_review', async () => {
    const id = h.id();
    await h.client.start(
      draftPublish({ maxAttempts: 3 }),
      { script: { draft: [{ outcome: 'awaiting_review' }] } },
      { id },
    );
    const waiting = await waitForStatus(id, 'waiting_review');
    expect(waiting.pendingReviews[0]).toEqual(expect.objectContaining({ stage: 'draft', reason: 'stage_requested' }));
    await h.client.approve(id, 'draft');
    expect((await h.client.result(id)).status).toBe('completed');
  });
});

describe('uncertain verdicts', () => {
  it('go to review at once under on_uncertain, whatever budget is left', async () => {
    const id = h.id();
    await h.client.start(
      draftPublish({ maxAttempts: 5 }, 'on_uncertain'),
      { script: { draft: [{ verdict: 'uncertain', summary: 'cannot tell if the table survived' }] } },
      { id },
    );
    const waiting = await waitForStatus(id, 'waiting_review');
    expect(waiting.stages.draft!.attempts).toHaveLength(1);
    expect(waiting.pendingReviews[0]).toEqual(
      expect.objectContaining({
        reason: 'uncertain',
        message: 'the gate was uncertain: cannot tell if the table survived',
      }),
    );
    await h.client.approve(id, 'draft');
    expect((await h.client.result(id)).status).toBe('completed');
  });

  it('count as a rejection with the reason as feedback when the policy does not cover them', async () => {
    const id = h.id();
    await h.client.start(
      draftPublish({ maxAttempts: 3 }, 'on_escalation'),
      { script: { draft: [{ verdict: 'uncertain', summary: 'ambiguous' }, { verdict: 'accepted' }] } },
      { id },
    );
    expect((await h.client.result(id)).status).toBe('completed');
    const draft = (await h.client.getState(id)).stages.draft!;
    expect(draft.attempts).toHaveLength(2);
    expect((draft.attempts[1]!.artefact as { feedback: { summary: string } }).feedback.summary).toBe(
      'the gate was uncertain: ambiguous',
    );
  });
});

describe('attempt timeout and mechanical failures', () => {
  it('turns a timed-out attempt into a failed attempt with feedback and retries', async () => {
    const id = h.id();
    const spec = draftPublish({ maxAttempts: 2, attemptTimeout: ATTEMPT_TIMEOUT });
    await h.client.start(spec, { script: { draft: [{ sleepMs: FAR_TOO_SLOW_MS }, { verdict: 'accepted' }] } }, { id });
    expect((await h.client.result(id)).status).toBe('completed');
    const state = await h.client.getState(id);
    const [first, second] = state.stages.draft!.attempts;
    expect(first).toEqual(
      expect.objectContaining({ timedOut: true, feedback: expect.objectContaining({ summary: ATTEMPT_TIMEOUT_TEXT }) }),
    );
    expect(second!.timedOut).toBeUndefined();
    expect((second!.artefact as { feedback: { summary: string } }).feedback.summary).toBe(ATTEMPT_TIMEOUT_TEXT);
    expect(eventsOf(state, 'draft').map((e) => e.type)).toContain('AttemptTimedOut');
  }, 90_000);

  it('retries exceptions with the activity retry policy without spending quality attempts', async () => {
    const id = h.id();
    const spec = draftPublish({ maxAttempts: 3 }).activityOptions('draft', {
      retry: { initialInterval: '100ms', maximumAttempts: 5 },
    });
    await h.client.start(spec, { script: { draft: [{ error: 'flaky network', errorTimes: 2 }] } }, { id });
    expect((await h.client.result(id)).status).toBe('completed');
    const draft = (await h.client.getState(id)).stages.draft!;
    expect(draft.attempts).toHaveLength(1);
    expect(draft.attempts[0]!.error).toBeUndefined();
    const history = await h.temporal.workflow.getHandle(id).fetchHistory();
    const started = history.events!.find(
      (e) => e.activityTaskStartedEventAttributes && e.activityTaskStartedEventAttributes.attempt === 3,
    );
    expect(started).toBeDefined();
  });

  it('fails the stage when mechanical retries give up, and skips dependents', async () => {
    const id = h.id();
    const spec = draftPublish({ maxAttempts: 3 }).activityOptions('draft', {
      retry: { initialInterval: '100ms', maximumAttempts: 2 },
    });
    await h.client.start(spec, { script: { draft: [{ error: 'disk on fire' }] } }, { id });
    const result = await h.client.result(id);
    expect(result.status).toBe('failed');
    const state = await h.client.getState(id);
    expect(state.stages.draft!.attempts).toHaveLength(1);
    expect(state.stages.draft!.attempts[0]!.error).toBe('disk on fire (execution 2)');
    expect(state.stages.publish!.status).toBe('skipped');
  });
});

describe('outcomes and TTL', () => {
  it('lets dependents of a stage that skipped itself run', async () => {
    const id = h.id();
    await h.client.start(draftPublish({ maxAttempts: 1 }), { script: { draft: [{ outcome: 'skipped' }] } }, { id });
    expect((await h.client.result(id)).status).toBe('completed');
    const state = await h.client.getState(id);
    expect(state.stages.draft).toEqual(expect.objectContaining({ status: 'skipped', skipReason: 'outcome' }));
    expect(state.stages.publish!.status).toBe('completed');
    expect((state.stages.publish!.artefact as { upstream: unknown }).upstream).toEqual({});
  });

  it('applies on_review_expired when a review TTL runs out', async () => {
    const approveId = h.id();
    const rejectId = h.id();
    const spec = (onExpired: 'approve' | 'reject') =>
      pipeline('ttl').stage('draft', 'scripted').reviewPolicy('draft', 'always').reviewTtl('draft', '1s', onExpired);
    await h.client.start(spec('approve'), null, { id: approveId });
    await h.client.start(spec('reject'), null, { id: rejectId });
    expect((await h.client.result(approveId)).status).toBe('completed');
    expect((await h.client.result(rejectId)).status).toBe('failed');
    const state = await h.client.getState(rejectId);
    expect(state.stages.draft!.review?.kind).toBe('expired_reject');
    expect(state.events.map((e) => e.type)).toContain('ReviewExpired');
  });
});
