/**
 * The stage runner's decisions (seed 000 "Revised Execution Flow", DESIGN.md "The stage runner") as pure
 * functions: no Temporal imports, no I/O, exhaustively unit-tested. The workflow performs what they ask for.
 */
import { formatDuration } from '../model/duration';
import type { ReviewPolicy, RetryBudget } from '../model/pipeline';
import type { QualityFeedback, QualityVerdict, StageOutput } from '../model/shapes';
import type { ReviewReason } from '../model/state';

/** How one attempt ended, as far as policy is concerned. */
export type AttemptOutcome =
  { kind: 'output'; output: StageOutput; verdict: QualityVerdict | null } | { kind: 'timed_out'; afterMs: number };

/** What the stage runner must do next. */
export type StageDecision =
  | { action: 'complete' }
  | { action: 'skip' }
  | { action: 'retry'; nextAttempt: number; feedback: QualityFeedback; delayMs: number }
  | { action: 'review'; reason: ReviewReason; message: string; escalated: boolean; feedback?: QualityFeedback }
  | { action: 'fail'; reason: string; feedback?: QualityFeedback };

/** Policies under which an exhausted budget goes to a human even when `onExhausted` is `fail`. */
const REVIEWS_ON_ESCALATION: readonly ReviewPolicy[] = ['on_escalation', 'on_escalation_or_uncertain', 'always'];
/** Policies under which an `uncertain` verdict goes to a human at once. */
const REVIEWS_ON_UNCERTAIN: readonly ReviewPolicy[] = ['on_uncertain', 'on_escalation_or_uncertain', 'always'];

/** Feedback for an attempt the attempt timeout cut short. */
export function timeoutFeedback(afterMs: number): QualityFeedback {
  return {
    summary: `attempt timed out after ${formatDuration(afterMs)}`,
    failedCriteria: [
      {
        name: 'attempt_timeout',
        expected: `finish within ${formatDuration(afterMs)}`,
        actual: 'still running',
        passed: false,
      },
    ],
  };
}

/** Feedback derived from an `uncertain` verdict when the policy does not send it to review. */
export function uncertainFeedback(reason: string): QualityFeedback {
  return { summary: `the gate was uncertain: ${reason}`, failedCriteria: [] };
}

/**
 * Decides what follows an attempt. `attempt` is 1-based; `budget.maxAttempts` includes the first attempt.
 */
export function decideAfterAttempt(args: {
  attempt: number;
  budget: RetryBudget;
  policy: ReviewPolicy;
  outcome: AttemptOutcome;
}): StageDecision {
  const { attempt, budget, policy, outcome } = args;
  if (outcome.kind === 'timed_out') return afterRejection(attempt, budget, policy, timeoutFeedback(outcome.afterMs));

  const { output, verdict } = outcome;
  if (output.outcome === 'skipped') return { action: 'skip' };
  if (output.outcome === 'fan_out') {
    // The stage runner fans out before the policy sees the attempt; a fan_out here is one a fan-out returned.
    return {
      action: 'fail',
      reason: 'a fan-out element returned fan_out again; nest fan-outs through a pipeline of their own',
    };
  }
  if (output.outcome === 'awaiting_review') {
    return { action: 'review', reason: 'stage_requested', message: 'the stage asked for review', escalated: false };
  }
  if (verdict === null || verdict.kind === 'accepted') return afterAcceptance(policy, verdict !== null);
  if (verdict.kind === 'rejected') return afterRejection(attempt, budget, policy, verdict.feedback);
  if (REVIEWS_ON_UNCERTAIN.includes(policy)) {
    return {
      action: 'review',
      reason: 'uncertain',
      message: `the gate was uncertain: ${verdict.reason}`,
      escalated: true,
    };
  }
  return afterRejection(attempt, budget, policy, uncertainFeedback(verdict.reason));
}

function afterAcceptance(policy: ReviewPolicy, gated: boolean): StageDecision {
  if (policy !== 'always') return { action: 'complete' };
  return {
    action: 'review',
    reason: 'always',
    message: gated ? 'review policy is always; the quality gate accepted the output' : 'review policy is always',
    escalated: false,
  };
}

function afterRejection(
  attempt: number,
  budget: RetryBudget,
  policy: ReviewPolicy,
  feedback: QualityFeedback,
): StageDecision {
  if (attempt < budget.maxAttempts)
    return { action: 'retry', nextAttempt: attempt + 1, feedback, delayMs: budget.delayMs };
  const spent = `${budget.maxAttempts} attempt${budget.maxAttempts === 1 ? '' : 's'} used`;
  if (budget.onExhausted === 'escalate' || REVIEWS_ON_ESCALATION.includes(policy)) {
    return {
      action: 'review',
      reason: 'escalated',
      message: `retry budget exhausted (${spent}); last feedback: ${feedback.summary}`,
      escalated: true,
      feedback,
    };
  }
  return { action: 'fail', reason: `retry budget exhausted (${spent}); last feedback: ${feedback.summary}`, feedback };
}
