/** `decideReview`: what a human's outcome, or the TTL's expiry, does to a stage waiting for review. */
import { decideReview, type AcceptedReview } from '../../src/engine/review';
import type { AttemptRecord } from '../../src/model/shapes';
import type { ReviewReason } from '../../src/model/state';

const attempts: AttemptRecord[] = [
  { attempt: 1, startedAt: 't1', artefact: { v: 1 }, outputSummary: 'first' },
  { attempt: 2, startedAt: 't2', artefact: { v: 2 }, outputSummary: 'second' },
  { attempt: 3, startedAt: 't3', error: 'crashed' },
];
const at = '2026-11-23T00:00:00.000Z';
const decide = (
  resolution: AcceptedReview | undefined,
  reason: ReviewReason = 'escalated',
  onReviewExpired: 'approve' | 'reject' = 'reject',
) => decideReview({ stage: 'draft', reason, attempts, resolution, onReviewExpired, reviewTtlMs: 60_000, at });
const by = (outcome: AcceptedReview['outcome']): AcceptedReview => ({ stage: 'draft', outcome, reviewer: 'ann' });

it('approve completes with the latest attempt that produced output', () => {
  expect(decide(by({ kind: 'approve' }))).toEqual({
    decision: { action: 'complete', artefact: { v: 2 }, summary: 'second', message: 'draft completed after approval' },
    event: {
      type: 'ReviewResolved',
      message: 'draft approved by ann',
      details: { reviewer: 'ann', outcome: 'approve' },
    },
    review: { reviewer: 'ann', kind: 'approve', at },
  });
});

it('approve of a chosen attempt completes with that attempt', () => {
  const d = decide(by({ kind: 'approve', attempt: 1, note: 'better' }));
  expect(d.decision).toEqual({
    action: 'complete',
    artefact: { v: 1 },
    summary: 'first',
    message: 'draft completed after approval',
  });
  expect(d.review).toEqual({ reviewer: 'ann', kind: 'approve', at, note: 'better', attempt: 1 });
  expect(d.event.message).toBe('draft approved by ann (attempt 1)');
});

it('reject fails the stage with the reason', () => {
  const d = decide(by({ kind: 'reject', reason: 'off topic' }));
  expect(d.decision).toEqual({
    action: 'fail',
    error: 'rejected by ann: off topic',
    message: 'draft failed: rejected by ann',
  });
  expect(d.review.reason).toBe('off topic');
});

it('approve with edits completes with the edited artefact', () => {
  expect(decide(by({ kind: 'approve_with_edits', artefact: { v: 'edited' }, note: 'fixed' })).decision).toEqual({
    action: 'complete',
    artefact: { v: 'edited' },
    summary: 'fixed',
    message: "draft completed with the reviewer's edits",
  });
});

it('a plain approval of a spent budget resumes the stage; approving an attempt completes it', () => {
  expect(decide(by({ kind: 'approve' }), 'budget_exhausted').decision).toEqual({ action: 'resume' });
  expect(decide(by({ kind: 'approve', attempt: 2 }), 'budget_exhausted').decision).toEqual(
    expect.objectContaining({ action: 'complete', artefact: { v: 2 } }),
  );
});

it('expiry means what the configured action means there', () => {
  expect(decide(undefined, 'escalated', 'reject')).toEqual({
    decision: { action: 'fail', error: 'review expired after 1m', message: 'draft failed: review expired' },
    event: {
      type: 'ReviewExpired',
      message: 'draft review expired after 1m; rejected by policy',
      details: { outcome: 'expired_reject' },
    },
    review: { reviewer: 'ttl', kind: 'expired_reject', at },
  });
  expect(decide(undefined, 'escalated', 'approve').decision).toEqual({
    action: 'complete',
    artefact: { v: 2 },
    summary: 'second',
    message: 'draft completed: review expired and policy approves',
  });
  // On a spent token budget, approval lets the stage continue, so expiry with approve does the same.
  const budget = decide(undefined, 'budget_exhausted', 'approve');
  expect(budget.decision).toEqual({ action: 'resume' });
  expect(budget.event).toEqual({
    type: 'ReviewExpired',
    message: 'draft review expired after 1m; approved by policy: the stage continues past the token budget',
    details: { outcome: 'expired_approve' },
  });
  expect(decide(undefined, 'budget_exhausted', 'reject').decision.action).toBe('fail');
});

describe('request changes', () => {
  const gate = {
    summary: 'too short',
    failedCriteria: [{ name: 'length', expected: '>= 100', actual: '12', passed: false }],
  };
  const rejected: AttemptRecord[] = [...attempts, { attempt: 4, startedAt: 't4', artefact: { v: 4 }, feedback: gate }];
  const requested = (reason: ReviewReason, on: AttemptRecord[]) =>
    decideReview({
      stage: 'draft',
      reason,
      attempts: on,
      resolution: by({ kind: 'request_changes', note: 'cite two sources' }),
      onReviewExpired: 'reject',
      reviewTtlMs: null,
      at,
    });

  it("retries with the reviewer's note beside the gate's last feedback, and records the note", () => {
    const d = requested('escalated', rejected);
    expect(d.decision).toEqual({
      action: 'retry',
      feedback: {
        summary: "changes requested by ann; the gate's last feedback: too short",
        failedCriteria: gate.failedCriteria,
        guidance: 'cite two sources',
        reviewer: 'ann',
      },
      message: 'draft: ann requested changes; attempt 5 runs with their note',
    });
    expect(d.review).toEqual({ reviewer: 'ann', kind: 'request_changes', at, note: 'cite two sources' });
    expect(d.event).toEqual({
      type: 'ReviewResolved',
      message: 'draft: changes requested by ann: cite two sources',
      details: { reviewer: 'ann', outcome: 'request_changes' },
    });
  });

  it('without gate feedback (review_policy always) the note is the whole feedback; a stored ref is dropped', () => {
    expect(requested('always', attempts).decision).toMatchObject({
      feedback: { summary: 'changes requested by ann', failedCriteria: [], guidance: 'cite two sources' },
    });
    const stored = [{ ...rejected[3]!, feedback: { ...gate, ref: `sha256:${'a'.repeat(64)}` } }];
    expect(requested('escalated', stored).decision).not.toHaveProperty('feedback.ref');
  });

  it('on a spent token budget the held-back attempt runs with the note', () => {
    expect(requested('budget_exhausted', rejected).decision).toMatchObject({
      action: 'retry',
      feedback: { guidance: 'cite two sources', reviewer: 'ann' },
    });
  });
});
