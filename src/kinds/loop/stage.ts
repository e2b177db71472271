/**
 * A `loop` stage's attempt in a work item (seed 004): the plan made and stored by an activity, then the loop
 * as a `loopStage` child workflow (`workflow.ts`), its artefact stored by an activity.
 */
import { ApplicationFailure, executeChild, proxyActivities } from '@temporalio/workflow';
import { LOOP_ARTEFACT_ACTIVITY, LOOP_PREPARE_ACTIVITY } from '../../model/activity-types';
import { STEP_HEARTBEAT_TIMEOUT, truncateText } from '../../model/limits';
import type { Json } from '../../model/shapes';
import type { StageActivityResult } from '../../model/state';
import { usageBatch, type StageKindRun } from '../../workflow-kit/common';
import type { LoopArtefact, LoopPrepareInput, LoopPrepareResult } from './shapes';
import { loopStage } from './workflow';

/** The stage's two activities around the loop; prepare makes the run folder, so on the workspace's host queue. */
const stageActivities = (taskQueue: string | undefined) =>
  proxyActivities<{
    [LOOP_PREPARE_ACTIVITY]: (input: LoopPrepareInput) => Promise<LoopPrepareResult>;
    [LOOP_ARTEFACT_ACTIVITY]: (input: { artefact: LoopArtefact }) => Promise<Json>;
  }>({
    startToCloseTimeout: '5m',
    heartbeatTimeout: STEP_HEARTBEAT_TIMEOUT,
    retry: { maximumAttempts: 5, nonRetryableErrorTypes: ['InvalidConfig'] },
    ...(taskQueue !== undefined ? { taskQueue } : {}),
  });
const { [LOOP_ARTEFACT_ACTIVITY]: artefactActivity } = stageActivities(undefined);

/**
 * A `loop` stage's attempt in a work item: the plan made and stored by an activity, then the loop as a child
 * workflow (`<item>.<stage>.<attempt>`, its own history and Web UI page, under the item). Its artefact is the
 * {@link LoopArtefact}: the final output (its text, and its reference), where the files are, how the loop
 * ended; the whole artefact by reference when large.
 */
export async function runLoopStage(run: StageKindRun, stageIndex: number): Promise<StageActivityResult> {
  const { stage } = run;
  // A workspace is a folder on one host: a stage's task_queue sends the prepare step and the loop's workflow
  // (with its activities) to the queue the workers holding it poll. Without one, nothing changes.
  const taskQueue = stage.taskQueue;
  const prepared = await stageActivities(taskQueue)[LOOP_PREPARE_ACTIVITY]({
    itemId: run.itemId,
    pipeline: run.pipeline,
    stage: stage.name,
    stageIndex,
    config: stage.with ?? null,
    input: run.input,
    upstream: run.upstream,
    itemStartedAtMs: Date.parse(run.state.startedAt),
    attempt: run.attempt,
    ...(run.feedback
      ? {
          feedback: {
            summary: run.feedback.summary,
            failed: run.feedback.failedCriteria.map((c) => `${c.name}: expected ${c.expected}, got ${c.actual}`),
          },
        }
      : {}),
  });
  if (!prepared.ok)
    throw ApplicationFailure.nonRetryable(
      `loop stage ${stage.name} cannot start (${prepared.problems.length} problem${prepared.problems.length === 1 ? '' : 's'}): ${prepared.problems.join('; ')}`,
      'InvalidLoop',
    );
  const id = `${run.itemId}.${stage.name}.${run.attempt}`;
  run.emit(
    'LoopStarted',
    `${stage.name}: loop ${id} in ${prepared.plan.sessionDir}/${prepared.plan.stageDir} (${prepared.plan.termination.type}, at most ${prepared.plan.maxIterations} iteration${prepared.plan.maxIterations === 1 ? '' : 's'})`,
    { stage: stage.name, attempt: run.attempt, details: { workflowId: id, session: prepared.plan.session } },
  );
  run.touch();
  const { usage, ...artefact } = await executeChild(loopStage, {
    workflowId: id,
    args: [
      {
        itemId: run.itemId,
        pipeline: run.pipeline,
        stage: stage.name,
        planRef: prepared.planRef,
        plan: prepared.plan,
        ...(run.state.correlationId !== undefined ? { correlationId: run.state.correlationId } : {}),
        ...(run.publishesDecisions === true ? { publishesDecisions: true } : {}),
        ...(run.announces === true ? { announces: true } : {}),
      },
    ],
    staticSummary: `loop stage ${stage.name} of ${run.itemId}`,
    ...(taskQueue !== undefined ? { taskQueue } : {}),
  });
  const summary = truncateText(
    `${artefact.iterations} iteration${artefact.iterations === 1 ? '' : 's'}; ${artefact.stoppedBy.by === 'guardrail' ? 'stopped by a guardrail' : 'done'}: ${artefact.stoppedBy.reason}`,
  );
  run.emit('LoopCompleted', `${stage.name}: ${summary}`, {
    stage: stage.name,
    attempt: run.attempt,
    details: { iterations: artefact.iterations, by: artefact.stoppedBy.by },
  });
  // The loop's model calls count for the item (usage, token budget): their totals, as a batch without records.
  return {
    outcome: 'completed',
    artefact: await artefactActivity({ artefact }),
    summary,
    previousLog: null,
    ...usageBatch(usage),
  };
}
