/**
 * Every branch of the seed 000 flowchart × every review policy × both exhausted actions, against the
 * table in DESIGN.md "The stage runner".
 */
import { decideAfterAttempt, type AttemptOutcome } from '../../src/engine/stage-policy';
import { EXHAUSTED_ACTIONS, REVIEW_POLICIES, type ExhaustedAction, type ReviewPolicy } from '../../src/model/pipeline';
import type { QualityVerdict } from '../../src/model/shapes';

const feedback = {
  summary: 'tables lost',
  failedCriteria: [{ name: 'table_preservation', expected: 'tables', actual: 'none', passed: false }],
};
const rejected: QualityVerdict = { kind: 'rejected', feedback };
const uncertain: QualityVerdict = { kind: 'uncertain', reason: 'cannot tell' };
const output = (
  verdict: QualityVerdict | null,
  outcome: 'completed' | 'skipped' | 'awaiting_review' | 'fan_out' = 'completed',
): AttemptOutcome => ({
  kind: 'output',
  output: { outcome, artefact: { text: 'x' } },
  verdict,
});
const budget = (maxAttempts: number, onExhausted: ExhaustedAction, delayMs = 0) => ({
  maxAttempts,
  delayMs,
  attemptTimeoutMs: null,
  onExhausted,
});
const cases = REVIEW_POLICIES.flatMap((policy) =>
  EXHAUSTED_ACTIONS.map((onExhausted) => [policy, onExhausted] as [ReviewPolicy, ExhaustedAction]),
);

describe.each(cases)('policy %s, on_exhausted %s', (policy, onExhausted) => {
  const decide = (attempt: number, max: number, outcome: AttemptOutcome) =>
    decideAfterAttempt({ attempt, budget: budget(max, onExhausted, 250), policy, outcome });

  it('accepted (and no gate): completes, or reviews under always', () => {
    for (const verdict of [{ kind: 'accepted' } as QualityVerdict, null]) {
      const decision = decide(1, 3, output(verdict));
      if (policy === 'always')
        expect(decision).toEqual(expect.objectContaining({ action: 'review', reason: 'always', escalated: false }));
      else expect(decision).toEqual({ action: 'complete' });
    }
  });

  it('rejected with attempts left: retries with the feedback and the delay', () => {
    expect(decide(1, 3, output(rejected))).toEqual({ action: 'retry', nextAttempt: 2, feedback, delayMs: 250 });
    expect(decide(2, 3, output(rejected))).toEqual({ action: 'retry', nextAttempt: 3, feedback, delayMs: 250 });
  });

  it('rejected with the budget exhausted: escalates or fails', () => {
    const decision = decide(3, 3, output(rejected));
    const escalates =
      onExhausted === 'escalate' || ['on_escalation', 'on_escalation_or_uncertain', 'always'].includes(policy);
    if (escalates) {
      expect(decision).toEqual(
        expect.objectContaining({ action: 'review', reason: 'escalated', escalated: true, feedback }),
      );
      expect((decision as { message: string }).message).toBe(
        'retry budget exhausted (3 attempts used); last feedback: tables lost',
      );
    } else {
      expect(decision).toEqual({
        action: 'fail',
        reason: 'retry budget exhausted (3 attempts used); last feedback: tables lost',
        feedback,
      });
    }
  });

  it('uncertain: reviews at once when the policy covers it, else counts as a rejection', () => {
    const covered = ['on_uncertain', 'on_escalation_or_uncertain', 'always'].includes(policy);
    const early = decide(1, 3, output(uncertain));
    if (covered)
      expect(early).toEqual(
        expect.objectContaining({
          action: 'review',
          reason: 'uncertain',
          escalated: true,
          message: 'the gate was uncertain: cannot tell',
        }),
      );
    else
      expect(early).toEqual({
        action: 'retry',
        nextAttempt: 2,
        feedback: { summary: 'the gate was uncertain: cannot tell', failedCriteria: [] },
        delayMs: 250,
      });

    const last = decide(3, 3, output(uncertain));
    if (covered) expect(last).toEqual(expect.objectContaining({ action: 'review', reason: 'uncertain' }));
    else if (onExhausted === 'escalate' || policy === 'on_escalation')
      expect(last).toEqual(expect.objectContaining({ action: 'review', reason: 'escalated' }));
    else expect(last).toEqual(expect.objectContaining({ action: 'fail' }));
  });

  it('timed out: a rejected attempt with "attempt timed out after …" feedback', () => {
    const retry = decide(1, 2, { kind: 'timed_out', afterMs: 90_000 });
    expect(retry).toEqual(expect.objectContaining({ action: 'retry', nextAttempt: 2 }));
    expect((retry as { feedback: { summary: string } }).feedback.summary).toBe('attempt timed out after 1m30s');
    const last = decide(2, 2, { kind: 'timed_out', afterMs: 500 });
    expect((last as { feedback: { summary: string } }).feedback.summary).toBe('attempt timed out after 500ms');
  });

  it('stage outcomes: awaiting_review always reviews, skipped skips, fan_out fails clearly', () => {
    expect(decide(1, 3, output(null, 'awaiting_review'))).toEqual(
      expect.objectContaining({ action: 'review', reason: 'stage_requested' }),
    );
    expect(decide(1, 3, output(rejected, 'skipped'))).toEqual({ action: 'skip' });
    expect(decide(1, 3, output(null, 'fan_out'))).toEqual(expect.objectContaining({ action: 'fail' }));
  });
});

it('a budget of one attempt never retries', () => {
  expect(
    decideAfterAttempt({ attempt: 1, budget: budget(1, 'fail'), policy: 'never', outcome: output(rejected) }),
  ).toEqual(expect.objectContaining({ action: 'fail' }));
  expect(
    (
      decideAfterAttempt({ attempt: 1, budget: budget(1, 'fail'), policy: 'never', outcome: output(rejected) }) as {
        reason: string;
      }
    ).reason,
  ).toContain('1 attempt used');
});
