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

/** One fan-out of engines 1 to 4, at most 2,000 elements; `outcome` is the artefact of a stage that returned `fan_out` (else the stage's config applies). */
export async function runInlineFanOut(run: FanOutRun, outcome?: Artefact): Promise<StageActivityResult> {
  const { stage, emit } = run;
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
  const total = prepared.elements.length;
  const progress = { total, running: 0, completed: 0, failed: 0 };
  run.state.stages[stage.name]!.fanOut = progress;
  emit(
    'FanOutStarted',
    `${stage.name} fans out over ${total} element${total === 1 ? '' : 's'} (at most ${prepared.maxConcurrent} at once)`,
    { stage: stage.name, attempt: run.attempt, details: { total, maxConcurrent: prepared.maxConcurrent } },
  );
  run.touch();

  const results: FanOutItemResult[] = new Array<FanOutItemResult>(total);
  // The elements' model calls count for this item: their totals, summed as each element ends.
  let usage: UsageTotals | undefined;
  const runOne = async (index: number): Promise<void> => {
    const id = `${run.itemId}.${stage.name}.${run.attempt}.${index}`;
    // The elements are part of this run: they share its correlation id.
    const correlation = run.state.correlationId !== undefined ? { correlationId: run.state.correlationId } : {};
    const args: WorkItemInput = {
      pipeline: prepared.pipeline,
      pipelineName: prepared.pipelineName,
      input: prepared.elements[index]!,
      itemId: id,
      ...correlation,
    };
    progress.running++;
    run.touch();
    try {
      const child = await executeChild<(input: WorkItemInput) => Promise<WorkItemResult>>('workItem', {
        workflowId: id,
        args: [args],
        staticSummary: `${stage.name} element ${index + 1}/${total}`,
      });
      const artefact = child.artefacts[prepared.childStage];
      if (child.usage) usage = addTotals(usage, child.usage);
      results[index] =
        child.status === 'completed'
          ? { index, id, status: 'completed', ...(artefact !== undefined ? { artefact } : {}) }
          : {
              index,
              id,
              status: 'failed',
              error: truncateText(child.stageErrors?.[prepared.childStage] ?? child.error ?? 'failed', 500),
            };
    } catch (error) {
      if (isCancellation(error)) throw error;
      results[index] = { index, id, status: 'failed', error: truncateText(describeFailure(error), 500) };
    }
    progress.running--;
    if (results[index].status === 'completed') progress.completed++;
    else {
      progress.failed++;
      emit('FanOutItemFailed', `${stage.name}: element ${index} (${id}) failed: ${results[index].error}`, {
        stage: stage.name,
        details: { index, id },
      });
    }
    run.touch();
  };
  // `max_concurrent` lanes, each taking the next element when its last one is done.
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < total) await runOne(next++);
  };
  await Promise.all(Array.from({ length: Math.min(prepared.maxConcurrent, total) }, lane));

  const artefact: FanOutArtefact = { results, completed: progress.completed, failed: progress.failed };
  const summary = `${progress.completed} of ${total} element${total === 1 ? '' : 's'} completed${progress.failed > 0 ? `, ${progress.failed} failed` : ''}`;
  emit('FanOutCompleted', `${stage.name}: ${summary}`, {
    stage: stage.name,
    details: { completed: progress.completed, failed: progress.failed },
  });
  if (progress.failed > 0 && prepared.onItemFailure === 'fail') {
    const failed = results.filter((r) => r.status === 'failed');
    throw failureWithUsage(
      `${failed.length} of ${total} elements failed (on_item_failure: fail): ${failed
        .slice(0, 5)
        .map((r) => `${r.index}: ${r.error}`)
        .join('; ')}${failed.length > 5 ? '; …' : ''}`,
      'FanOutFailed',
      usage,
    );
  }
  // The results are stored once when large; downstream stages and the history carry the reference.
  const stored = (await activities[STORE_ARTEFACT_ACTIVITY]({ artefact: artefact as unknown as Json, summary }))
    .artefact as Artefact;
  return { outcome: 'completed', artefact: stored, summary, previousLog: null, ...usageBatch(usage) };
}
