/**
 * The `workItem` workflow: one execution per work item. It validates the pipeline spec, runs the DAG
 * (independent stages in parallel), runs every stage through the stage runner (execute → gate → policy,
 * DESIGN.md "The stage runner"), waits for human reviews, and keeps the `state` query, the search
 * attributes and the Web UI details current. Decisions come from the pure functions in `src/engine`.
 */
import {
  ActivityCancellationType,
  ApplicationFailure,
  CancellationScope,
  condition,
  executeChild,
  isCancellation,
  log,
  proxyActivities,
  proxyLocalActivities,
  setCurrentDetails,
  setHandler,
  sleep,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
  uuid4,
} from '@temporalio/workflow';
import { allSettled, itemStatus, readyStages, stagesToSkip } from '../engine/dag';
import { checkReview, decideReview, type AcceptedReview } from '../engine/review';
import { combineVerdicts } from '../engine/gates';
import { keepCalls, summarizeUsage, tokensSpent } from '../engine/usage';
import { decideAfterAttempt, type AttemptOutcome, type StageDecision } from '../engine/stage-policy';
import {
  PREPARE_PIPELINE_ACTIVITY,
  STORE_ARTEFACT_ACTIVITY,
  TDD_PREPARE_ACTIVITY,
  gateActivityType,
} from '../model/activity-types';
import { TDD_STAGE } from '../model/tdd-node';
import type { TddNodeInput, TddPrepareInput } from '../model/tdd-node';
import { tddNode } from './tdd-node';
import {
  callsReported,
  describeFailure,
  eventPage,
  failureDetails,
  failureWithUsage,
  now,
  retryPolicyOf,
  usageBatch,
  type StageKindRun,
} from './common';
import { applyDecision, runApprovalStage } from './approval-stage';
import { runInlineFanOut } from './fan-out-stage';
import { fanOutElementInput, fanOutElementOf, handleFanOutProgress, runFanOutWorkflow } from './fan-out';
import { runLoopStage } from './loop-stage';
import { runContracts } from './contracts';
import { LOOP_STAGE } from '../model/loop-state';
import { FAN_OUT_STAGE } from '../model/fan-out';
import { APPROVAL_STAGE, APPROVALS_MEMO_KEY, checkApprovalDecision, type ApprovalsMemo } from '../model/approvals';
import { DEFAULT_BLOB_THRESHOLD_BYTES, MAX_ERROR_CHARS, truncateText } from '../model/limits';
import { formatDuration } from '../model/duration';
import { unpackStages } from '../model/packed-stages';
import { gateLeaves, type GateRef } from '../model/gate-ref';
import type { PipelineSpec, StageSpec } from '../model/pipeline';
import {
  MAX_APPROVAL_IDS_ATTRIBUTE,
  REVIEWS_MEMO_KEY,
  TreadleApprovals,
  TreadlePendingReviews,
  TreadlePipeline,
  TreadleStatus,
} from '../model/search-attributes';
import type {
  Artefact,
  AttemptRecord,
  EventType,
  Json,
  QualityFeedback,
  QualityVerdict,
  TreadleEvent,
} from '../model/shapes';
import type {
  PreparePipelineInput,
  PreparePipelineResult,
  GateActivityInput,
  GateActivityResult,
  PendingReview,
  PreviousAttempts,
  StageActivityInput,
  StageActivityResult,
  StageState,
  StateQueryArgs,
  StoreArtefactInput,
  StoreArtefactResult,
  ReviewsMemo,
  WorkItemInput,
  WorkItemResult,
  WorkItemState,
} from '../model/state';
import {
  CALL_BATCH_ENGINE,
  CHAINED_STAGE_RUNNER_ENGINE,
  EVENT_DRIVEN_SCHEDULER_ENGINE,
  FAN_OUT_WORKFLOW_ENGINE,
} from '../model/state';
import {
  approvalSignal,
  decideApprovalUpdate,
  eventsQuery,
  resolveReviewUpdate,
  reviewSignal,
  stateQuery,
} from './messages';

// A local activity: it only reads the worker's registry, so it needs no task-queue round trip.
const treadleLocal = proxyLocalActivities<{
  [PREPARE_PIPELINE_ACTIVITY]: (input: PreparePipelineInput) => Promise<PreparePipelineResult>;
  [STORE_ARTEFACT_ACTIVITY]: (input: StoreArtefactInput) => Promise<StoreArtefactResult>;
}>({
  startToCloseTimeout: '30s',
  retry: { maximumAttempts: 5 },
});
const preparePipeline = treadleLocal[PREPARE_PIPELINE_ACTIVITY];
const tddPrepare = proxyActivities<{ [TDD_PREPARE_ACTIVITY]: (input: TddPrepareInput) => Promise<TddNodeInput> }>({
  startToCloseTimeout: '1m',
  retry: { maximumAttempts: 5, nonRetryableErrorTypes: ['InvalidConfig'] },
})[TDD_PREPARE_ACTIVITY];
const storeArtefact = treadleLocal[STORE_ARTEFACT_ACTIVITY];

/**
 * Events that are routine progress: in the event stream, the `state` query and the Web UI, but not in the
 * worker's log. Every workflow log line is a sink call, cloned with the workflow's info and sent from the
 * workflow thread to the main thread (BENCHMARKS.md), so the log keeps the item's start and end and
 * whatever needs attention: failures, rejections, retries, timeouts, reviews and escalations.
 */
const ROUTINE_EVENTS: ReadonlySet<EventType> = new Set<EventType>([
  'StageStarted',
  'StageCompleted',
  'QualityCheckPassed',
  'RetryAttempt',
]);

/** Reviews kept in the memo; the `state` query lists them all. */
const MEMO_REVIEWS = 20;
/** Visibility limits each search attribute value (2 KB by default); the stage list stays under this. */
const PENDING_REVIEWS_ATTRIBUTE_BYTES = 1_500;
/** Stage rows in the Web UI's current details; the rest are counted. */
const DETAIL_ROWS = 30;

