/**
 * One work item's run: its state, its message handlers (reviews, queries, and the kinds' own through the
 * table: approvals, fan-out progress), the scheduler that starts stages as their dependencies settle, and
 * when it publishes (what it publishes, as search attributes, memo and Web UI details, is
 * work-item-publishing.ts). The `workItem` workflow (work-item.ts)
 * is a short shell over this class; each stage runs in the stage runner chosen by the item's engine version.
 */
import {
  ApplicationFailure,
  CancellationScope,
  isCancellation,
  proxyLocalActivities,
  setHandler,
  workflowInfo,
  uuid4,
} from '@temporalio/workflow';
import { allSettled, itemStatus, readyStages, stagesToSkip } from '../engine/dag';
import { checkCancel, describeCancel, recordCancel, type AcceptedCancel } from '../engine/cancel';
import { changesRefusedOnEngine, checkReview, type AcceptedReview } from '../engine/review';
import { summarizeUsage } from '../engine/usage';
import { PREPARE_PIPELINE_ACTIVITY } from '../model/activity-types';
import { truncateText } from '../model/limits';
import { unpackStages } from '../model/packed-stages';
import type { PipelineSpec, StageSpec } from '../model/pipeline';
import type { Artefact, EventType, Json, TreadleEvent } from '../model/shapes';
import {
  WORK_ITEM_FAILED,
  type PreparePipelineInput,
  type PreparePipelineResult,
  type StageState,
  type StateQueryArgs,
  type WorkItemInput,
  type WorkItemResult,
  type WorkItemState,
} from '../model/state';
import { describeFailure, eventPage, failureCarrying, now } from '../workflow-kit/common';
import { fanOutElementInput, fanOutElementOf, installKindHandlers } from '../kinds/workflow-table';
import { engineRules } from './legacy';
import { carryStages } from './fork-carry';
import { cancelItemUpdate, eventsQuery, resolveReviewUpdate, reviewSignal, stateQuery } from '../workflow-kit/messages';
import { EventStream, describePayload, stageOf } from '../workflow-kit/publishing';
import type { EngineRules, Scheduling, StageRun } from './stage-run';
import { LIVE_ENGINE } from './stage-runner';
import { announceQuietly } from '../notify/announce';
import { pageOfState } from './work-item-details';
import { WorkItemPublications } from './work-item-publishing';

// A local activity: it only reads the worker's registry, so it needs no task-queue round trip.
const preparePipeline = proxyLocalActivities<{
  [PREPARE_PIPELINE_ACTIVITY]: (input: PreparePipelineInput) => Promise<PreparePipelineResult>;
}>({
  startToCloseTimeout: '30s',
  retry: { maximumAttempts: 5 },
})[PREPARE_PIPELINE_ACTIVITY];

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

/** A work item's state and handlers; `run` takes it from its start to its result. */
export class WorkItemRun implements Scheduling {
  readonly state: WorkItemState;
  private readonly itemId: string;
  private input: Json;
  private readonly resolutions = new Map<string, AcceptedReview>();
  private readonly events: EventStream;
  private readonly publications = new WorkItemPublications();
  /** The rules of the engine version the item started on, known once the prepare step has answered. */
  private engine: EngineRules = LIVE_ENGINE;
  /** Announce to the notifier (engine 8, and the preparing worker has a notifications file: in history). */
  private notifies = false;
  private spec: PipelineSpec | undefined;
  private stageByName = new Map<string, StageSpec>();
  private agentBacked: ReadonlySet<string> = new Set();
  changed = false;
  cancellation: unknown;
  /**
   * Who asked to cancel the item and why (the `cancelItem` update), kept until Temporal's cancellation arrives:
   * an item that finishes in between never says it was cancelled.
   */
  private cancelRequest: AcceptedCancel | undefined;
  /** The status is final (finished or cancelled): publishing no longer derives it from the stages. */
  private settledStatus = false;
  private passQueued = false;
  /** The event-driven scheduler's pass, installed by {@link runEventDriven} (never on engine 1's loop). */
  private pass: (() => void) | undefined;
  private inPass = false;
  /** Stage runners started and not yet ended: from engine 8 on, a cancelled item closes once they have stopped. */
  private liveRunners = 0;
  private endedInPass = false;
  // One settled promise for the whole run: queueing a pass costs one `then`, not a promise of its own.
  private readonly settledPromise = Promise.resolve();

