/**
 * The stage runner (DESIGN.md "The stage runner"): attempts until the policy completes, skips, fails or
 * hands the stage to a human, with the events each step emits; and {@link LIVE_ENGINE}, the rules of the
 * current engine version. Decisions come from the pure functions in `src/engine`; one attempt's work is in
 * stage-attempt.ts.
 */
import { isCancellation, proxyLocalActivities, sleep } from '@temporalio/workflow';
import { decideReview } from '../engine/review';
import { keepCalls, tokensSpent } from '../engine/usage';
import { decideAfterAttempt, type AttemptOutcome, type StageDecision } from '../engine/stage-policy';
import { STORE_ARTEFACT_ACTIVITY } from '../model/activity-types';
import { ENGINE_VERSION } from '../model/state';
import { DEFAULT_BLOB_THRESHOLD_BYTES, MAX_ERROR_CHARS, truncateText } from '../model/limits';
import { formatDuration } from '../model/duration';
import type { Artefact, AttemptRecord, EventType, QualityFeedback } from '../model/shapes';
import type { PendingReview, StageState, StoreArtefactInput, StoreArtefactResult } from '../model/state';
import { callsReported, describeFailure, now } from '../workflow-kit/common';
import { dueAt, recordOverdue, waitWithDeadline } from '../workflow-kit/deadline';
import { runContracts, runFanOutWorkflow, workflowKind } from '../kinds/workflow-table';
import { agentBackedStage, prepareAttempt, withAttemptTimeout } from './stage-attempt';
import { announced } from './review-attention';
import type { AttemptLog, EngineRules, StageRun } from './stage-run';

// A local activity: storing an approved edit needs only the worker's blob store, no task-queue round trip.
const storeArtefact = proxyLocalActivities<{
  [STORE_ARTEFACT_ACTIVITY]: (input: StoreArtefactInput) => Promise<StoreArtefactResult>;
}>({
  startToCloseTimeout: '30s',
  retry: { maximumAttempts: 5 },
})[STORE_ARTEFACT_ACTIVITY];

/** The rules of the current engine ({@link ENGINE_VERSION}); older versions override some (legacy/index.ts). */
export const LIVE_ENGINE: EngineRules = {
  version: ENGINE_VERSION,
  schedule: (item) => item.runEventDriven(),
  trustsStartAttributes: true,
  runStage,
  kind: workflowKind,
  fanOut: runFanOutWorkflow,
  fanOutOutcome: (run, kindRun, record, executed, then) => {
    // The stage's own calls count even if its fan-out fails; the elements' come with the fan-out's result.
    const { calls: own, ...stageOutput } = executed;
    keepCalls(record, own);
    return run.engine.fanOut(kindRun, stageOutput.artefact).then(then);
  },
  callsOfFailure: callsReported,
  // Every model call counts: a stage kind's totals too.
  reportsCalls: () => true,
  usesAgent: (stage, agentBacked) =>
    workflowKind(stage.run)?.callsModels === true || agentBackedStage(stage, agentBacked),
  failsWorkflow: true,
  publishesDecisions: true,
  reviewerAttention: true,
  lineage: true,
};

/**
 * The stage runner: attempts until the policy completes, skips, fails or hands the stage to a human.
 *
 * It never rejects: an exception in any step (an engine bug, a cancellation) goes to `crashed`, and `ended`
 * is called exactly once when the stage ends, however it ends.
 */
export function runStage(run: StageRun): void {
  void runStageToEnd(run);
}

/**
 * {@link runStage}'s body, one async function on purpose. Each `await` stands where engine 3's continuations had
 * a `then` (on the activity's promise, a gate's, a timer's, a review's), so every step runs in the same microtask
 * as it did and recorded histories replay: an attempt's work is awaited in two steps, not as
 * `execute().then(afterExecuted)` as engine 2 did (legacy/engine-1-2.ts), and no async helper is awaited in
 * between, as each would add a tick and could reorder the commands of stages that end in one activation.
 */
