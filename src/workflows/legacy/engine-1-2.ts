/**
 * Engines 1 and 2, kept only so items started on them replay: their stage runner. Like the live one
 * (../stage-runner.ts) it is one async function with the same steps, decisions and events, but an attempt's work
 * is awaited through the helper `runAttempt` and put together by the version's own `attemptWork` (engine 2 chains
 * `execute().then(afterExecuted)`; engine 1 awaits each step, engine-1.ts), so its steps fall on other ticks of an
 * activation than engine 3's continuations, whose timing the live runner keeps (docs/versioning.md).
 */
import { isCancellation, sleep } from '@temporalio/workflow';
import type { AttemptOutcome } from '../../engine/stage-policy';
import type { AttemptRecord, QualityFeedback } from '../../model/shapes';
import { now } from '../../workflow-kit/common';
import { prepareAttempt, withAttemptTimeout, type PreparedAttempt } from '../stage-attempt';
import {
  announceRetry,
  beginRetry,
  beginStage,
  budgetReview,
  decideAfter,
  failAttempt,
  failBeforeFirstAttempt,
  review,
  settleDecided,
} from '../stage-runner';
import type { AttemptLog, StageRun } from '../stage-run';

/** How an attempt's prepared steps become its work: engine 2 chains them, engine 1 awaits each. */
export type AttemptWork = (attempt: PreparedAttempt) => () => Promise<AttemptOutcome>;

/** Engine 2's attempt: execute, then judge, chained. */
export const chainedAttempt: AttemptWork = (attempt) => () => attempt.execute().then(attempt.afterExecuted);

/** The stage runner of engines 1 and 2: attempts until the policy completes, skips, fails or hands the stage to a human. */
export async function runStageAsync(run: StageRun, attemptWork: AttemptWork): Promise<void> {
  // Kept as engines 1 and 2 ran it: a change of shape (a helper awaited, a `then` added) moves its steps to
  // other ticks, and recorded histories of those versions would no longer replay.
  try {
    const { stage, state } = run;
    const st = state.stages[stage.name]!;
    const contracts = beginStage(run);
    if (contracts) {
      const contracted = await contracts;
      if (!contracted.ok) return failBeforeFirstAttempt(run, contracted.message);
    }

    let attempt = 1;
    let feedback: QualityFeedback | null = null;
    let budgetWaived = false;
    // Earlier attempts travel as a stored log plus the records not in it yet, so an activity's input does not
    // grow with the number of attempts; each stage activity stores the log it was given and names it.
    const log: AttemptLog = { ref: null, count: 0 };
    for (;;) {
      const budgetSpent = budgetWaived ? null : budgetReview(run, attempt);
      if (budgetSpent) {
        if ((await review(run, budgetSpent)) === 'settled') return;
        budgetWaived = true;
        continue;
      }
      const record: AttemptRecord = { attempt, startedAt: now() };
      st.attempts.push(record);
      run.touch();
      let outcome: AttemptOutcome;
      try {
        outcome = await runAttempt(run, record, log, feedback, attemptWork);
      } catch (error) {
        if (isCancellation(error)) throw error;
        return failAttempt(run, record, error);
      }
      const decision = decideAfter(run, record, outcome);

      switch (decision.action) {
        case 'complete':
        case 'skip':
        case 'fail':
          return settleDecided(run, record, decision);
        case 'retry':
          announceRetry(run, decision);
          if (decision.delayMs > 0)
            await sleep(decision.delayMs, { summary: `${stage.name} · delay before attempt ${decision.nextAttempt}` });
          attempt = decision.nextAttempt;
          feedback = decision.feedback;
          beginRetry(run, decision);
          continue;
        case 'review':
          // Only a token-budget review can resume a stage, and that one is requested above.
          await review(run, decision);
          return;
      }
    }
  } catch (error) {
    run.crashed(run.stage, error);
  } finally {
    run.ended();
  }
}

/**
 * One attempt: its work, inside the attempt timeout when the budget sets one. Not itself async: without a
 * timeout it hands back the work's own promise.
 */
function runAttempt(
  run: StageRun,
  record: AttemptRecord,
  log: AttemptLog,
  feedback: QualityFeedback | null,
  attemptWork: AttemptWork,
): Promise<AttemptOutcome> {
  const work = attemptWork(prepareAttempt(run, record, log, feedback));
  const timeoutMs = run.stage.retryBudget.attemptTimeoutMs;
  if (timeoutMs === null) return work();
  return withAttemptTimeout(run, record, log, timeoutMs, work);
}