  constructor(private readonly args: WorkItemInput) {
    const info = workflowInfo();
    this.itemId = args.itemId ?? info.workflowId;
    this.input = args.input ?? null;
    this.state = {
      id: this.itemId,
      pipeline: args.pipelineName ?? readName(args.pipeline),
      // The starter's correlation id (TreadleClient.start makes one and sets the search attribute), else one
      // made here, deterministically (uuid4 is replay-safe), for items started by other means.
      correlationId: args.correlationId ?? uuid4(),
      status: 'running',
      // Stage names are data: a null-prototype record, so "constructor" is a stage like any other.
      stages: Object.create(null) as Record<string, StageState>,
      pendingReviews: [],
      events: [],
      eventCount: 0,
      startedAt: now(),
    };
    this.events = new EventStream(this.state, this.itemId, {
      routine: ROUTINE_EVENTS,
      correlationId: this.state.correlationId!,
    });
  }

  /** Appends an event to the item's stream (and the worker's log unless routine). */
  readonly emit = (type: EventType, message: string, fields?: Partial<TreadleEvent>): void =>
    this.events.emit(type, message, fields);

  /**
   * Something changed (a stage settled, an attempt began, a review arrived): the status, the reviews memo
   * and ready stages are looked at again. One pass is queued after the code running now, so the changes of
   * one activation share a pass and its publish (engine 1's loop sees the flag instead).
   */
  readonly touch = (): void => {
    this.changed = true;
    if (this.pass === undefined || this.passQueued) return;
    this.passQueued = true;
    void this.settledPromise.then(() => this.pass!());
  };

  /**
   * A stage ended: the pass runs at once (its runner has finished, so nothing is left half-done), without a
   * promise; a stage that ends inside a pass makes that pass look again.
   */
  readonly ended = (): void => {
    this.liveRunners--;
    this.changed = true;
    if (this.pass === undefined) return;
    if (this.inPass) this.endedInPass = true;
    else this.pass();
  };

  /**
   * What the runner does when its stage ends by an exception: a cancellation is kept and rethrown, any other
   * error (an engine bug) fails its stage instead of failing workflow tasks forever.
   */
  readonly crashed = (stage: StageSpec, error: unknown): void => {
    const st = this.state.stages[stage.name]!;
    if (isCancellation(error)) this.cancellation ??= error;
    else if (!['completed', 'failed', 'skipped'].includes(st.status)) {
      const message = `internal error in the stage runner: ${describeFailure(error)}`;
      Object.assign(st, { status: 'failed', error: message, completedAt: now() });
      this.emit('StageFailed', `${stage.name} failed: ${message}`, { stage: stage.name });
    }
  };

  /** Registers every message handler; called before the first await, so no message is ever dropped. */
  registerHandlers(): void {
    const { state, itemId } = this;
    setHandler(reviewSignal, (payload) => {
      const checked = this.checkReview(payload);
      if (checked.ok) this.deliver(checked.review);
      // What was wrong, never the payload itself: a rejected 500 KB edit must not live in every query.
      else
        this.emit('ReviewInputRejected', truncateText(checked.error), {
          ...stageOf(payload),
          details: describePayload(payload),
        });
    });
    setHandler(
      resolveReviewUpdate,
      (payload) => {
        const checked = this.checkReview(payload);
        if (!checked.ok) throw ApplicationFailure.nonRetryable(checked.error, 'InvalidReview');
        this.deliver(checked.review);
        const { stage, outcome, reviewer } = checked.review;
        return { itemId, stage, outcome: outcome.kind, reviewer };
      },
      {
        validator: (payload) => {
          const checked = this.checkReview(payload);
          if (!checked.ok) throw new Error(checked.error);
        },
        description: 'Approve, reject or approve-with-edits a stage that is waiting for review.',
      },
    );
    setHandler(
      cancelItemUpdate,
      (request) => {
        const checked = checkCancel(itemId, state.status, request);
        if (!checked.ok) throw ApplicationFailure.nonRetryable(checked.error, 'InvalidCancel');
        this.cancelRequest = checked.cancel;
        return { itemId, ...checked.cancel };
      },
      {
        validator: (request) => {
          const checked = checkCancel(itemId, state.status, request);
          if (!checked.ok) throw new Error(checked.error);
        },
        description:
          'Records who cancels the work item and why ({by, reason}); the caller then requests the cancellation of its run.',
      },
    );
    // The kinds' own (approval decisions, fan-out progress), each limited to the names its row declares.
    installKindHandlers({ state, itemId, emit: this.emit, touch: this.touch }, setHandler);
    setHandler(stateQuery, (args?: StateQueryArgs) => pageOfState(state, args), {
      description:
        'The work item: status, stages, attempts, pending reviews, model usage, and a page of events ({eventsAfter, eventLimit}).',
    });
    setHandler(
      eventsQuery,
      (args?: StateQueryArgs) => ({
        status: state.status,
        eventCount: state.eventCount,
        events: eventPage(state.events, args),
        pendingReviews: state.pendingReviews,
        ...(state.error ? { error: state.error } : {}),
      }),
      { description: 'Status, pending reviews and a page of events ({eventsAfter, eventLimit}), without the stages.' },
    );
  }

