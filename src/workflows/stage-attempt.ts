/**
 * One attempt of a work item's stage: its input (earlier attempts as a stored log plus recent records, the
 * upstream artefacts), its work (the stage's activity, or the run of the stage kind the table names), its gate, and the attempt timeout around both. The stage runner (stage-runner.ts) decides what
 * happens after it.
 */
import { ActivityCancellationType, CancellationScope, proxyActivities, sleep } from '@temporalio/workflow';
import { combineVerdicts } from '../engine/gates';
import { keepCalls } from '../engine/usage';
import type { AttemptOutcome } from '../engine/stage-policy';
import { gateActivityType } from '../model/activity-types';
import { failureDetails, retryPolicyOf, type StageKindRun } from '../workflow-kit/common';
import { gateLeaves, type GateRef } from '../model/gate-ref';
import type { StageSpec } from '../model/pipeline';
import type { Artefact, AttemptRecord, Json, QualityFeedback, QualityVerdict } from '../model/shapes';
import type {
  GateActivityInput,
  GateActivityResult,
  PreviousAttempts,
  StageActivityInput,
  StageActivityResult,
  WorkItemState,
} from '../model/state';
import type { AttemptLog, StageRun } from './stage-run';
import type { WorkflowStageKind } from '../workflow-kit/stage-kind';

/** Whether a stage's implementation or one of its gates is registered as calling models. */
export function agentBackedStage(stage: StageSpec, agentBacked: ReadonlySet<string>): boolean {
  return agentBacked.has(stage.run) || gateLeaves(stage.gate).some((g) => agentBacked.has(gateActivityType(g.run)));
}

/**
 * One attempt's steps, made by {@link prepareAttempt}: `execute` starts the stage's work, `afterExecuted`
 * records what it produced and has the gate judge it; the rest are the pieces of those two that engine 1's
 * attempt (legacy/engine-1-2.ts) puts together in its own order.
 */
export interface PreparedAttempt {
  execute: () => Promise<StageActivityResult>;
  afterExecuted: (executed: StageActivityResult) => AttemptOutcome | Promise<AttemptOutcome>;
  kindRun: StageKindRun;
  /** Seed 000's FanOut outcome: the stage's artefact names the elements and the stage each one runs. */
  fansOut: (executed: StageActivityResult) => boolean;
  /** Keeps the calls that count and the attempt log a result names; what is left is the output. */
  takeCalls: (result: StageActivityResult) => StageActivityOutput;
  /** Records what the attempt produced; the outcome, unless a gate has yet to judge it (null). */
  recordOutput: (output: StageActivityOutput) => AttemptOutcome | null;
  judgeOutput: (output: StageActivityOutput) => Promise<QualityVerdict>;
  judged: (output: StageActivityOutput, verdict: QualityVerdict) => AttemptOutcome;
}

/** A stage activity's result without what the workflow takes out of it (model calls, the attempt log). */
export type StageActivityOutput = Omit<StageActivityResult, 'calls' | 'previousLog'>;

/** The earlier attempts of this one, as activities receive them: the log plus the compact records after it. */
function previousOf(attempts: AttemptRecord[], log: AttemptLog, attempt: number): PreviousAttempts {
  return { log: log.ref, recent: attempts.slice(log.count, attempt - 1).map(compactAttempt) };
}

/**
 * What one attempt does: `execute` starts the stage's work (its activity, or a stage kind's run), and
 * `afterExecuted` records what it produced and has the gate judge it when there is one.
 */
export function prepareAttempt(
  run: StageRun,
  record: AttemptRecord,
  log: AttemptLog,
  feedback: QualityFeedback | null,
): PreparedAttempt {
  return new StageAttempt(run, record, log, feedback);
}