async function runStageToEnd(run: StageRun): Promise<void> {
  try {
    const contracts = beginStage(run);
    if (contracts) {
      const contracted = await contracts;
      if (!contracted.ok) return failBeforeFirstAttempt(run, contracted.message);
    }
    const { stage, state } = run;
    const st = state.stages[stage.name]!;
    let attempt = 1;
    let feedback: QualityFeedback | null = null;
    let budgetWaived = false;
    // Set once a reviewer requested changes: the retry budget stretches to the attempt they granted, and
    // running out of it escalates to review again, so a person always closes the stage (docs/concepts.md).
    let granted = false;
    // Earlier attempts travel as a stored log plus the records not in it yet, so an activity's input does not
    // grow with the number of attempts; each stage activity stores the log it was given and names it.
    const log: AttemptLog = { ref: null, count: 0 };
    for (;;) {
      const budgetSpent = budgetWaived ? null : budgetReview(run, attempt);
      if (budgetSpent) {
        const answered = await review(run, budgetSpent);
        if (answered === 'settled') return;
        // Changes requested on a spent budget: the attempt it held back runs, with the reviewer's note.
        if (answered !== 'resume') feedback = answered.retry;
        budgetWaived = true;
        continue;
      }
      const record: AttemptRecord = { attempt, startedAt: now() };
      st.attempts.push(record);
      run.touch();
      let outcome: AttemptOutcome;
      try {
        const { execute, afterExecuted } = prepareAttempt(run, record, log, feedback);
        const timeoutMs = stage.retryBudget.attemptTimeoutMs;
        if (timeoutMs !== null)
          outcome = await withAttemptTimeout(run, record, log, timeoutMs, () => execute().then(afterExecuted));
        else {
          // Awaited only when a gate or a fan-out has yet to decide: an ungated attempt is judged in the same tick.
          const judged = afterExecuted(await execute());
          outcome = 'then' in judged ? await judged : judged;
        }
      } catch (error) {
        if (isCancellation(error)) throw error;
        return failAttempt(run, record, error);
      }
      const decision = decideAfter(run, record, outcome, granted);
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
        case 'review': {
          // Only a token-budget review can resume a stage, and that one is requested above.
          const answered = await review(run, decision);
          if (typeof answered !== 'object') return;
          granted = true;
          attempt = st.attempts.length + 1;
          feedback = answered.retry;
          beginRequestedAttempt(run, attempt, feedback);
          continue;
        }
      }
    }
  } catch (error) {
    run.crashed(run.stage, error);
  } finally {
    run.ended();
  }
}

/** The stage starts: its start is recorded, and its quality contracts run first when it has any (seed 002). */
export function beginStage(run: StageRun): ReturnType<typeof runContracts> | null {
  const { stage, state, emit } = run;
  const st = state.stages[stage.name]!;
  st.startedAt = now();
  emit('StageStarted', `${stage.name} started`, {
    stage: stage.name,
    attempt: 1,
    maxAttempts: stage.retryBudget.maxAttempts,
  });
  if (!run.spec.contracts || st.validatedInputs !== undefined) return null;
  return runContracts(
    { itemId: run.itemId, pipeline: run.spec.name, stage, input: run.input, state, emit, touch: run.touch },
    run.spec.contracts,
  );
}

/** The stage's contracts failed: it fails without an attempt. */
export function failBeforeFirstAttempt(run: StageRun, message: string): void {
  settle(run, 'failed', `${run.stage.name} failed before its first attempt: ${message}`, { error: message });
}

/**
 * The review a spent token budget calls for before this attempt, or null. A soft cap, checked before each
 * attempt of a stage that calls models: the human decides whether the stage may spend more.
 */
export function budgetReview(run: StageRun, attempt: number): Extract<StageDecision, { action: 'review' }> | null {
  const budget = run.state.tokenBudget ?? null;
  if (!run.usesAgent || budget === null) return null;
  const spent = tokensSpent(run.state.stages);
  if (spent < budget) return null;
  const message = `token budget spent: ${spent} of ${budget} tokens used; attempt ${attempt} would call the model again (approve to let this stage continue, reject to fail it, or approve an earlier attempt's output)`;
  return { action: 'review', reason: 'budget_exhausted', message, escalated: true };
}

/** An attempt that ended in an error: its record (the error, the calls it made) and the stage's failure. */
export function failAttempt(run: StageRun, record: AttemptRecord, error: unknown): void {
  const message = truncateText(describeFailure(error), MAX_ERROR_CHARS);
  keepCalls(record, run.engine.callsOfFailure(error));
  record.completedAt = now();
  record.error = message;
  settle(run, 'failed', `${run.stage.name} failed on attempt ${record.attempt}: ${message}`, { error: message });
}

/**
 * An attempt's outcome recorded and judged by the stage policy: what happens next. After a reviewer's
 * request for changes (`granted`), the budget reaches at least this attempt and its end escalates.
 */
export function decideAfter(
  run: StageRun,
  record: AttemptRecord,
  outcome: AttemptOutcome,
  granted = false,
): StageDecision {
  const { stage } = run;
  record.completedAt = now();
  const budget = stage.retryBudget;
  const decision = decideAfterAttempt({
    attempt: record.attempt,
    budget: granted
      ? { ...budget, maxAttempts: Math.max(budget.maxAttempts, record.attempt), onExhausted: 'escalate' }
      : budget,
    policy: stage.reviewPolicy,
    outcome,
  });
  recordVerdictEvents(run, record, outcome, decision);
  return decision;
}