  /**
   * {@link checkReview}, and a request for changes refused on items of an engine before reviewer attention
   * (their runners know no retry after a review).
   */
  private checkReview(payload: unknown): ReturnType<typeof checkReview> {
    const checked = checkReview(this.state, payload);
    if (checked.ok && checked.review.outcome.kind === 'request_changes' && !this.engine.reviewerAttention)
      return { ok: false, error: changesRefusedOnEngine(this.itemId, this.engine.version) };
    return checked;
  }

  /** A review accepted by a handler, for its stage's runner to pick up. */
  private deliver(review: AcceptedReview): void {
    // Removing the pending entry here (not when the runner wakes) makes a second review of the same stage
    // in the same activation fail validation instead of overwriting the first.
    this.state.pendingReviews = this.state.pendingReviews.filter((r) => r.stage !== review.stage);
    this.resolutions.set(review.stage, review);
    this.touch();
  }

  /** Runs the item: prepares its pipeline, runs its stages, and returns its result. */
  async run(): Promise<WorkItemResult> {
    const { args, state } = this;
    // A fan-out's element names its place in the stored list; it is read once the spec is prepared.
    const element = fanOutElementOf(args);
    this.emit('ItemStarted', `work item ${this.itemId} started on pipeline ${state.pipeline}`);
    const prepared = await preparePipeline({ pipeline: args.pipeline });
    // The engine version the item started on, recorded with the prepare step, decides the rules from here on.
    this.engine = engineRules(prepared.engine);
    this.notifies = this.engine.reviewerAttention && prepared.notifies === true;
    if (this.engine.trustsStartAttributes) this.publications.assumeStartAttributes(state, this.engine.lineage);
    if (!prepared.ok) {
      state.problems = prepared.problems;
      return this.end(`pipeline ${state.pipeline} is invalid: ${prepared.problems.join('; ')}`);
    }
    // Histories recorded before packed stages carry every stage whole.
    const spec = prepared.packedStages
      ? { ...prepared.spec, stages: unpackStages(prepared.packedStages) }
      : prepared.spec;
    if (element !== undefined) this.input = await fanOutElementInput(element);
    const { tokenBudget } = args;
    if (tokenBudget !== undefined && tokenBudget !== null && !(Number.isInteger(tokenBudget) && tokenBudget > 0)) {
      state.problems = [
        `tokenBudget must be a whole number of tokens above 0 or null, got ${JSON.stringify(tokenBudget)}`,
      ];
      return this.end(`invalid work item: ${state.problems[0]}`);
    }
    state.tokenBudget = tokenBudget !== undefined ? tokenBudget : spec.tokenBudget;
    this.spec = spec;
    this.agentBacked = new Set(prepared.agentBacked);
    for (const stage of spec.stages)
      state.stages[stage.name] = { status: 'pending', attempts: [], maxAttempts: stage.retryBudget.maxAttempts };
    const carryProblems = args.fork !== undefined ? carryStages(state, spec, args.fork, this.emit, this.engine) : [];
    if (carryProblems.length > 0) return this.end(`invalid fork: ${(state.problems = carryProblems).join('; ')}`);
    // Query state only, from the spec already in history: reviewers' tools check edits against it.
    const schemas = spec.stages.filter((stage) => stage.outputSchema !== undefined);
    if (schemas.length > 0) state.outputSchemas = Object.fromEntries(schemas.map((s) => [s.name, s.outputSchema!]));
    this.stageByName = new Map(spec.stages.map((s) => [s.name, s]));
    this.publish();
    try {
      await this.engine.schedule(this);
    } catch (error) {
      if (!isCancellation(error)) throw error;
      this.cancelled();
      throw error;
    }
    return this.end();
  }

