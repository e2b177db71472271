/**
 * The `fan_out` stage kind of engines 1 to 4, kept for items started on them (engine 5's is workflow.ts),
 * run by the work item's stage runner as one attempt (also when a stage returns
 * seed 000's `fan_out` outcome): each element of the list becomes a child work item of a one-stage pipeline
 * (`<item>.<stage>.<attempt>.<index>`, its own history, status, retries, gate and reviews, under this item
 * in the Web UI), at most `max_concurrent` at once; the results come back in input order, and an element
 * that fails is reported in them without losing the others (or fails the stage, with `on_item_failure: fail`).
 */
import { ApplicationFailure, executeChild, isCancellation, proxyActivities } from '@temporalio/workflow';
import {
  FAN_OUT_PREPARE_ACTIVITY,
  type FanOutArtefact,
  type FanOutItemResult,
  type FanOutPrepareInput,
  type FanOutPrepareResult,
} from './shapes';
import { STORE_ARTEFACT_ACTIVITY } from '../../model/activity-types';
import { truncateText } from '../../model/limits';
import type { Artefact, Json, UsageTotals } from '../../model/shapes';
import { addTotals } from '../../engine/usage';
import type {
  StageActivityResult,
  StoreArtefactInput,
  StoreArtefactResult,
  WorkItemInput,
  WorkItemResult,
} from '../../model/state';
import { describeFailure, failureWithUsage, usageBatch, type StageKindRun } from '../../workflow-kit/common';

const activities = proxyActivities<{
  [FAN_OUT_PREPARE_ACTIVITY]: (input: FanOutPrepareInput) => Promise<FanOutPrepareResult>;
  [STORE_ARTEFACT_ACTIVITY]: (input: StoreArtefactInput) => Promise<StoreArtefactResult>;
}>({ startToCloseTimeout: '5m', retry: { maximumAttempts: 5, nonRetryableErrorTypes: ['InvalidConfig'] } });

/** What a fan-out attempt needs of its work item. */
export type FanOutRun = StageKindRun;

/** The prepare activity's answer when the stage can fan out: the elements and how to run them. */
type PreparedFanOut = Extract<FanOutPrepareResult, { ok: true }>;

/** One fan-out of engines 1 to 4, at most 2,000 elements; `outcome` is the artefact of a stage that returned `fan_out` (else the stage's config applies). */
export async function runInlineFanOut(run: FanOutRun, outcome?: Artefact): Promise<StageActivityResult> {
  const { stage } = run;
  const prepared = await activities[FAN_OUT_PREPARE_ACTIVITY]({
    itemId: run.itemId,
    pipeline: run.pipeline,
    stage: stage.name,
    config: outcome !== undefined ? null : (stage.with ?? null),
    upstream: run.upstream,
    input: run.input,
    ...(outcome !== undefined ? { outcome } : {}),
  });
  if (!prepared.ok)
    throw ApplicationFailure.nonRetryable(
      `${stage.name} cannot fan out (${prepared.problems.length} problem${prepared.problems.length === 1 ? '' : 's'}): ${prepared.problems.join('; ')}`,
      'InvalidFanOut',
    );
  const fanOut = new InlineFanOut(run, prepared);
  fanOut.start();
  await Promise.all(fanOut.lanes());
  const { artefact, summary } = fanOut.finish();
  // The results are stored once when large; downstream stages and the history carry the reference.
  const stored = (await activities[STORE_ARTEFACT_ACTIVITY]({ artefact: artefact as unknown as Json, summary }))
    .artefact as Artefact;
  return { outcome: 'completed', artefact: stored, summary, previousLog: null, ...usageBatch(fanOut.usage) };
}

/**
 * The elements of one fan-out as child work items: `max_concurrent` lanes, each taking the next element when
 * its last one is done, and the stage's progress, results and usage as they end.
 */
class InlineFanOut {
  private readonly total: number;
  private readonly progress: { total: number; running: number; completed: number; failed: number };
  private readonly results: FanOutItemResult[];
  /** The elements' model calls count for this item: their totals, summed as each element ends. */
  usage: UsageTotals | undefined;
  /** The next element a lane takes. */
  private next = 0;

  constructor(
    private readonly run: FanOutRun,
    private readonly prepared: PreparedFanOut,
  ) {
    this.total = prepared.elements.length;
    this.progress = { total: this.total, running: 0, completed: 0, failed: 0 };
    this.results = new Array<FanOutItemResult>(this.total);
  }