/** The decisions that end the stage at once. */
export function settleDecided(
  run: StageRun,
  record: AttemptRecord,
  decision: Extract<StageDecision, { action: 'complete' | 'skip' | 'fail' }>,
): void {
  const { stage } = run;
  const st = run.state.stages[stage.name]!;
  switch (decision.action) {
    case 'complete':
      st.artefact = record.artefact;
      if (record.outputSummary !== undefined) st.summary = record.outputSummary;
      return settle(
        run,
        'completed',
        `${stage.name} completed on attempt ${record.attempt}/${stage.retryBudget.maxAttempts}`,
      );
    case 'skip':
      st.skipReason = 'outcome';
      return settle(
        run,
        'skipped',
        `${stage.name} skipped itself${record.outputSummary ? `: ${record.outputSummary}` : ''}`,
      );
    case 'fail':
      return settle(run, 'failed', `${stage.name} failed: ${decision.reason}`, { error: decision.reason });
  }
}

/** A retry decided: announced before its delay, if it has one. */
export function announceRetry(run: StageRun, decision: Extract<StageDecision, { action: 'retry' }>): void {
  const { stage } = run;
  const max = stage.retryBudget.maxAttempts;
  run.emit(
    'RetryScheduled',
    `${stage.name} will retry (attempt ${decision.nextAttempt}/${max}${decision.delayMs ? ` after ${formatDuration(decision.delayMs)}` : ''})`,
    {
      stage: stage.name,
      attempt: decision.nextAttempt,
      maxAttempts: max,
      details: { delayMs: decision.delayMs },
    },
  );
}

/** A retry beginning, after its delay. */
export function beginRetry(run: StageRun, decision: Extract<StageDecision, { action: 'retry' }>): void {
  const { stage } = run;
  run.emit(
    'RetryAttempt',
    `${stage.name} attempt ${decision.nextAttempt}/${stage.retryBudget.maxAttempts} because: ${decision.feedback.summary}`,
    {
      stage: stage.name,
      attempt: decision.nextAttempt,
      maxAttempts: stage.retryBudget.maxAttempts,
      details: { feedbackSummary: decision.feedback.summary },
    },
  );
}

/** An attempt a reviewer's request for changes granted, beginning. */
function beginRequestedAttempt(run: StageRun, attempt: number, feedback: QualityFeedback): void {
  const { stage } = run;
  const maxAttempts = Math.max(stage.retryBudget.maxAttempts, attempt);
  run.emit('RetryAttempt', `${stage.name} attempt ${attempt} because: ${feedback.summary}`, {
    stage: stage.name,
    attempt,
    maxAttempts,
    details: { feedbackSummary: feedback.summary, reviewer: feedback.reviewer ?? null },
  });
}

/** The events of a judged attempt: its timeout, or its gate's verdict. */
function recordVerdictEvents(
  run: StageRun,
  record: AttemptRecord,
  outcome: AttemptOutcome,
  decision: StageDecision,
): void {
  const { stage, emit } = run;
  const fields = { stage: stage.name, attempt: record.attempt, maxAttempts: stage.retryBudget.maxAttempts };
  const decidedFeedback =
    decision.action === 'retry' || decision.action === 'fail' || decision.action === 'review'
      ? decision.feedback
      : undefined;
  if (decidedFeedback) record.feedback = decidedFeedback;
  if (outcome.kind === 'timed_out') {
    emit(
      'AttemptTimedOut',
      `${stage.name} attempt ${record.attempt} timed out after ${formatDuration(outcome.afterMs)}`,
      fields,
    );
    emit(
      'QualityCheckFailed',
      `${stage.name} attempt ${record.attempt} failed: attempt timed out after ${formatDuration(outcome.afterMs)}`,
      {
        ...fields,
        details: { feedbackSummary: decidedFeedback?.summary ?? 'attempt timed out' },
      },
    );
    return;
  }
  const verdict = outcome.verdict;
  if (!verdict) return;
  if (verdict.kind === 'accepted')
    emit('QualityCheckPassed', `${stage.name} attempt ${record.attempt} passed its quality gate`, fields);
  else if (verdict.kind === 'rejected') {
    emit('QualityCheckFailed', `${stage.name} attempt ${record.attempt} rejected: ${verdict.feedback.summary}`, {
      ...fields,
      details: { feedbackSummary: verdict.feedback.summary },
    });
  } else {
    emit('QualityCheckUncertain', `${stage.name} attempt ${record.attempt}: gate uncertain: ${verdict.reason}`, {
      ...fields,
      details: { reason: verdict.reason },
    });
  }
}

/**
 * Hands the stage to a human and applies their decision, or the TTL's (engine `decideReview`). Returns
 * `resume` only when approval lifts a spent token budget: the stage then carries on with its attempts; and
 * `{ retry }` when the reviewer requested changes: the next attempt runs with that feedback.
 */