/** Runs one work item through its pipeline. */
export async function workItem(args: WorkItemInput): Promise<WorkItemResult> {
  const info = workflowInfo();
  const itemId = args.itemId ?? info.workflowId;
  // A fan-out's element names its place in the stored list; it is read once the spec is prepared.
  const element = fanOutElementOf(args);
  let input: Json = args.input ?? null;
  const pipelineName = args.pipelineName ?? readName(args.pipeline);
  // The starter's correlation id (TreadleClient.start makes one and sets the search attribute), else one made
  // here, deterministically (uuid4 is replay-safe), for items started by other means.
  const correlationId = args.correlationId ?? uuid4();
  const state: WorkItemState = {
    id: itemId,
    pipeline: pipelineName,
    correlationId,
    status: 'running',
    // Stage names are data: a null-prototype record, so "constructor" is a stage like any other.
    stages: Object.create(null) as Record<string, StageState>,
    pendingReviews: [],
    events: [],
    eventCount: 0,
    startedAt: now(),
  };
  const resolutions = new Map<string, AcceptedReview>();
  let changed = false;
  let settledStatus = false;
  let passQueued = false;
  let cancellation: unknown;
  // The event-driven scheduler's pass, installed once the spec is prepared (never on the loop's branch).
  let pass: (() => void) | undefined;
  // One settled promise for the whole run: queueing a pass costs one `then`, not a promise of its own.
  const settledPromise = Promise.resolve();
  /**
   * Something changed (a stage settled, an attempt began, a review arrived): the status, the reviews memo
   * and ready stages are looked at again. With the event-driven scheduler one pass is queued after the
   * code running now, so the changes of one activation share a pass and its publish; before it, the main
   * loop's `condition` saw the flag.
   */
  const touch = (): void => {
    changed = true;
    if (pass === undefined || passQueued) return;
    passQueued = true;
    void settledPromise.then(() => pass!());
  };
  // A stage ended: with the event-driven scheduler the pass runs at once (its runner has finished, so
  // nothing is left half-done), without a promise; a stage that ends inside a pass makes that pass look again.
  let inPass = false;
  let endedInPass = false;
  const ended = (): void => {
    changed = true;
    if (pass === undefined) return;
    if (inPass) endedInPass = true;
    else pass();
  };

  const emit = (type: EventType, message: string, fields: Partial<TreadleEvent> = {}): void => {
    const event: TreadleEvent = { seq: state.events.length + 1, type, itemId, at: now(), message, ...fields };
    state.events.push(event);
    state.eventCount = event.seq;
    if (!ROUTINE_EVENTS.has(type))
      log.info(message, { event: type, stage: fields.stage, attempt: fields.attempt, correlationId });
  };

  // Handlers are registered before the first await, so no message is ever dropped.
  const deliver = (review: AcceptedReview): void => {
    // Removing the pending entry here (not when the runner wakes) makes a second review of the same stage
    // in the same activation fail validation instead of overwriting the first.
    state.pendingReviews = state.pendingReviews.filter((r) => r.stage !== review.stage);
    resolutions.set(review.stage, review);
    touch();
  };
  setHandler(reviewSignal, (payload) => {
    const checked = checkReview(state, payload);
    if (checked.ok) deliver(checked.review);
    // What was wrong, never the payload itself: a rejected 500 KB edit must not live in every query.
    else
      emit('ReviewInputRejected', truncateText(checked.error), {
        ...stageOf(payload),
        details: describePayload(payload),
      });
  });
  setHandler(
    resolveReviewUpdate,
    (payload) => {
      const checked = checkReview(state, payload);
      if (!checked.ok) throw ApplicationFailure.nonRetryable(checked.error, 'InvalidReview');
      deliver(checked.review);
      return {
        itemId,
        stage: checked.review.stage,
        outcome: checked.review.outcome.kind,
        reviewer: checked.review.reviewer,
      };
    },
    {
      validator: (payload) => {
        const checked = checkReview(state, payload);
        if (!checked.ok) throw new Error(checked.error);
      },
      description: 'Approve, reject or approve-with-edits a stage that is waiting for review.',
    },
  );
  // Approval requests (seed 003): decided by id, by update (validated) or signal.
  const decideApproval = (payload: unknown): ReturnType<typeof checkApprovalDecision> => {
    const checked = checkApprovalDecision(state.approvals ?? [], itemId, payload);
    if (!checked.ok) return checked;
    const by = checked.decision.by ?? 'anonymous';
    applyDecision(checked.request, checked.decision.decision, by, checked.decision.reason);
    emit(
      'ApprovalDecided',
      `${checked.request.step}: approval ${checked.request.id} ${checked.request.status} by ${by}${checked.decision.reason ? `: ${checked.decision.reason}` : ''}`,
      {
        stage: checked.request.step,
        details: { id: checked.request.id, status: checked.request.status, by },
      },
    );
    touch();
    return checked;
  };
  setHandler(approvalSignal, (payload) => {
    const decided = decideApproval(payload);
    if (!decided.ok) emit('ApprovalInputRejected', truncateText(decided.error), { details: describePayload(payload) });
  });
  setHandler(
    decideApprovalUpdate,
    (payload) => {
      const decided = decideApproval(payload);
      if (!decided.ok) throw ApplicationFailure.nonRetryable(decided.error, 'InvalidDecision');
      return {
        id: decided.request.id,
        itemId,
        step: decided.request.step,
        status: decided.request.status as 'approved' | 'rejected',
        decidedBy: decided.request.decidedBy!,
      };
    },
    {
      validator: (payload) => {
        const checked = checkApprovalDecision(state.approvals ?? [], itemId, payload);
        if (!checked.ok) throw new Error(checked.error);
      },
      description:
        'Approve or reject a pending approval request by id: {id, decision: "approve" | "reject", by?, reason?}.',
    },
  );
  handleFanOutProgress(state, touch);
  setHandler(stateQuery, (args?: StateQueryArgs) => pageOfState(state, args), {
    description:
      'The work item: status, stages, attempts, pending reviews, model usage, and a page of events ({eventsAfter, eventLimit}).',
  });
  setHandler(
    eventsQuery,
    (args?: StateQueryArgs) => {
      return {
        status: state.status,
        eventCount: state.eventCount,
        events: eventPage(state.events, args),
        pendingReviews: state.pendingReviews,
        ...(state.error ? { error: state.error } : {}),
      };
    },
    { description: 'Status, pending reviews and a page of events ({eventsAfter, eventLimit}), without the stages.' },
  );

  // Each upsert is a command and a history event, so only changes are upserted.
  // Called once per activation by the main loop (and at the end), never per stage: its cost grows with the
  // number of stages, and each upsert is a history event.
  let published: string | undefined;
  let publishedReviews: string | undefined;
  let publishedApprovals: string | undefined;
  const publish = (): void => {
    if (!settledStatus) state.status = itemStatus(state.stages);
    const waiting = attributeStages(state.pendingReviews.map((r) => r.stage));
    const approvalIds = (state.approvals ?? [])
      .filter((r) => r.status === 'pending')
      .slice(0, MAX_APPROVAL_IDS_ATTRIBUTE)
      .map((r) => r.id);
    // When to upsert stays what it was (commands replay); the value also names decided requests, newest first,
    // so a decision on one finds its item and hears how it was decided instead of "not found".
    const decidedIds = (state.approvals ?? [])
      .filter((r) => r.status !== 'pending')
      .map((r) => r.id)
      .reverse();
    const searchableIds = [...approvalIds, ...decidedIds].slice(0, MAX_APPROVAL_IDS_ATTRIBUTE);
    const current = JSON.stringify([state.status, waiting, approvalIds]);
    if (current !== published) {
      upsertSearchAttributes([
        ...(published === undefined ? [{ key: TreadlePipeline, value: state.pipeline }] : []),
        { key: TreadleStatus, value: state.status },
        { key: TreadlePendingReviews, value: waiting.length > 0 ? waiting : null },
        // Only once an item has had approvals: items without any never carry the attribute.
        ...(approvalIds.length > 0 || state.approvals !== undefined
          ? [{ key: TreadleApprovals, value: searchableIds.length > 0 ? searchableIds : null }]
          : []),
      ]);
      published = current;
    }
    if (state.approvals !== undefined) {
      const approvalsMemo = approvalsMemoOf(state);
      const approvalsText = JSON.stringify(approvalsMemo);
      if (approvalsText !== publishedApprovals) {
        upsertMemo({ [APPROVALS_MEMO_KEY]: approvalsMemo });
        publishedApprovals = approvalsText;
      }
    }
    const memo = reviewsMemo(state);
    const memoText = JSON.stringify(memo);
    if (memoText !== publishedReviews && (publishedReviews !== undefined || memo !== null)) {
      upsertMemo({ [REVIEWS_MEMO_KEY]: memo });
      publishedReviews = memoText;
    }
    setCurrentDetails(renderDetails(state));
  };

  const finish = (error?: string): WorkItemResult => {
    state.completedAt = now();
    if (error !== undefined) state.error = error;
    const failedStages = Object.entries(state.stages)
      .filter(([, s]) => s.status === 'failed')
      .map(([name]) => name);
    const failed = error !== undefined || failedStages.length > 0;
    state.status = failed ? 'failed' : 'completed';
    settledStatus = true;
    if (failed && state.error === undefined)
      state.error = `stage${failedStages.length > 1 ? 's' : ''} failed: ${failedStages.join(', ')}`;
    emit(failed ? 'ItemFailed' : 'ItemCompleted', failed ? `work item failed: ${state.error}` : 'work item completed');
    publish();
    const artefacts: Record<string, Artefact> = Object.create(null) as Record<string, Artefact>;
    for (const [name, s] of Object.entries(state.stages))
      if (s.status === 'completed' && s.artefact !== undefined) artefacts[name] = s.artefact;
    const stageErrors: Record<string, string> = Object.create(null) as Record<string, string>;
    for (const name of failedStages) stageErrors[name] = state.stages[name]!.error ?? 'failed';
    // The item's model calls in total, for a parent that fans out over items like this one.
    const { total } = summarizeUsage(state.stages);
    return {
      id: itemId,
      pipeline: state.pipeline,
      status: state.status === 'failed' ? 'failed' : 'completed',
      artefacts,
      failedStages,
      ...(state.error ? { error: state.error } : {}),
      ...(failedStages.length > 0 ? { stageErrors } : {}),
      ...(total.calls > 0 ? { usage: total } : {}),
    };
  };

  emit('ItemStarted', `work item ${itemId} started on pipeline ${pipelineName}`);
  const prepared = await preparePipeline({ pipeline: args.pipeline });
  // Whether passes are queued by touches (the event-driven scheduler) or made by the main loop's `condition`:
  // by the engine version the item started on, recorded with the prepare step. Items begun before it keep
  // the loop and the first upsert, so their histories replay.
  const eventDriven = (prepared.engine ?? 1) >= EVENT_DRIVEN_SCHEDULER_ENGINE;
  if (eventDriven) {
    // TreadleClient.start sets the pipeline and `running` as the item starts: nothing to upsert until they
    // change (an upsert is an event and a visibility write). Items started by other means get the upsert.
    const started = info.typedSearchAttributes;
    if (
      started.get(TreadlePipeline) === state.pipeline &&
      started.get(TreadleStatus) === 'running' &&
      started.get(TreadlePendingReviews) === undefined
    ) {
      published = JSON.stringify(['running', [], []]);
    }
  }
  if (!prepared.ok) {
    state.problems = prepared.problems;
    return finish(`pipeline ${pipelineName} is invalid: ${prepared.problems.join('; ')}`);
  }
  // Histories recorded before packed stages carry every stage whole.
  const spec = prepared.packedStages
    ? { ...prepared.spec, stages: unpackStages(prepared.packedStages) }
    : prepared.spec;
  if (element !== undefined) input = await fanOutElementInput(element);
  if (
    args.tokenBudget !== undefined &&
    args.tokenBudget !== null &&
    !(Number.isInteger(args.tokenBudget) && args.tokenBudget > 0)
  ) {
    state.problems = [
      `tokenBudget must be a whole number of tokens above 0 or null, got ${JSON.stringify(args.tokenBudget)}`,
    ];
    return finish(`invalid work item: ${state.problems[0]}`);
  }
  state.tokenBudget = args.tokenBudget !== undefined ? args.tokenBudget : spec.tokenBudget;
  const agentBacked = new Set(prepared.agentBacked);
  for (const stage of spec.stages)
    state.stages[stage.name] = { status: 'pending', attempts: [], maxAttempts: stage.retryBudget.maxAttempts };
  const stageByName = new Map(spec.stages.map((s) => [s.name, s]));
  publish();

  // What the runner does when its stage ends by an exception: a cancellation is kept and rethrown, any other
  // error (an engine bug) fails its stage instead of failing workflow tasks forever.
  const crashed = (stage: StageSpec, error: unknown): void => {
    if (isCancellation(error)) cancellation ??= error;
    else if (!['completed', 'failed', 'skipped'].includes(state.stages[stage.name]!.status)) {
      const message = `internal error in the stage runner: ${describeFailure(error)}`;
      Object.assign(state.stages[stage.name]!, { status: 'failed', error: message, completedAt: now() });
      emit('StageFailed', `${stage.name} failed: ${message}`, { stage: stage.name });
    }
  };
  // A runner never fails: runStage (engines 1 and 2) catches, reports through `crashed` and calls `ended` when
  // its stage ends, and runStageChained (engine 3) does the same in each of its steps and returns nothing.
  // No `.then` on runStage: the SDK records a stack trace for every promise a workflow creates.
  const chained = (prepared.engine ?? 1) >= CHAINED_STAGE_RUNNER_ENGINE;
  // Engine 4: every model call counts (a timed-out activity's last heartbeat, TDD trees, loops, fan-outs),
  // and TDD trees and loops are under the token budget.
  const callBatches = (prepared.engine ?? 1) >= CALL_BATCH_ENGINE;
  // Engine 5: a fan-out runs its elements under a fan-out workflow, its list stored (src/workflows/fan-out.ts).
  const fanOut = (prepared.engine ?? 1) >= FAN_OUT_WORKFLOW_ENGINE ? runFanOutWorkflow : runInlineFanOut;
  const runner = (stage: StageSpec): void => {
    const run: StageRun = {
      stage,
      spec,
      state,
      input,
      itemId,
      emit,
      touch,
      ended,
      crashed,
      eventDriven,
      callBatches,
      fanOut,
      resolutions,
      usesAgent: usesAgent(stage, agentBacked, callBatches),
    };
    if (chained) runStageChained(run);
    else void runStage(run);
  };

  // Starts what can start (skipping what cannot run any more) and reports whether it skipped anything:
  // skipped stages may make their dependents skippable in turn.
  const startReady = (): boolean => {
    let skipped = false;
    for (const { stage, because } of stagesToSkip(spec, state.stages)) {
      state.stages[stage] = {
        ...state.stages[stage]!,
        status: 'skipped',
        skipReason: 'upstream_failed',
        error: `dependency ${because} did not complete`,
      };
      emit('StageSkipped', `${stage} skipped: dependency ${because} did not complete`, { stage });
      skipped = true;
    }
    // At most max_parallel stages run at once, so no width of pipeline floods one activation or passes
    // Temporal's pending-activity limit; the rest start in spec order as others settle.
    let free = spec.maxParallel - Object.values(state.stages).filter((s) => s.status === 'running').length;
    for (const name of free > 0 ? readyStages(spec, state.stages) : []) {
      if (free-- <= 0) break;
      state.stages[name]!.status = 'running';
      runner(stageByName.get(name)!);
    }
    return skipped;
  };

  try {
    if (eventDriven) {
      // The event-driven scheduler: no loop waiting on a `condition` (five promises and one more pass over
      // the workflow's conditions per activation, BENCHMARKS.md); a pass runs when something touched the
      // state, and the run ends when the last stage settles.
      const finished = new Promise<void>((resolve, reject) => {
        pass = () => {
          // Touches made during the pass (the runners it starts) are covered by its own publish.
          passQueued = true;
          inPass = true;
          do {
            endedInPass = false;
            while (startReady());
          } while (endedInPass);
          publish();
          inPass = false;
          passQueued = false;
          if (cancellation !== undefined) reject(cancellation);
          else if (allSettled(state.stages)) resolve();
        };
        // Cancelled from outside while every stage waits: end now, as the loop's condition did.
        CancellationScope.current().cancelRequested.catch((error: unknown) => {
          cancellation ??= error;
          reject(error);
        });
      });
      pass!();
      await finished;
    } else {
      // Histories recorded before the event-driven scheduler: a loop that waits on a `condition`.
      for (;;) {
        // The runners just started touched the state before their first await; the publish below covers
        // that, so only skips (whose dependents may be skipped in turn) call for another pass at once.
        changed = startReady();
        publish();
        if (allSettled(state.stages)) break;
        await condition(() => changed || cancellation !== undefined);
        if (cancellation !== undefined) throw cancellation;
        changed = false;
      }
    }
  } catch (error) {
    if (!isCancellation(error)) throw error;
    // Cancelled from outside (temporal workflow cancel): record it where UIs and listings look, then end.
    state.status = 'cancelled';
    settledStatus = true;
    state.error = 'work item cancelled';
    state.completedAt = now();
    state.pendingReviews = [];
    emit('ItemFailed', 'work item cancelled');
    publish();
    throw error;
  }
  return finish();
}