/** What the stage's activity and its gates' activities are given of the attempt (less the agent and feedback). */
function attemptInput(run: StageRun, record: AttemptRecord, previousAttempts: PreviousAttempts) {
  const { stage, state } = run;
  return {
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
}

/**
 * One attempt of a stage, its steps sharing the attempt's record and log. The steps are arrow properties: the
 * runners take them out of the object (`const { execute, afterExecuted } = prepareAttempt(…)`).
 */
class StageAttempt implements PreparedAttempt {
  readonly kindRun: StageKindRun;
  /** The stage's earlier attempts (a gate's input names them again, with the log as it is by then). */
  private readonly attempts: AttemptRecord[];
  private readonly base: ReturnType<typeof attemptInput>;
  private readonly agent: { agent?: string };
  /** A stage kind (the table, through the engine's rules) runs in workflow code; any other `run:` is an activity. */
  private readonly kind: WorkflowStageKind | undefined;
  private readonly reportsCalls: boolean;

  constructor(
    private readonly run: StageRun,
    private readonly record: AttemptRecord,
    private readonly log: AttemptLog,
    private readonly feedback: QualityFeedback | null,
  ) {
    const { stage, state } = run;
    this.attempts = state.stages[stage.name]!.attempts;
    this.base = attemptInput(run, record, previousOf(this.attempts, log, record.attempt));
    this.agent = stage.agent !== undefined ? { agent: stage.agent } : {};
    this.kind = run.engine.kind(stage.run);
    this.kindRun = {
      itemId: run.itemId,
      pipeline: run.spec.name,
      // Deadlines are engine 8's (reviewerAttention): an older item's kinds never see one, whatever the spec says.
      stage: run.engine.reviewerAttention || stage.reviewSla === undefined ? stage : withoutDeadline(stage),
      attempt: record.attempt,
      input: run.input,
      upstream: this.base.upstream,
      state,
      emit: run.emit,
      touch: run.touch,
      feedback,
      publishesDecisions: run.engine.publishesDecisions,
      announces: run.engine.reviewerAttention && run.notifies === true,
    };
    this.reportsCalls = run.engine.reportsCalls(stage);
  }

  /** Not async: the usual path hands back the activity's own promise (every workflow promise costs, see BENCHMARKS.md). */
  readonly execute = (): Promise<StageActivityResult> => {
    const { run, record, kind } = this;
    return kind !== undefined
      ? kind.runAttempt({ run: this.kindRun, stageIndex: run.spec.stages.indexOf(run.stage), engine: run.engine })
      : stageActivity(
          run.stage,
          record.attempt,
        )({ ...this.base, ...this.agent, feedback: this.feedback } satisfies StageActivityInput);
  };

  /** Seed 000's FanOut is a plain stage's outcome: a kind's result is its artefact. */
  readonly fansOut = (executed: StageActivityResult): boolean =>
    executed.outcome === 'fan_out' && this.kind === undefined;

  readonly recordOutput = (output: StageActivityOutput): AttemptOutcome | null => {
    const { record } = this;
    if (output.artefact !== undefined) record.artefact = output.artefact;
    if (output.summary !== undefined) record.outputSummary = output.summary;
    if (output.rejection) {
      // The stage judged its own output unusable (e.g. a reply that broke the schema): a rejected attempt.
      record.verdict = { kind: 'rejected', feedback: output.rejection };
      return { kind: 'output', output, verdict: record.verdict };
    }
    if (!this.run.stage.gate || output.outcome !== 'completed') return { kind: 'output', output, verdict: null };
    return null;
  };

  readonly takeCalls = ({ calls, previousLog, outputSchema, ...output }: StageActivityResult): StageActivityOutput => {
    const { record, run } = this;
    const { stage, state } = run;
    if (this.reportsCalls) keepCalls(record, calls);
    if (typeof previousLog === 'string') Object.assign(this.log, { ref: previousLog, count: record.attempt - 1 });
    // A schema registered on an implementations queue: the spec's own output_schema, if any, wins.
    if (outputSchema !== undefined && stage.outputSchema === undefined && !state.outputSchemas?.[stage.name])
      state.outputSchemas = { ...state.outputSchemas, [stage.name]: outputSchema };
    return output;
  };

  readonly judgeOutput = (output: StageActivityOutput): Promise<QualityVerdict> => {
    const { run, record } = this;
    const { config: _stageConfig, previousAttempts: _before, ...rest } = this.base;
    const shared = { ...rest, previousAttempts: previousOf(this.attempts, this.log, record.attempt) };
    const judge = (gate: { run: string; with?: Json }) =>
      gateActivity(
        run.stage,
        gate.run,
        record.attempt,
      )({
        ...shared,
        ...this.agent,
        ...(gate.with !== undefined ? { config: gate.with } : {}),
        output,
      } satisfies GateActivityInput);
    return evaluateGate(run, run.stage.gate!, judge, record);
  };

  readonly judged = (output: StageActivityOutput, verdict: QualityVerdict): AttemptOutcome => {
    this.record.verdict = verdict;
    return { kind: 'output', output, verdict };
  };

  // Every promise a workflow makes costs (BENCHMARKS.md): a gate or a fan-out adds its own `then`.
  readonly afterExecuted = (executed: StageActivityResult): AttemptOutcome | Promise<AttemptOutcome> => {
    const afterOutput = (output: StageActivityOutput): AttemptOutcome | Promise<AttemptOutcome> =>
      this.recordOutput(output) ?? this.judgeOutput(output).then((verdict) => this.judged(output, verdict));
    if (!this.fansOut(executed)) return afterOutput(this.takeCalls(executed));
    return this.run.engine.fanOutOutcome(this.run, this.kindRun, this.record, executed, (fanned) =>
      afterOutput(this.takeCalls(fanned)),
    );
  };
}

/** CancellationScope.withTimeout, but with a timer the Web UI can name; a timeout is an outcome, not an error. */
export async function withAttemptTimeout(
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
      keepCalls(record, run.engine.callsOfFailure(error));
      const previousLog = failureDetails(error, false)?.previousLog;
      if (typeof previousLog === 'string') Object.assign(log, { ref: previousLog, count: record.attempt - 1 });
      return { kind: 'timed_out', afterMs: timeoutMs };
    }
    throw error;
  }
}