  /**
   * Finishes the item; from engine 6 on a failed one fails its workflow, so the Web UI and
   * `ExecutionStatus="Failed"` tell the truth, with its result as the failure's details. A fan-out's element
   * fails only when its fan-out asked: a fan-out begun before engine 6 expects a returned result.
   */
  private end(error?: string): WorkItemResult | Promise<WorkItemResult> {
    const result = this.finish(error);
    // Only an item that announces awaits here: another await would reorder older items' last commands.
    if (result.status === 'failed' && this.notifies)
      return announceQuietly({
        event: 'item_failed',
        key: workflowInfo().workflowId,
        itemId: this.itemId,
        pipeline: this.state.pipeline,
        message: result.error ?? 'work item failed',
      }).then(() => this.outcome(result));
    return this.outcome(result);
  }

  /** The item's result, or from engine 6 on its failure (see {@link end}). */
  private outcome(result: WorkItemResult): WorkItemResult {
    const asked = fanOutElementOf(this.args) === undefined || this.args.failAsWorkflow === true;
    if (result.status === 'completed' || !this.engine.failsWorkflow || !asked) return result;
    throw failureCarrying(WORK_ITEM_FAILED, result.error ?? 'work item failed', result);
  }

  /**
   * The live scheduler: no loop waiting on a `condition` (five promises and one more pass over the
   * workflow's conditions per activation, BENCHMARKS.md); a pass runs when something touched the state, and
   * the run ends when the last stage settles.
   */
  runEventDriven(): Promise<void> {
    const finished = new Promise<void>((resolve, reject) => {
      this.pass = () => {
        // Touches made during the pass (the runners it starts) are covered by its own publish.
        this.passQueued = true;
        this.inPass = true;
        // Engine 8 starts nothing once cancelled, and ends when every runner has stopped (below).
        if (!(this.waitsForRunners() && this.cancellation !== undefined))
          do {
            this.endedInPass = false;
            while (this.startReady());
          } while (this.endedInPass);
        this.publish();
        this.inPass = false;
        this.passQueued = false;
        if (this.cancellation !== undefined) {
          if (!this.waitsForRunners() || this.liveRunners === 0) reject(this.cancellation);
        } else if (allSettled(this.state.stages)) resolve();
      };
      // Cancelled from outside. Before engine 8 the item ends now, and Temporal terminates its children as it
      // closes (their parent-close policy). From engine 8 on, each runner hears the cancellation (its activity
      // through its heartbeats, its child workflow as a cancellation it can record) and the item ends once the
      // last has stopped: its children end cancelled, and nothing of it is left running.
      CancellationScope.current().cancelRequested.catch((error: unknown) => {
        this.cancellation ??= error;
        if (!this.waitsForRunners() || this.liveRunners === 0) reject(error);
      });
    });
    this.pass!();
    return finished;
  }

  /** Whether a cancelled item waits for its stage runners to stop before it ends (engine 8). */
  private waitsForRunners(): boolean {
    return this.engine.reviewerAttention;
  }

  /** Whether every stage has settled. */
  allSettled(): boolean {
    return allSettled(this.state.stages);
  }

  /**
   * Starts what can start (skipping what cannot run any more) and reports whether it skipped anything:
   * skipped stages may make their dependents skippable in turn.
   */
  startReady(): boolean {
    const { state } = this;
    const spec = this.spec!;
    let skipped = false;
    for (const { stage, because } of stagesToSkip(spec, state.stages)) {
      state.stages[stage] = {
        ...state.stages[stage]!,
        status: 'skipped',
        skipReason: 'upstream_failed',
        error: `dependency ${because} did not complete`,
      };
      this.emit('StageSkipped', `${stage} skipped: dependency ${because} did not complete`, { stage });
      skipped = true;
    }
    // At most max_parallel stages run at once, so no width of pipeline floods one activation or passes
    // Temporal's pending-activity limit; the rest start in spec order as others settle.
    let free = spec.maxParallel - Object.values(state.stages).filter((s) => s.status === 'running').length;
    for (const name of free > 0 ? readyStages(spec, state.stages) : []) {
      if (free-- <= 0) break;
      state.stages[name]!.status = 'running';
      this.startStage(this.stageByName.get(name)!);
    }
    return skipped;
  }