interface StageRun {
  stage: StageSpec;
  spec: PipelineSpec;
  state: WorkItemState;
  input: Json;
  itemId: string;
  emit: (type: EventType, message: string, fields?: Partial<TreadleEvent>) => void;
  /** Wakes the scheduler, which publishes status, reviews and details once per activation. */
  touch: () => void;
  /** The stage has ended (settled, handed to a human who settled it, or crashed): the scheduler looks again. */
  ended: () => void;
  /** Records an exception that ended the stage (a cancellation, or an engine bug that fails the stage). */
  crashed: (stage: StageSpec, error: unknown) => void;
  /** The work item runs the event-driven scheduler (EVENT_DRIVEN_SCHEDULER_ENGINE). */
  eventDriven: boolean;
  /**
   * CALL_BATCH_ENGINE: the calls on a timed-out activity's last heartbeat count, and so do the totals TDD
   * trees, loops and fan-outs report (on their results and failures). Items of older engines ignore them, so
   * that their token-budget checks decide as they did.
   */
  callBatches: boolean;
  /** How a fan-out runs: under a fan-out workflow (FAN_OUT_WORKFLOW_ENGINE), else from the work item itself. */
  fanOut: (run: StageKindRun, outcome?: Artefact) => Promise<StageActivityResult>;
  resolutions: Map<string, AcceptedReview>;
  /** The stage's implementation or one of its gates calls models: the token budget applies. */
  usesAgent: boolean;
}

