/**
 * A `tdd` stage's attempt (seed 001 as one stage of an ordinary pipeline): the TDD tree as a child workflow
 * (its own history and Web UI page, under the item; on the stage's `task_queue` when it names one), its
 * root's `MergeComplete` as the artefact, by reference. A tree that fails fails the attempt.
 */
import { executeChild, proxyActivities, workflowInfo } from '@temporalio/workflow';
import { TDD_PREPARE_ACTIVITY } from '../../model/activity-types';
import { truncateText } from '../../model/limits';
import type { StageActivityResult } from '../../model/state';
import { failureWithUsage, resultOfFailure, usageBatch } from '../../workflow-kit/common';
import type { KindAttempt } from '../../workflow-kit/stage-kind';
import { TDD_TREE_FAILED, type TddNodeInput, type TddNodeResult, type TddPrepareInput } from './shapes';
import { tddNode } from './workflow';

/** The tree's prepare step, on `taskQueue` when the stage names one (the host that holds the repository). */
const tddPrepareOn = (taskQueue: string | undefined) =>
  proxyActivities<{ [TDD_PREPARE_ACTIVITY]: (input: TddPrepareInput) => Promise<TddNodeInput> }>({
    startToCloseTimeout: '1m',
    retry: { maximumAttempts: 5, nonRetryableErrorTypes: ['InvalidConfig'] },
    ...(taskQueue !== undefined ? { taskQueue } : {}),
  })[TDD_PREPARE_ACTIVITY];

/** Runs one attempt of a `tdd` stage: prepare the tree, run it as a child workflow, take its merge. */
export async function runTddTree({ run, engine }: KindAttempt): Promise<StageActivityResult> {
  const treeId = `${workflowInfo().workflowId}.${run.stage.name}.${run.attempt}`;
  // A repository is a folder on one host: a stage's task_queue sends the whole tree (its prepare step, its
  // workflows and their activities) to the queue the workers holding it poll. Without one, nothing changes.
  const taskQueue = run.stage.taskQueue;
  const input = await tddPrepareOn(taskQueue)({ config: run.stage.with ?? null, treeId });
  // Engine 6 asks the tree to fail its workflow when it does not merge; its result comes with the failure.
  const flagged = engine.failsWorkflow ? { failAsWorkflow: true } : {};
  // Engine 7 names the item, so the tree's human steps list under it.
  const listed = engine.publishesDecisions ? { itemId: run.itemId } : {};
  // Engine 8 with a notifications file announces the tree's human steps too.
  const announced = run.announces === true ? { announce: { pipeline: run.pipeline } } : {};
  const result = await executeChild(tddNode, {
    workflowId: treeId,
    args: [{ ...input, ...flagged, ...listed, ...announced }],
    ...(taskQueue !== undefined ? { taskQueue } : {}),
  }).catch((error: unknown) => resultOfFailure<TddNodeResult>(error, TDD_TREE_FAILED) ?? Promise.reject(error));
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
