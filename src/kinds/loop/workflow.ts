/**
 * The `loopStage` workflow: one loop stage of seed 004 ("Loop Architecture v3"), a child of its work item.
 * Each iteration is one activity (`treadle.loopIteration`, named `<stage> · iteration N` in the Web UI) that
 * runs a fresh agent on the session's files; the workflow only counts, asks the pure termination rules
 * (`kinds/loop/termination.ts`) before and after each iteration, and does what they say.
 *
 * - Fail fast, resume smart: an iteration that fails (agent crash, missing or malformed `status.json`,
 *   `decision: error`, reported errors) stops the loop at once. The seed's failure state goes to
 *   `state.json` and the `loopState` query, and the loop waits, durably and at no cost, for `treadle resume`
 *   (the `resumeLoop` update): resume reruns that iteration with the history and progress kept; abandon
 *   fails the stage. Nothing is retried blindly: only infrastructure failures are Temporal's to retry.
 * - Long loops continue as new every `iterations_per_run` iterations, or sooner when Temporal suggests it,
 *   carrying the counts (iteration, consecutive stops, decisions) and the last few iteration records; the
 *   history holds summaries and references only, whatever the files hold.
 */
import {
  allHandlersFinished,
  ApplicationFailure,
  condition,
  continueAsNew,
  isCancellation,
  patched,
  TemporalFailure,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import {
  afterIteration,
  beforeIteration,
  countStops,
  limitsOf,
  remainingSeconds,
  settleAtLimit,
  type LoopVerdict,
  type QueueReading,
} from './termination';
import {
  LOOP_CHECK_QUEUE_ACTIVITY,
  LOOP_ITERATION_ACTIVITY,
  LOOP_WRITE_STATE_ACTIVITY,
} from '../../model/activity-types';
import { STEP_HEARTBEAT_TIMEOUT } from '../../model/limits';
import { addTotals } from '../../engine/usage';
import type { PendingReview } from '../../model/state';
import { failedLoopReview, loopAnnouncer, noteProblem } from './failure';
import { describeFailure, failureWithUsage, now, usageReported } from '../../workflow-kit/common';
import {
  iterationDir,
  KEPT_ITERATIONS,
  type LoopCarry,
  type LoopIterationInput,
  type LoopIterationResult,
  type LoopResult,
  type LoopStageInput,
  type LoopState,
  type LoopWriteStateInput,
} from './shapes';
import {
  REVIEWS_MEMO_KEY,
  TreadleDecisionAt,
  TreadlePendingReviews,
  TreadlePipeline,
  TreadleStatus,
} from '../../model/search-attributes';
import { loopQueueSignal, loopStateQuery, resumeLoopUpdate } from './messages';
import { Publications, pendingDecisionSet, reviewsMemo } from '../../workflow-kit/publishing';

/** The listing's pipeline name for loop stages. */
export const LOOP_PIPELINE_NAME = 'loop';

/** The patch after which a cancelled loop publishes `cancelled` (docs/versioning.md), not the status it had. */
export const LOOP_CANCELLED_PATCH = 'loop-cancelled-status';

const housekeeping = proxyActivities<{
  [LOOP_CHECK_QUEUE_ACTIVITY]: (input: { planRef: string }) => Promise<QueueReading>;
  [LOOP_WRITE_STATE_ACTIVITY]: (input: LoopWriteStateInput) => Promise<void>;
}>({ startToCloseTimeout: '3m', heartbeatTimeout: STEP_HEARTBEAT_TIMEOUT, retry: { maximumAttempts: 5 } });

/** Runs one loop stage; see the module comment. */
export async function loopStage(input: LoopStageInput): Promise<LoopResult> {
  const run = new LoopRun(input);
  // Before the first await, so no message is dropped.
  run.registerHandlers();
  return run.run();
}

/** One run of a loop stage (up to its next continue-as-new): its state, its handlers and its iterations. */
class LoopRun {
  private readonly plan: LoopStageInput['plan'];
  /** Iterations on disk before this loop (an earlier attempt's): numbers continue after them. */
  private readonly base: number;
  /** What travels across continue-as-new. */
  private readonly carry: LoopCarry;
  private readonly state: LoopState;
  private readonly published = new Publications();
  private resumeRequest: { action: 'resume' | 'abandon'; reason?: string; by?: string; note?: string } | undefined;
  /** The failure listed like a review while the loop waits (with `publishesDecisions`). */
  private pendingFailure: PendingReview | undefined;

  constructor(private readonly input: LoopStageInput) {
    const { plan } = input;
    this.plan = plan;
    this.base = plan.startIteration ?? 0;
    const carry: LoopCarry = input.carry ?? {
      iteration: 0,
      consecutiveStops: 0,
      startedAtMs: Date.now(),
      recent: [],
      decisions: { continue: 0, stop: 0, error: 0 },
      runs: 0,
      verifyFailures: 0,
    };
    carry.runs++;
    this.carry = carry;
    this.state = {
      itemId: input.itemId,
      stage: input.stage,
      session: plan.session,
      status: 'running',
      iteration: this.base + carry.iteration,
      maxIterations: this.base + plan.maxIterations,
      termination: plan.termination,
      consecutiveStops: carry.consecutiveStops,
      decisions: carry.decisions,
      recent: carry.recent,
      runs: carry.runs,
      ...(carry.queuePending !== undefined ? { queuePending: carry.queuePending } : {}),
      paths: { session_dir: plan.sessionDir, stage_dir: `${plan.sessionDir}/${plan.stageDir}`, output: plan.output },
    };
  }

  /** The `loopState` query, the `resumeLoop` update and the queue signal. */
  registerHandlers(): void {
    const { input, carry, state, base } = this;
    setHandler(loopStateQuery, () => state);
    setHandler(
      resumeLoopUpdate,
      (request) => {
        this.resumeRequest = {
          action: request.action ?? 'resume',
          ...(request.reason !== undefined ? { reason: request.reason } : {}),
          ...(typeof request.by === 'string' ? { by: request.by } : {}),
          ...(typeof request.note === 'string' ? { note: request.note } : {}),
        };
        return {
          resumed: this.resumeRequest.action === 'resume',
          from: carry.failure?.resume_from ?? base + carry.iteration + 1,
        };
      },
      {
        validator: (request) => {
          if (request === null || typeof request !== 'object')
            throw new Error('a resume request is an object: { "action": "resume" | "abandon", "reason"?: string }');
          if (request.action !== undefined && request.action !== 'resume' && request.action !== 'abandon')
            throw new Error(`action must be "resume" or "abandon", not ${JSON.stringify(request.action)}`);
          if (request.by !== undefined && (typeof request.by !== 'string' || request.by.trim() === ''))
            throw new Error(`by must name who decides (a non-empty string), not ${JSON.stringify(request.by)}`);
          const note = noteProblem(request);
          if (note) throw new Error(note);
          if (!carry.failure || this.resumeRequest !== undefined)
            throw new Error(
              `loop stage ${input.stage} of ${input.itemId} is not failed (it is ${state.status}, at iteration ${carry.iteration}); only a failed loop can be resumed`,
            );
        },
      },
    );
    setHandler(loopQueueSignal, (report) => {
      if (report && Number.isInteger(report.pending) && report.pending >= 0) carry.queuePending = report.pending;
    });
  }

  /** The state from the carry; the status upserted when it changed; the Web UI details. */
  private publish(): void {
    const { state, carry } = this;
    state.iteration = this.base + carry.iteration;
    state.consecutiveStops = carry.consecutiveStops;
    if (carry.queuePending !== undefined) state.queuePending = carry.queuePending;
    if (carry.failure) state.failure = carry.failure;
    else delete state.failure;
    if (carry.lastResume) state.lastResume = carry.lastResume;
    const first = !this.published.has(STATUS);
    const failure = this.pendingFailure;
    // Only flagged loops list their failure: an attribute added to the upsert is a changed command.
    const decisionsChanged =
      this.input.publishesDecisions === true &&
      this.published.decisionsChanged(DECISIONS, pendingDecisionSet(failure ? [failure] : []));
    const statusChanged = this.published.changed(STATUS, state.status);
    if (statusChanged || decisionsChanged)
      upsertSearchAttributes([
        ...(first ? [{ key: TreadlePipeline, value: LOOP_PIPELINE_NAME }] : []),
        { key: TreadleStatus, value: state.status },
        ...(decisionsChanged
          ? [
              { key: TreadlePendingReviews, value: failure ? [failure.stage] : null },
              { key: TreadleDecisionAt, value: new Date() },
            ]
          : []),
      ]);
    if (this.input.publishesDecisions === true)
      this.published.memo(REVIEWS_MEMO_KEY, reviewsMemo(this.input.pipeline, failure ? [failure] : []), true);
    setCurrentDetails(renderDetails(state));
  }

  /** Writes the seed's `state.json` through an activity. */
  private writeState(fields: Omit<LoopWriteStateInput, 'planRef' | 'iteration'>): Promise<void> {
    const { input, base, carry } = this;
    return housekeeping[LOOP_WRITE_STATE_ACTIVITY]({
      planRef: input.planRef,
      iteration: base + carry.iteration,
      ...fields,
    });
  }

  private limits() {
    const { plan, carry } = this;
    return limitsOf(
      plan.termination,
      plan.maxIterations,
      carry.startedAtMs + plan.maxRuntimeSeconds * 1000,
      plan.pipelineDeadlineMs,
    );
  }

  /** Iterates until the termination rules stop the loop (or it continues as new), then reports how it ended. */
  async run(): Promise<LoopResult> {
    const { input, plan, carry, state, base } = this;
    this.publish();
    if (carry.runs === 1) await this.writeState({ status: 'running' });
    let iterationsThisRun = 0;
    let verdict: LoopVerdict;
    try {
      for (;;) {
        verdict = beforeIteration(plan.termination, carry, this.limits(), Date.now(), await this.readQueue());
        if (verdict.next === 'stop') break;
        if (iterationsThisRun >= plan.iterationsPerRun || workflowInfo().continueAsNewSuggested) {
          await condition(allHandlersFinished);
          return continueAsNew<typeof loopStage>({ ...input, carry });
        }
        if (carry.iteration > 0 && plan.delaySeconds > 0) await sleep(plan.delaySeconds * 1000);
        const n = carry.iteration + 1;
        carry.iterationRuns = (carry.iterationRuns ?? 0) + 1;
        const result = await iterationActivity(
          plan,
          input.stage,
          base + n,
        )({
          planRef: input.planRef,
          iteration: base + n,
          run: base + carry.iterationRuns,
          remainingSeconds: remainingSeconds(this.limits(), Date.now()),
          ...(input.correlationId !== undefined ? { correlationId: input.correlationId } : {}),
          ...this.resumeNote(base + n),
        });
        iterationsThisRun++;
        if (result.usage) carry.usage = addTotals(carry.usage, result.usage);
        if (!result.ok) {
          await this.failedIteration(base + n, result.error, result.progressRef);
          continue;
        }
        verdict = this.recordIteration(n, result);
        // A queue loop at its last allowed iteration: asked once more, an empty queue is why it ends.
        if (
          verdict.next === 'stop' &&
          verdict.by === 'guardrail' &&
          plan.termination.type === 'queue' &&
          carry.iteration >= plan.maxIterations
        ) {
          verdict = settleAtLimit(verdict, plan.termination, carry, await this.readQueue());
        }
        if (verdict.next === 'stop') break;
      }
    } catch (error) {
      if (isCancellation(error) && patched(LOOP_CANCELLED_PATCH)) {
        // Said where listings look; a failure it waited with is no longer pending, so it leaves them.
        state.status = 'cancelled';
        this.pendingFailure = undefined;
        this.publish();
      }
      // An abandoned loop already says why; a continue-as-new or a cancellation is not a failure; an error that
      // is no Temporal failure (a bug in workflow code) fails the workflow task, which Temporal retries until a
      // fixed worker runs it. Any other (an iteration that failed for good: its worker lost three times, a full
      // disk) fails the loop with its calls so far in the details, as an abandoned loop does, so that the work
      // item still counts them.
      if (
        isCancellation(error) ||
        !(error instanceof TemporalFailure) ||
        (error instanceof ApplicationFailure && error.type === 'LoopFailed')
      )
        throw error;
      throw failureWithUsage(describeFailure(error), 'LoopFailed', addTotals(carry.usage, usageReported(error)), error);
    }

    state.status = verdict.by === 'guardrail' ? 'stopped' : 'completed';
    state.stoppedBy = { by: verdict.by, reason: verdict.reason };
    this.publish();
    await this.writeState({ status: state.status, stoppedBy: state.stoppedBy });
    return this.result(state.stoppedBy);
  }

  /**
   * Fail fast: stop now, say why where an agent (or a human) will look, and wait to be resumed; an abandoned
   * loop fails with its calls so far.
   */
  private async failedIteration(
    iteration: number,
    error: Extract<LoopIterationResult, { ok: false }>['error'],
    progressRef: string | undefined,
  ) {
    const { carry, state, input } = this;
    carry.failure = {
      status: 'failed',
      iteration,
      error,
      resume_from: iteration,
      ...(progressRef !== undefined ? { progressRef } : {}),
    };
    state.status = 'failed';
    this.pendingFailure = failedLoopReview(input, iteration, error);
    this.publish();
    await this.writeState({ status: 'failed', failure: carry.failure });
    const pausedAt = Date.now();
    this.resumeRequest = undefined;
    const said = loopAnnouncer(input, this.pendingFailure);
    if (said) await said('decision_owed', `${input.stage}: ${this.pendingFailure.message}`);
    await condition(() => this.resumeRequest !== undefined);
    const request = this.resumeRequest!;
    const by = request.by !== undefined ? { decidedBy: request.by } : {};
    if (said) await said('decided', `${input.stage}: ${request.action}`, { ...by, outcome: request.action });
    carry.lastResume = {
      action: request.action,
      iteration,
      at: now(),
      ...(request.by !== undefined ? { by: request.by } : {}),
      ...(request.reason !== undefined ? { reason: request.reason } : {}),
      ...(request.note !== undefined ? { note: request.note } : {}),
    };
    this.pendingFailure = undefined;
    if (request.action === 'abandon') {
      // A flagged loop's failure leaves the listings before the loop ends.
      if (input.publishesDecisions === true) this.publish();
      // The calls made so far still count for the work item: their totals ride on the failure.
      throw failureWithUsage(
        `loop stage ${input.stage} failed at iteration ${iteration} (${error.type}: ${error.message})${request.reason || request.by ? `; abandoned${request.by ? ` by ${request.by}` : ''}${request.reason ? `: ${request.reason}` : ''}` : ''}`,
        'LoopFailed',
        carry.usage,
      );
    }
    // The time spent failed does not count against the stage's runtime.
    carry.startedAtMs += Date.now() - pausedAt;
    carry.failure = undefined;
    this.resumeRequest = undefined;
    state.status = 'running';
    this.publish();
    const resume =
      request.note !== undefined ? { resume: { note: request.note, ...(request.by ? { by: request.by } : {}) } } : {};
    await this.writeState({ status: 'running', ...resume });
  }

  /** The note of the resume that reruns `iteration`, for that iteration's input; none otherwise. */
  private resumeNote(iteration: number): Pick<LoopIterationInput, 'note' | 'noteBy'> {
    const last = this.carry.lastResume;
    if (last?.action !== 'resume' || last.note === undefined || last.iteration !== iteration) return {};
    return { note: last.note, ...(last.by !== undefined ? { noteBy: last.by } : {}) };
  }

  /** A finished iteration counted and kept (the last few records); what the termination rules say after it. */
  private recordIteration(n: number, result: Extract<LoopIterationResult, { ok: true }>): LoopVerdict {
    const { carry, plan } = this;
    const { ok: _ok, usage: _usage, ...record } = result;
    carry.iteration = n;
    carry.decisions[record.decision]++;
    carry.consecutiveStops = countStops(carry.consecutiveStops, record.decision);
    if (record.verify && !record.verify.passed) carry.verifyFailures++;
    if (record.outputRef !== undefined) {
      carry.lastOutputRef = record.outputRef;
      carry.lastOutputBytes = record.outputBytes;
    }
    carry.recent.push(record);
    if (carry.recent.length > KEPT_ITERATIONS) carry.recent.splice(0, carry.recent.length - KEPT_ITERATIONS);
    this.publish();
    return afterIteration(plan.termination, carry, this.limits());
  }

  /** The loop's result: where its output and snapshots are, how it ended, its model calls. */
  private result(stoppedBy: NonNullable<LoopState['stoppedBy']>): LoopResult {
    const { plan, carry, input, base } = this;
    return {
      session: plan.session,
      stage: input.stage,
      stageDir: plan.stageDir,
      iterations: base + carry.iteration,
      stoppedBy,
      decisions: carry.decisions,
      output: plan.output,
      outputRef: carry.lastOutputRef ?? null,
      outputBytes: carry.lastOutputBytes ?? 0,
      latest: `${plan.stageDir}/output.md`,
      snapshots:
        base + carry.iteration > 0
          ? `${plan.stageDir}/${iterationDir(1)}…${iterationDir(base + carry.iteration).slice('iterations/'.length)}/output.md`
          : '',
      ...(carry.usage ? { usage: carry.usage } : {}),
    };
  }

  /** The queue before an iteration: the command's answer, or the last report of a signal-fed queue (waiting for the first). */
  private async readQueue(): Promise<QueueReading | undefined> {
    const { plan, carry, state } = this;
    if (plan.termination.type !== 'queue') return undefined;
    if (plan.termination.queue?.provider === 'signal') {
      if (carry.queuePending === undefined) {
        state.status = 'waiting_queue';
        this.publish();
        await condition(() => carry.queuePending !== undefined);
        state.status = 'running';
        this.publish();
      }
      return carry.queuePending === 0 ? { kind: 'empty' } : { kind: 'pending', count: carry.queuePending! };
    }
    return housekeeping[LOOP_CHECK_QUEUE_ACTIVITY]({ planRef: this.input.planRef });
  }
}

/** The activity of iteration `n`: an agent at work with its tools, long and heartbeating. */
function iterationActivity(plan: LoopStageInput['plan'], stage: string, n: number) {
  return proxyActivities<{ [LOOP_ITERATION_ACTIVITY]: (i: LoopIterationInput) => Promise<LoopIterationResult> }>({
    // Agent errors come back as results (fail fast); what is thrown is infrastructure (a lost worker, a full
    // disk), which Temporal retries.
    startToCloseTimeout: `${Math.max(60, plan.maxRuntimeSeconds)}s`,
    // A lost worker is noticed within this timeout, and the iteration retried on another.
    heartbeatTimeout: STEP_HEARTBEAT_TIMEOUT,
    retry: { maximumAttempts: 3, nonRetryableErrorTypes: ['InvalidConfig'] },
    summary: `${stage} · iteration ${n}`,
  })[LOOP_ITERATION_ACTIVITY];
}

/** The name under which the status last upserted is kept. */
const STATUS = 'status';
/** The name under which the failure last listed is kept (flagged loops). */
const DECISIONS = 'decisions';

/** A Markdown summary for the Web UI's "current details". */
function renderDetails(state: LoopState): string {
  const t = state.termination;
  const rule =
    t.type === 'judgment'
      ? `judgment (consensus ${t.consensus ?? 2} from iteration ${t.min_iterations ?? 1})`
      : t.type === 'queue'
        ? `queue (${t.queue?.provider ?? 'command'})`
        : 'fixed';
  const lines = [
    `**Loop stage** \`${state.stage}\` · ${state.status} · iteration **${state.iteration}**/${state.maxIterations} · ${rule}`,
    '',
    `Decisions: ${state.decisions.continue} continue, ${state.decisions.stop} stop · consecutive stops ${state.consecutiveStops}${state.queuePending !== undefined ? ` · queue ${state.queuePending}` : ''} · session \`${state.session}\``,
  ];
  if (state.failure)
    lines.push(
      '',
      `**Failed** at iteration ${state.failure.iteration}: ${state.failure.error.type}: ${state.failure.error.message}`,
      `Resume with \`treadle resume ${state.itemId} --stage ${state.stage}\` (from iteration ${state.failure.resume_from}).`,
    );
  if (state.stoppedBy) lines.push('', `Stopped by ${state.stoppedBy.by}: ${state.stoppedBy.reason}`);
  const recent = state.recent.slice(-5);
  if (recent.length > 0)
    lines.push(
      '',
      '| iteration | decision | summary |',
      '|---|---|---|',
      ...recent.map((r) => `| ${r.iteration} | ${r.decision} | ${r.summary.replace(/\|/g, '/').slice(0, 120)} |`),
    );
  return lines.join('\n');
}