/** The stage runner: attempts until the policy completes, skips, fails or hands the stage to a human. */
async function runStage(run: StageRun): Promise<void> {
  // One async function, no `.then` on it: every promise a workflow makes costs (BENCHMARKS.md).
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
        outcome = await runAttempt(run, record, log, feedback);
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
 * The stage runner of engine 3 (CHAINED_STAGE_RUNNER_ENGINE): the same steps and decisions as
 * {@link runStage}, written as continuations instead of an async function. Every promise a workflow creates
 * costs the workflow thread a stack trace (the SDK's promise hook, BENCHMARKS.md), and an async function
 * costs two per attempt (its own and the one its `await` makes): here an attempt is the activity's promise
 * and one `then` on it. Rarer steps (contracts, a review, a retry delay, an attempt timeout, a gate) add
 * their own promises as before.
 *
 * Like runStage it never rejects: an exception in any step (an engine bug, a cancellation) goes to
 * `crashed`, and `ended` is called exactly once when the stage ends, however it ends.
 */
function runStageChained(run: StageRun): void {
  const { stage, state } = run;
  const st = state.stages[stage.name]!;
  let over = false;
  const end = (): void => {
    if (over) return;
    over = true;
    run.ended();
  };
  const crash = (error: unknown): void => {
    // After the end (the scheduler's pass threw), as runStage's `finally` would: the workflow task fails.
    if (over) throw error;
    try {
      run.crashed(stage, error);
    } finally {
      end();
    }
  };
  // Each step runs guarded: what runStage's outer try/catch/finally did for its whole body. A step inside a
  // step is harmless: the inner one handles its own exception, and `over` keeps the end to one call.
  const step = (body: () => void): void => {
    try {
      body();
    } catch (error) {
      crash(error);
    }
  };

  let attempt = 1;
  let feedback: QualityFeedback | null = null;
  let budgetWaived = false;
  const log: AttemptLog = { ref: null, count: 0 };

  const startAttempt = (): void => {
    const budgetSpent = budgetWaived ? null : budgetReview(run, attempt);
    if (budgetSpent) {
      review(run, budgetSpent).then(
        (reviewed) =>
          step(() => {
            if (reviewed === 'settled') return end();
            budgetWaived = true;
            startAttempt();
          }),
        crash,
      );
      return;
    }
    const record: AttemptRecord = { attempt, startedAt: now() };
    st.attempts.push(record);
    run.touch();
    const failed = (error: unknown): void =>
      step(() => {
        if (isCancellation(error)) throw error;
        failAttempt(run, record, error);
        end();
      });
    const decided = (outcome: AttemptOutcome): void => step(() => afterAttempt(record, outcome));
    try {
      const { execute, afterExecuted } = prepareAttempt(run, record, log, feedback);
      const timeoutMs = stage.retryBudget.attemptTimeoutMs;
      if (timeoutMs !== null) {
        withAttemptTimeout(run, record, log, timeoutMs, () => execute().then(afterExecuted)).then(decided, failed);
        return;
      }
      execute().then((executed) => {
        let outcome: AttemptOutcome | Promise<AttemptOutcome>;
        try {
          outcome = afterExecuted(executed);
        } catch (error) {
          return failed(error);
        }
        if ('then' in outcome) outcome.then(decided, failed);
        else decided(outcome);
      }, failed);
    } catch (error) {
      failed(error);
    }
  };

  const afterAttempt = (record: AttemptRecord, outcome: AttemptOutcome): void => {
    const decision = decideAfter(run, record, outcome);
    switch (decision.action) {
      case 'complete':
      case 'skip':
      case 'fail':
        settleDecided(run, record, decision);
        return end();
      case 'retry': {
        announceRetry(run, decision);
        const next = (): void =>
          step(() => {
            attempt = decision.nextAttempt;
            feedback = decision.feedback;
            beginRetry(run, decision);
            startAttempt();
          });
        if (decision.delayMs > 0)
          sleep(decision.delayMs, { summary: `${stage.name} · delay before attempt ${decision.nextAttempt}` }).then(
            next,
            crash,
          );
        else next();
        return;
      }
      case 'review':
        // Only a token-budget review can resume a stage, and that one is requested in startAttempt.
        review(run, decision).then(() => end(), crash);
        return;
    }
  };

  step(() => {
    const contracts = beginStage(run);
    if (!contracts) return startAttempt();
    contracts.then(
      (contracted) =>
        step(() => {
          if (contracted.ok) return startAttempt();
          failBeforeFirstAttempt(run, contracted.message);
          end();
        }),
      crash,
    );
  });
}

/** The stage starts: its start is recorded, and its quality contracts run first when it has any (seed 002). */
function beginStage(run: StageRun): ReturnType<typeof runContracts> | null {
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
function failBeforeFirstAttempt(run: StageRun, message: string): void {
  settle(run, 'failed', `${run.stage.name} failed before its first attempt: ${message}`, { error: message });
}

/**
 * The review a spent token budget calls for before this attempt, or null. A soft cap, checked before each
 * attempt of a stage that calls models: the human decides whether the stage may spend more.
 */
function budgetReview(run: StageRun, attempt: number): Extract<StageDecision, { action: 'review' }> | null {
  const budget = run.state.tokenBudget ?? null;
  if (!run.usesAgent || budget === null) return null;
  const spent = tokensSpent(run.state.stages);
  if (spent < budget) return null;
  const message = `token budget spent: ${spent} of ${budget} tokens used; attempt ${attempt} would call the model again (approve to let this stage continue, reject to fail it, or approve an earlier attempt's output)`;
  return { action: 'review', reason: 'budget_exhausted', message, escalated: true };
}

/** An attempt that ended in an error: its record (the error, the calls it made) and the stage's failure. */
function failAttempt(run: StageRun, record: AttemptRecord, error: unknown): void {
  const message = truncateText(describeFailure(error), MAX_ERROR_CHARS);
  keepCalls(record, callsOfFailure(run, error));
  record.completedAt = now();
  record.error = message;
  settle(run, 'failed', `${run.stage.name} failed on attempt ${record.attempt}: ${message}`, { error: message });
}

/** An attempt's outcome recorded and judged by the stage policy: what happens next. */
function decideAfter(run: StageRun, record: AttemptRecord, outcome: AttemptOutcome): StageDecision {
  const { stage } = run;
  record.completedAt = now();
  const decision = decideAfterAttempt({
    attempt: record.attempt,
    budget: stage.retryBudget,
    policy: stage.reviewPolicy,
    outcome,
  });
  recordVerdictEvents(run, record, outcome, decision);
  return decision;
}

/** The decisions that end the stage at once. */
function settleDecided(
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
function announceRetry(run: StageRun, decision: Extract<StageDecision, { action: 'retry' }>): void {
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
function beginRetry(run: StageRun, decision: Extract<StageDecision, { action: 'retry' }>): void {
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

/** A stage activity's result without what the workflow takes out of it (model calls, the attempt log). */
type StageActivityOutput = Omit<StageActivityResult, 'calls' | 'previousLog'>;

/** Where a stage's attempt log stands: its blob reference and how many attempts it holds. */
interface AttemptLog {
  ref: string | null;
  count: number;
}

/** The earlier attempts of this one, as activities receive them: the log plus the compact records after it. */
function previousOf(attempts: AttemptRecord[], log: AttemptLog, attempt: number): PreviousAttempts {
  return { log: log.ref, recent: attempts.slice(log.count, attempt - 1).map(compactAttempt) };
}

/**
 * What one attempt does: `execute` starts the stage's work (its activity, or a stage kind's run), and
 * `afterExecuted` records what it produced and has the gate judge it when there is one.
 */
function prepareAttempt(
  run: StageRun,
  record: AttemptRecord,
  log: AttemptLog,
  feedback: QualityFeedback | null,
): {
  execute: () => Promise<StageActivityResult>;
  afterExecuted: (executed: StageActivityResult) => AttemptOutcome | Promise<AttemptOutcome>;
  workBeforeEventDriven: () => Promise<AttemptOutcome>;
} {
  const { stage, state } = run;
  const attempts = state.stages[stage.name]!.attempts;
  const previousAttempts = previousOf(attempts, log, record.attempt);
  const base = {
    itemId: run.itemId,
    ...(state.correlationId !== undefined ? { correlationId: state.correlationId } : {}),
    pipeline: run.spec.name,
    stage: stage.name,
    attempt: record.attempt,
    maxAttempts: stage.retryBudget.maxAttempts,
    input: run.input,
    upstream: upstreamArtefacts(stage, state),
    previousAttempts,
    ...(stage.with !== undefined ? { config: stage.with } : {}),
  };
  const agent = stage.agent !== undefined ? { agent: stage.agent } : {};
  // Not async: the usual path hands back the activity's own promise (every workflow promise costs, see BENCHMARKS.md).
  const execute = (): Promise<StageActivityResult> =>
    stage.run === TDD_STAGE
      ? runTddTree(run, record.attempt)
      : stage.run === APPROVAL_STAGE
        ? runApprovalStage(kindRun)
        : stage.run === FAN_OUT_STAGE
          ? run.fanOut(kindRun)
          : stage.run === LOOP_STAGE
            ? runLoopStage(kindRun, run.spec.stages.indexOf(stage))
            : stageActivity(stage, record.attempt)({ ...base, ...agent, feedback } satisfies StageActivityInput);
  const kindRun: StageKindRun = {
    itemId: run.itemId,
    pipeline: run.spec.name,
    stage,
    attempt: record.attempt,
    input: run.input,
    upstream: base.upstream,
    state,
    emit: run.emit,
    touch: run.touch,
    feedback,
  };
  // Seed 000's FanOut outcome: the stage's artefact names the elements and the stage each one runs.
  const fansOut = (executed: StageActivityResult): boolean =>
    executed.outcome === 'fan_out' && stage.run !== FAN_OUT_STAGE;
  // Records what the attempt produced; the outcome, unless a gate has yet to judge it (null).
  const recordOutput = (output: StageActivityOutput): AttemptOutcome | null => {
    if (output.artefact !== undefined) record.artefact = output.artefact;
    if (output.summary !== undefined) record.outputSummary = output.summary;
    if (output.rejection) {
      // The stage judged its own output unusable (e.g. a reply that broke the schema): a rejected attempt.
      record.verdict = { kind: 'rejected', feedback: output.rejection };
      return { kind: 'output', output, verdict: record.verdict };
    }
    if (!stage.gate || output.outcome !== 'completed') return { kind: 'output', output, verdict: null };
    return null;
  };
  // Before engine 4 only activities reported calls; a stage kind's totals are ignored for older items.
  const reportsCalls = run.callBatches || !STAGE_KINDS.has(stage.run);
  const takeCalls = ({ calls, previousLog, ...output }: StageActivityResult): StageActivityOutput => {
    if (reportsCalls) keepCalls(record, calls);
    if (typeof previousLog === 'string') Object.assign(log, { ref: previousLog, count: record.attempt - 1 });
    return output;
  };
  const judgeOutput = (output: StageActivityOutput): Promise<QualityVerdict> => {
    const { config: _stageConfig, previousAttempts: _before, ...rest } = base;
    const shared = { ...rest, previousAttempts: previousOf(attempts, log, record.attempt) };
    const judge = (gate: { run: string; with?: Json }) =>
      gateActivity(
        stage,
        gate.run,
        record.attempt,
      )({
        ...shared,
        ...agent,
        ...(gate.with !== undefined ? { config: gate.with } : {}),
        output,
      } satisfies GateActivityInput);
    return evaluateGate(run, stage.gate!, judge, record);
  };
  const judged = (output: StageActivityOutput, verdict: QualityVerdict): AttemptOutcome => {
    record.verdict = verdict;
    return { kind: 'output', output, verdict };
  };
  // Every promise a workflow makes costs (BENCHMARKS.md): a gate or a fan-out adds its own `then`.
  const afterExecuted = (executed: StageActivityResult): AttemptOutcome | Promise<AttemptOutcome> => {
    const afterOutput = (output: StageActivityOutput): AttemptOutcome | Promise<AttemptOutcome> =>
      recordOutput(output) ?? judgeOutput(output).then((verdict) => judged(output, verdict));
    if (!fansOut(executed)) return afterOutput(takeCalls(executed));
    if (!run.callBatches)
      return run
        .fanOut(kindRun, executed.artefact)
        .then(({ calls: _elements, ...fanned }) =>
          afterOutput(takeCalls({ ...fanned, ...(executed.calls ? { calls: executed.calls } : {}) })),
        );
    // The stage's own calls count even if its fan-out fails; the elements' come with the fan-out's result.
    const { calls: own, ...stageOutput } = executed;
    keepCalls(record, own);
    return run.fanOut(kindRun, stageOutput.artefact).then((fanned) => afterOutput(takeCalls(fanned)));
  };
  // Before the event-driven scheduler an attempt was an async function with awaits, kept as it was so
  // histories recorded before it replay.
  const workBeforeEventDriven = async (): Promise<AttemptOutcome> => {
    const executed = await execute();
    const output = takeCalls(
      fansOut(executed) ? { ...(await run.fanOut(kindRun, executed.artefact)), calls: executed.calls } : executed,
    );
    const outcome = recordOutput(output);
    if (outcome !== null) return outcome;
    return judged(output, await judgeOutput(output));
  };
  return { execute, afterExecuted, workBeforeEventDriven };
}

/**
 * One attempt for {@link runStage} (engines 1 and 2): execute, then judge, inside the attempt timeout when
 * the budget sets one. Not itself async: without a timeout it hands back the work's own promise.
 */
function runAttempt(
  run: StageRun,
  record: AttemptRecord,
  log: AttemptLog,
  feedback: QualityFeedback | null,
): Promise<AttemptOutcome> {
  const { stage } = run;
  const { execute, afterExecuted, workBeforeEventDriven } = prepareAttempt(run, record, log, feedback);
  const work = run.eventDriven ? (): Promise<AttemptOutcome> => execute().then(afterExecuted) : workBeforeEventDriven;
  const timeoutMs = stage.retryBudget.attemptTimeoutMs;
  if (timeoutMs === null) return work();
  return withAttemptTimeout(run, record, log, timeoutMs, work);
}

/** CancellationScope.withTimeout, but with a timer the Web UI can name; a timeout is an outcome, not an error. */
async function withAttemptTimeout(
  run: StageRun,
  record: AttemptRecord,
  log: AttemptLog,
  timeoutMs: number,
  work: () => Promise<AttemptOutcome>,
): Promise<AttemptOutcome> {
  const { stage } = run;
  const attemptScope = new CancellationScope();
  let timedOut = false;
  try {
    const outcome = await attemptScope.run(async () => {
      const timerScope = new CancellationScope();
      const summary = `${stage.name} · attempt ${record.attempt} timeout`;
      void timerScope
        .run(() => sleep(timeoutMs, { summary }))
        .then(
          () => {
            timedOut = true;
            attemptScope.cancel();
          },
          () => undefined, // the attempt finished first and cancelled its timer
        );
      try {
        return await work();
      } finally {
        if (!timerScope.consideredCancelled) timerScope.cancel();
      }
    });
    // The timer fired but the work finished before its cancellation reached it: the attempt still ran past
    // its timeout, as a gated stage's would (its gate is cancelled). Its output stays on the record.
    if (timedOut && !CancellationScope.current().consideredCancelled) {
      record.timedOut = true;
      return { kind: 'timed_out', afterMs: timeoutMs };
    }
    return outcome;
  } catch (error) {
    // Once the timer fired, whatever ended the attempt (its cancellation, or a worker that died while it was
    // being cancelled and so a heartbeat timeout) is the timeout, unless the item itself was cancelled.
    if (timedOut && !CancellationScope.current().consideredCancelled) {
      record.timedOut = true;
      keepCalls(record, callsOfFailure(run, error));
      const previousLog = failureDetails(error, false)?.previousLog;
      if (typeof previousLog === 'string') Object.assign(log, { ref: previousLog, count: record.attempt - 1 });
      return { kind: 'timed_out', afterMs: timeoutMs };
    }
    throw error;
  }
}

function activityOptions(stage: StageSpec, attempt: number, what: string) {
  const { activity } = stage;
  return {
    startToCloseTimeout: activity.startToCloseTimeoutMs,
    heartbeatTimeout: activity.heartbeatTimeoutMs,
    retry: retryPolicyOf(activity),
    summary: `${stage.name} · ${what}attempt ${attempt}/${stage.retryBudget.maxAttempts}`,
    // A timed-out attempt ends only once its activity has stopped: attempts of a stage never overlap (one
    // conversation, one working directory), and the calls it made come back with the cancellation.
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
  };
}

/**
 * A `tdd` stage's attempt: the TDD tree as a child workflow (its own history and Web UI page, under this
 * item), its root's `MergeComplete` as the artefact, by reference. A tree that fails fails the attempt.
 */
async function runTddTree(run: StageRun, attempt: number): Promise<StageActivityResult> {
  const treeId = `${workflowInfo().workflowId}.${run.stage.name}.${attempt}`;
  const input = await tddPrepare({ config: run.stage.with ?? null, treeId });
  const result = await executeChild(tddNode, { workflowId: treeId, args: [input] });
  // The tree's model calls count for the item (usage, token budget) either way: their totals, as a batch without records.
  if (result.status !== 'merged' || !result.mergeRef)
    throw failureWithUsage(`TDD tree ${treeId} failed: ${result.error ?? 'no merge'}`, 'TddTreeFailed', result.usage);
  const summary = truncateText(
    `${result.nodePath} merged as ${result.mergeCommit?.slice(0, 10) ?? '?'} into ${input.mergeInto}`,
  );
  return {
    outcome: 'completed',
    artefact: { ref: result.mergeRef, bytes: result.mergeBytes ?? 0, mediaType: 'application/json', summary },
    summary,
    previousLog: null,
    ...usageBatch(result.usage),
  };
}

function stageActivity(stage: StageSpec, attempt: number): (input: StageActivityInput) => Promise<StageActivityResult> {
  const acts = proxyActivities<Record<string, (input: StageActivityInput) => Promise<StageActivityResult>>>(
    activityOptions(stage, attempt, ''),
  );
  return acts[stage.run]!;
}

function gateActivity(
  stage: StageSpec,
  gate: string,
  attempt: number,
): (input: GateActivityInput) => Promise<GateActivityResult> {
  const composed = gateLeaves(stage.gate).length > 1;
  const acts = proxyActivities<Record<string, (input: GateActivityInput) => Promise<GateActivityResult>>>(
    activityOptions(stage, attempt, composed ? `gate ${gate} · ` : 'gate · '),
  );
  return acts[gateActivityType(gate)]!;
}

/** Evaluates a gate, composed ones by running their gates in parallel and combining the verdicts. */
async function evaluateGate(
  run: StageRun,
  gate: GateRef,
  judge: (leaf: { run: string; with?: Json }) => Promise<GateActivityResult>,
  record: AttemptRecord,
): Promise<QualityVerdict> {
  if ('run' in gate) {
    const { calls, ...verdict } = await judge(gate);
    keepCalls(record, calls);
    return verdict as QualityVerdict;
  }
  const mode = 'all' in gate ? 'all' : 'any';
  const parts = 'all' in gate ? gate.all : gate.any;
  // Every gate settles before the attempt ends, so a cancelled or failed gate never leaves a sibling running
  // into the next attempt, and every gate's calls reach the log.
  const settled = await Promise.allSettled(
    parts.map(async (part) => ({ gate: describeGate(part), verdict: await evaluateGate(run, part, judge, record) })),
  );
  const verdicts: { gate: string; verdict: QualityVerdict }[] = [];
  let failure: { error: unknown } | undefined;
  for (const result of settled) {
    if (result.status === 'fulfilled') verdicts.push(result.value);
    // The error rethrown carries its calls to whoever catches it; the other failures' calls are logged here.
    else if (failure) keepCalls(record, callsOfFailure(run, result.reason));
    else failure = { error: result.reason };
  }
  if (failure) throw failure.error;
  return combineVerdicts(mode, verdicts);
}

function describeGate(gate: GateRef): string {
  if ('run' in gate) return gate.run;
  return 'all' in gate
    ? `all(${gate.all.map(describeGate).join(', ')})`
    : `any(${gate.any.map(describeGate).join(', ')})`;
}

/** The calls a failure reports ({@link callsReported}); before engine 4, only an activity's failure details. */
function callsOfFailure(run: StageRun, error: unknown): unknown {
  return run.callBatches ? callsReported(error) : failureDetails(error, false)?.calls;
}

/** Stages run by workflow code (child workflows, requests) rather than by one activity. */
const STAGE_KINDS: ReadonlySet<string> = new Set([TDD_STAGE, LOOP_STAGE, FAN_OUT_STAGE, APPROVAL_STAGE]);

/** Whether the token budget applies to a stage: it or a gate calls models; TDD trees and loops do too (engine 4 on). */
function usesAgent(stage: StageSpec, agentBacked: Set<string>, kindsCallModels: boolean): boolean {
  if (kindsCallModels && (stage.run === TDD_STAGE || stage.run === LOOP_STAGE)) return true;
  return agentBacked.has(stage.run) || gateLeaves(stage.gate).some((g) => agentBacked.has(gateActivityType(g.run)));
}

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
 * `resume` only when approval lifts a spent token budget: the stage then carries on with its attempts.
 */
async function review(
  run: StageRun,
  decision: Extract<StageDecision, { action: 'review' }>,
): Promise<'settled' | 'resume'> {
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
  };
  if (stage.reviewTtlMs !== null) pending.expiresAt = new Date(Date.now() + stage.reviewTtlMs).toISOString();
  state.pendingReviews.push(pending);
  st.status = 'waiting_review';
  emit('ReviewRequested', `${stage.name} waits for review: ${decision.message}`, {
    stage: stage.name,
    attempt,
    details: { reason: decision.reason },
  });
  run.touch();

  const arrived = () => run.resolutions.has(stage.name);
  if (stage.reviewTtlMs === null) await condition(arrived);
  else await condition(arrived, stage.reviewTtlMs, { summary: `${stage.name} · review TTL` });
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
  const outcome = decided.decision;
  if (outcome.action === 'resume') return 'resume';
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

function settled(
  run: StageRun,
  status: 'completed' | 'failed' | 'skipped',
  message: string,
  extra: Partial<StageState> = {},
): 'settled' {
  settle(run, status, message, extra);
  return 'settled';
}

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

function upstreamArtefacts(stage: StageSpec, state: WorkItemState): Record<string, Artefact> {
  const out: Record<string, Artefact> = {};
  // A contract's final list stands in for its producer's artefact (seed 002).
  const validated = state.stages[stage.name]?.validatedInputs;
  for (const dep of stage.dependsOn) {
    const artefact = validated?.[dep] ?? state.stages[dep]?.artefact;
    if (artefact !== undefined) out[dep] = artefact;
  }
  return out;
}

/** A Markdown summary for the Web UI's "current details". */
function renderDetails(state: WorkItemState): string {
  const entries = Object.entries(state.stages);
  // Wide pipelines: the stages in motion first, then the rest, at most DETAIL_ROWS rows and a count.
  const order = (s: StageState): number =>
    s.status === 'waiting_review' ? 0 : s.status === 'running' ? 1 : s.status === 'failed' ? 2 : 3;
  const shown =
    entries.length > DETAIL_ROWS
      ? entries
          .slice()
          .sort((a, b) => order(a[1]) - order(b[1]))
          .slice(0, DETAIL_ROWS)
      : entries;
  const rows = shown.map(([name, s]) => {
    const last = s.attempts[s.attempts.length - 1];
    const verdict = last?.verdict ? last.verdict.kind : last?.timedOut ? 'timed out' : '';
    // Seed 003's words: a stage on its second or later attempt is retrying; a fan-out shows its progress.
    const status = s.status === 'running' && s.attempts.length > 1 ? 'retrying' : s.status;
    const progress = s.fanOut ? ` (${s.fanOut.completed + s.fanOut.failed}/${s.fanOut.total} elements)` : '';
    return `| ${name} | ${status}${progress} | ${s.attempts.length} | ${verdict} |`;
  });
  if (entries.length > shown.length) {
    const counts = new Map<string, number>();
    for (const [, s] of entries) counts.set(s.status, (counts.get(s.status) ?? 0) + 1);
    rows.push(
      `| … ${entries.length - shown.length} more | ${[...counts].map(([k, n]) => `${n} ${k}`).join(', ')} | | |`,
    );
  }
  const reviews = state.pendingReviews.slice(0, DETAIL_ROWS).map((r) => `- **${r.stage}**: ${r.message}`);
  const approvals = (state.approvals ?? []).filter((r) => r.status === 'pending');
  const approvalLines = approvals
    .slice(0, DETAIL_ROWS)
    .map(
      (r) =>
        `- \`${r.id}\` **${r.step}** ${r.actionType}: ${r.summary}${r.escalated ? ` (escalated to ${r.reviewers})` : ''}`,
    );
  if (approvals.length > DETAIL_ROWS) approvalLines.push(`- … ${approvals.length - DETAIL_ROWS} more`);
  // Seed 002's quality_flags of the stages whose input a contract validated.
  const flags = entries
    .filter(([, s]) => s.qualityFlags)
    .slice(0, DETAIL_ROWS)
    .map(
      ([name, s]) =>
        `- **${name}**: ${s.qualityFlags!.items_produced} items produced, ${s.qualityFlags!.validation_rejections} rejections, ${s.qualityFlags!.validation_retries} retries`,
    );
  return [
    `**${state.pipeline}** · ${state.status}`,
    '',
    '| stage | status | attempts | last verdict |',
    '|---|---|---|---|',
    ...rows,
    ...(reviews.length ? ['', 'Waiting for review:', ...reviews] : []),
    ...(approvalLines.length ? ['', 'Waiting for approval (treadle approve <id>):', ...approvalLines] : []),
    ...(flags.length ? ['', 'Input validation (quality_flags):', ...flags] : []),
  ].join('\n');
}

function readName(pipeline: unknown): string {
  return typeof pipeline === 'object' && pipeline !== null && typeof (pipeline as { name?: unknown }).name === 'string'
    ? (pipeline as { name: string }).name
    : '(unnamed)';
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

/** What the `state` query answers: everything but the event stream, of which one page. */
function pageOfState(state: WorkItemState, args: StateQueryArgs | undefined): WorkItemState {
  return { ...state, events: eventPage(state.events, args), usage: summarizeUsage(state.stages) };
}

/** Approval requests kept in the memo for listings; the `state` query has them all. */
const MEMO_APPROVALS = 50;

/** The pending approval requests for listings (payloads and results left out), or null when none waits. */
function approvalsMemoOf(state: WorkItemState): ApprovalsMemo | null {
  const pending = (state.approvals ?? []).filter((r) => r.status === 'pending');
  if (pending.length === 0) return null;
  return {
    pipeline: state.pipeline,
    requests: pending.slice(0, MEMO_APPROVALS).map(({ payload: _payload, result: _result, ...rest }) => rest),
    omitted: Math.max(0, pending.length - MEMO_APPROVALS),
  };
}

/** The pending reviews for listings: the first few, messages short, and how many were left out. */
function reviewsMemo(state: WorkItemState): ReviewsMemo | null {
  if (state.pendingReviews.length === 0) return null;
  const reviews = state.pendingReviews
    .slice(0, MEMO_REVIEWS)
    .map((r) => ({ ...r, message: truncateText(r.message, 200) }));
  return { pipeline: state.pipeline, reviews, omitted: state.pendingReviews.length - reviews.length };
}

/** As many waiting stage names as fit in one search attribute value. */
function attributeStages(stages: string[]): string[] {
  const out: string[] = [];
  let bytes = 2;
  for (const stage of stages) {
    bytes += stage.length + 3;
    if (bytes > PENDING_REVIEWS_ATTRIBUTE_BYTES) break;
    out.push(stage);
  }
  return out;
}

/** The stage a rejected review payload named, if it named one. */
function stageOf(payload: unknown): { stage?: string } {
  const stage = typeof payload === 'object' && payload !== null ? (payload as { stage?: unknown }).stage : undefined;
  return typeof stage === 'string' ? { stage: truncateText(stage, 100) } : {};
}

/** A rejected review payload described by its shape: outcome kind and size, never its content. */
function describePayload(payload: unknown): Record<string, Json> {
  const outcome =
    typeof payload === 'object' && payload !== null ? (payload as { outcome?: { kind?: unknown } }).outcome : undefined;
  const kind = typeof outcome?.kind === 'string' ? truncateText(outcome.kind, 40) : null;
  let bytes = 0;
  try {
    bytes = JSON.stringify(payload ?? null).length;
  } catch {
    bytes = -1;
  }
  return { outcomeKind: kind, payloadBytes: bytes };
}

/**
 * An earlier attempt as the next activities receive it: no calls, and a rejected verdict's feedback only
 * once (in `feedback`; the activity puts it back into the verdict).
 */
function compactAttempt({
  calls: _calls,
  usage: _usage,
  storedCalls: _stored,
  ...record
}: AttemptRecord): AttemptRecord {
  if (record.verdict?.kind === 'rejected' && record.feedback)
    return { ...record, verdict: { kind: 'rejected', feedback: { summary: '', failedCriteria: [] } } };
  return record;
}