export async function review(
  run: StageRun,
  decision: Extract<StageDecision, { action: 'review' }>,
): Promise<'settled' | 'resume' | { retry: QualityFeedback }> {
  const { stage, state, emit } = run;
  const st = state.stages[stage.name]!;
  const attempt = st.attempts.length;
  if (decision.escalated)
    emit('Escalated', `${stage.name} escalated to review: ${decision.message}`, {
      stage: stage.name,
      attempt,
      details: { reason: decision.reason },
    });
  const pending: PendingReview = {
    stage: stage.name,
    reason: decision.reason,
    message: truncateText(decision.message),
    requestedAt: now(),
    attempt,
    attempts: st.attempts.length,
    ...(stage.reviewers !== undefined ? { reviewers: stage.reviewers } : {}),
  };
  if (stage.reviewTtlMs !== null) pending.expiresAt = new Date(Date.now() + stage.reviewTtlMs).toISOString();
  const sla = run.engine.reviewerAttention ? stage.reviewSla : undefined;
  if (sla !== undefined) pending.dueAt = dueAt(pending.requestedAt, sla);
  state.pendingReviews.push(pending);
  st.status = 'waiting_review';
  emit('ReviewRequested', `${stage.name} waits for review: ${decision.message}`, {
    stage: stage.name,
    attempt,
    details: { reason: decision.reason },
  });
  run.touch();
  // Only an item that announces awaits here: another await would reorder older items' commands.
  const said = run.engine.reviewerAttention && run.notifies === true ? announced(run, pending) : undefined;
  if (said) await said('decision_owed', decision.message);

  await waitWithDeadline({
    decided: () => run.resolutions.has(stage.name),
    limitMs: stage.reviewTtlMs,
    limitSummary: `${stage.name} · review TTL`,
    sla,
    slaSummary: `${stage.name} · review SLA`,
    onOverdue: () =>
      recordOverdue(run, pending, sla!, `${stage.name}'s review`, said && ((message) => said('overdue', message))),
  });
  // A review that arrived wins even if the TTL timer fired in the same activation.
  const resolution = run.resolutions.get(stage.name);
  run.resolutions.delete(stage.name);
  state.pendingReviews = state.pendingReviews.filter((r) => r.stage !== stage.name);
  st.status = 'running';
  run.touch();

  const decided = decideReview({
    stage: stage.name,
    reason: decision.reason,
    attempts: st.attempts,
    resolution,
    onReviewExpired: stage.onReviewExpired,
    reviewTtlMs: stage.reviewTtlMs,
    at: now(),
  });
  st.review = decided.review;
  emit(decided.event.type, decided.event.message, { stage: stage.name, attempt, details: decided.event.details });
  if (said)
    await said('decided', decided.event.message, { decidedBy: decided.review.reviewer, outcome: decided.review.kind });
  const outcome = decided.decision;
  if (outcome.action === 'resume') return 'resume';
  if (outcome.action === 'retry') return { retry: outcome.feedback };
  if (outcome.action === 'fail') return settled(run, 'failed', outcome.message, { error: outcome.error });
  if (outcome.artefact !== undefined) st.artefact = await storedArtefact(outcome.artefact, `${stage.name} as approved`);
  if (outcome.summary !== undefined) st.summary = truncateText(outcome.summary);
  return settled(run, 'completed', outcome.message);
}

/** An artefact ready to travel to dependents: inline ones above the threshold are stored once, here. */
async function storedArtefact(artefact: Artefact, summary: string): Promise<Artefact> {
  if (isReference(artefact) || JSON.stringify(artefact).length <= DEFAULT_BLOB_THRESHOLD_BYTES) return artefact;
  return (await storeArtefact({ artefact, summary })).artefact;
}

/** Settles the stage ({@link settle}) and says so to the runner. */
function settled(
  run: StageRun,
  status: 'completed' | 'failed' | 'skipped',
  message: string,
  extra: Partial<StageState> = {},
): 'settled' {
  settle(run, status, message, extra);
  return 'settled';
}

/** Ends the stage with `status` and its event. */
function settle(
  run: StageRun,
  status: 'completed' | 'failed' | 'skipped',
  message: string,
  extra: Partial<StageState> = {},
): void {
  const st = run.state.stages[run.stage.name]!;
  Object.assign(st, extra, { status, completedAt: now() });
  const type: EventType =
    status === 'completed' ? 'StageCompleted' : status === 'failed' ? 'StageFailed' : 'StageSkipped';
  run.emit(type, message, { stage: run.stage.name, attempt: st.attempts.length });
}

/** A blob reference by shape; `isBlobRef` in model/shapes says the same with zod, which workflow code does not load. */
function isReference(value: Artefact): boolean {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    typeof value.ref === 'string' &&
    value.ref.startsWith('sha256:') &&
    typeof value.bytes === 'number'
  );
}