  /** The stage shows its progress from now on; `FanOutStarted` says how many elements at once. */
  start(): void {
    const { run, total, prepared } = this;
    const { stage } = run;
    run.state.stages[stage.name]!.fanOut = this.progress;
    run.emit(
      'FanOutStarted',
      `${stage.name} fans out over ${total} element${total === 1 ? '' : 's'} (at most ${prepared.maxConcurrent} at once)`,
      { stage: stage.name, attempt: run.attempt, details: { total, maxConcurrent: prepared.maxConcurrent } },
    );
    run.touch();
  }

  /** `max_concurrent` lanes, each taking the next element when its last one is done. */
  lanes(): Promise<void>[] {
    return Array.from({ length: Math.min(this.prepared.maxConcurrent, this.total) }, () => this.lane());
  }

  /** Every element's outcome in `FanOutCompleted`; the stage fails here when `on_item_failure: fail` says so. */
  finish(): { artefact: FanOutArtefact; summary: string } {
    const { run, progress, results, total } = this;
    const { stage } = run;
    const artefact: FanOutArtefact = { results, completed: progress.completed, failed: progress.failed };
    const summary = `${progress.completed} of ${total} element${total === 1 ? '' : 's'} completed${progress.failed > 0 ? `, ${progress.failed} failed` : ''}`;
    run.emit('FanOutCompleted', `${stage.name}: ${summary}`, {
      stage: stage.name,
      details: { completed: progress.completed, failed: progress.failed },
    });
    if (progress.failed > 0 && this.prepared.onItemFailure === 'fail') {
      const failed = results.filter((r) => r.status === 'failed');
      throw failureWithUsage(
        `${failed.length} of ${total} elements failed (on_item_failure: fail): ${failed
          .slice(0, 5)
          .map((r) => `${r.index}: ${r.error}`)
          .join('; ')}${failed.length > 5 ? '; …' : ''}`,
        'FanOutFailed',
        this.usage,
      );
    }
    return { artefact, summary };
  }

  private async lane(): Promise<void> {
    while (this.next < this.total) await this.runOne(this.next++);
  }

  /** One element as a child work item; a child that fails is a failed result, not the stage's failure. */
  private async runOne(index: number): Promise<void> {
    const { run, prepared } = this;
    const id = `${run.itemId}.${run.stage.name}.${run.attempt}.${index}`;
    // The elements are part of this run: they share its correlation id.
    const correlation = run.state.correlationId !== undefined ? { correlationId: run.state.correlationId } : {};
    const args: WorkItemInput = {
      pipeline: prepared.pipeline,
      pipelineName: prepared.pipelineName,
      input: prepared.elements[index]!,
      itemId: id,
      ...correlation,
    };
    this.progress.running++;
    run.touch();
    try {
      const child = await executeChild<(input: WorkItemInput) => Promise<WorkItemResult>>('workItem', {
        workflowId: id,
        args: [args],
        staticSummary: `${run.stage.name} element ${index + 1}/${this.total}`,
      });
      this.results[index] = this.childResult(index, id, child);
    } catch (error) {
      if (isCancellation(error)) throw error;
      this.results[index] = { index, id, status: 'failed', error: truncateText(describeFailure(error), 500) };
    }
    this.ended(this.results[index]);
  }

  /** A child that ended: its usage counts for this item; its result is the child stage's artefact or error. */
  private childResult(index: number, id: string, child: WorkItemResult): FanOutItemResult {
    const { childStage } = this.prepared;
    const artefact = child.artefacts[childStage];
    if (child.usage) this.usage = addTotals(this.usage, child.usage);
    return child.status === 'completed'
      ? { index, id, status: 'completed', ...(artefact !== undefined ? { artefact } : {}) }
      : {
          index,
          id,
          status: 'failed',
          error: truncateText(child.stageErrors?.[childStage] ?? child.error ?? 'failed', 500),
        };
  }

  /** An element's end in the stage's progress, with a `FanOutItemFailed` event when it failed. */
  private ended(result: FanOutItemResult): void {
    const { run, progress } = this;
    progress.running--;
    if (result.status === 'completed') progress.completed++;
    else {
      progress.failed++;
      run.emit(
        'FanOutItemFailed',
        `${run.stage.name}: element ${result.index} (${result.id}) failed: ${result.error}`,
        {
          stage: run.stage.name,
          details: { index: result.index, id: result.id },
        },
      );
    }
    run.touch();
  }
}