function activityOptions(stage: StageSpec, attempt: number, what: string, type: string) {
  const { activity } = stage;
  const taskQueue = stage.queues?.[type];
  return {
    // An implementation Treadle does not ship runs on its own queue; the rest stay on the item's.
    ...(taskQueue !== undefined ? { taskQueue } : {}),
    startToCloseTimeout: activity.startToCloseTimeoutMs,
    heartbeatTimeout: activity.heartbeatTimeoutMs,
    retry: retryPolicyOf(activity),
    summary: `${stage.name} · ${what}attempt ${attempt}/${stage.retryBudget.maxAttempts}`,
    // A timed-out attempt ends only once its activity has stopped: attempts of a stage never overlap (one
    // conversation, one working directory), and the calls it made come back with the cancellation.
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
  };
}

function stageActivity(stage: StageSpec, attempt: number): (input: StageActivityInput) => Promise<StageActivityResult> {
  const acts = proxyActivities<Record<string, (input: StageActivityInput) => Promise<StageActivityResult>>>(
    activityOptions(stage, attempt, '', stage.run),
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
    activityOptions(stage, attempt, composed ? `gate ${gate} · ` : 'gate · ', gateActivityType(gate)),
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
    else if (failure) keepCalls(record, run.engine.callsOfFailure(result.reason));
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

/** The artefacts of a stage's dependencies, as its attempts receive them. */
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

/** `stage` without its `review_sla` (copied only for an older item whose spec has one, never on the usual path). */
function withoutDeadline(stage: StageSpec): StageSpec {
  const { reviewSla: _deadline, ...rest } = stage;
  return rest;
}