  /** Hands a stage to the engine's stage runner, which never fails (it reports through `crashed` and `ended`). */
  private startStage(stage: StageSpec): void {
    const { engine } = this;
    this.liveRunners++;
    engine.runStage({
      stage,
      spec: this.spec!,
      state: this.state,
      input: this.input,
      itemId: this.itemId,
      emit: this.emit,
      touch: this.touch,
      ended: this.ended,
      crashed: this.crashed,
      engine,
      resolutions: this.resolutions,
      usesAgent: engine.usesAgent(stage, this.agentBacked),
      notifies: this.notifies,
    } satisfies StageRun);
  }

  /**
   * Upserts what changed (each upsert is a command and a history event) and refreshes the Web UI details.
   * Called once per activation by the scheduler (and at the end), never per stage: its cost grows with the
   * number of stages.
   */
  publish(): void {
    const { state } = this;
    if (!this.settledStatus) state.status = itemStatus(state.stages);
    this.publications.publish(state, this.engine.publishesDecisions);
  }

  /**
   * Cancelled from outside (`treadle cancel`, `temporal workflow cancel`): recorded where UIs and listings look.
   * From engine 8 on, with who cancelled it and why (the `cancelItem` update, when one came first), and its
   * approval requests still pending end `cancelled` (so they leave the listings; their actions never run).
   */
  private cancelled(): void {
    const { state } = this;
    state.status = 'cancelled';
    this.settledStatus = true;
    state.completedAt = now();
    state.pendingReviews = [];
    // Engines before 8 say only that it was cancelled, and leave its approval requests as they were.
    const request = this.engine.reviewerAttention ? this.cancelRequest : undefined;
    const error = this.engine.reviewerAttention
      ? recordCancel(state, request)
      : (state.error = describeCancel(undefined));
    this.emit('ItemFailed', error, request !== undefined ? { details: { ...request } } : undefined);
    this.publish();
  }

  /** Ends the item: its final status, event and publish, and its result. */
  private finish(error?: string): WorkItemResult {
    const { state } = this;
    state.completedAt = now();
    if (error !== undefined) state.error = error;
    const failedStages = Object.entries(state.stages)
      .filter(([, s]) => s.status === 'failed')
      .map(([name]) => name);
    const failed = error !== undefined || failedStages.length > 0;
    state.status = failed ? 'failed' : 'completed';
    this.settledStatus = true;
    if (failed && state.error === undefined)
      state.error = `stage${failedStages.length > 1 ? 's' : ''} failed: ${failedStages.join(', ')}`;
    this.emit(
      failed ? 'ItemFailed' : 'ItemCompleted',
      failed ? `work item failed: ${state.error}` : 'work item completed',
    );
    this.publish();
    const artefacts: Record<string, Artefact> = Object.create(null) as Record<string, Artefact>;
    for (const [name, s] of Object.entries(state.stages))
      if (s.status === 'completed' && s.artefact !== undefined) artefacts[name] = s.artefact;
    const stageErrors: Record<string, string> = Object.create(null) as Record<string, string>;
    for (const name of failedStages) stageErrors[name] = state.stages[name]!.error ?? 'failed';
    // The item's model calls in total, for a parent that fans out over items like this one.
    const { total } = summarizeUsage(state.stages);
    return {
      id: this.itemId,
      pipeline: state.pipeline,
      status: state.status === 'failed' ? 'failed' : 'completed',
      artefacts,
      failedStages,
      ...(state.error ? { error: state.error } : {}),
      ...(failedStages.length > 0 ? { stageErrors } : {}),
      ...(total.calls > 0 ? { usage: total } : {}),
    };
  }
}

/** The pipeline's name as the spec gives it, before validation. */
function readName(pipeline: unknown): string {
  const name = (pipeline as { name?: unknown } | null | undefined)?.name;
  return typeof name === 'string' ? name : '(unnamed)';
}
