/**
 * The loop kind's decisions in a listing (see src/client/decision-listing.ts): a failed loop stage waiting to be
 * resumed or abandoned. Its own workflow lists it in the `treadleReviews` memo (engine 7, reason `loop_failed`);
 * an engine-6 loop wrote only `TreadleStatus = failed`, listed with what visibility knows.
 */
import { TreadlePipeline, TreadleStatus } from '../../model/search-attributes';
import { ANSWERS, decisionKey, type PendingDecision } from '../../model/decisions';
import {
  PENDING_STAGES_CLAUSE,
  reviewEntryDecision,
  type DecisionSource,
  type KindListing,
} from '../../client/decision-listing';

/** The `TreadlePipeline` of loop stage workflows (workflow.ts's `LOOP_PIPELINE_NAME`, which the client keeps out). */
const LOOP_PIPELINE = 'loop';
const LOOP_TYPE = 'loopStage';

/** The engine-6 trace of a failed loop (it writes no pending attribute). */
const FAILED_LOOP = `(${TreadlePipeline.name} = '${LOOP_PIPELINE}' AND ${TreadleStatus.name} = 'failed')`;

/**
 * A loop stage workflow's id is `<itemId>.<stage>.<attempt>` (kinds/loop/workflow.ts): its work item and stage
 * when the id has that shape, else the id itself and `loop`.
 */
export function loopIdentity(workflowId: string): { itemId: string; stage: string; attempt?: number } {
  const match = /^(.+)\.([^.]+)\.(\d+)$/.exec(workflowId);
  return match
    ? { itemId: match[1]!, stage: match[2]!, attempt: Number(match[3]) }
    : { itemId: workflowId, stage: 'loop' };
}

/** Whether the execution is a loop stage's workflow. */
function isLoop(source: DecisionSource): boolean {
  return source.pipeline === LOOP_PIPELINE || source.workflowType === LOOP_TYPE;
}

/** An engine-6 failed loop: running, `TreadleStatus = failed`, no memo; its details are in the loopState query. */
function partialLoop(source: DecisionSource): PendingDecision {
  const { itemId, stage, attempt } = loopIdentity(source.workflowId);
  return {
    key: decisionKey(source.workflowId, 'loop', stage),
    kind: 'loop',
    workflowId: source.workflowId,
    itemId,
    pipeline: source.pipeline || LOOP_PIPELINE,
    stage,
    reason: 'loop_failed',
    message: 'loop failed; open it to see why',
    requestedAt: source.startTime.toISOString(),
    ...(attempt !== undefined ? { attempt } : {}),
    answers: ANSWERS.loop,
    partial: true,
  };
}

/** A failed loop stage (`loop` decisions): a `loop_failed` review entry, else a failed loop's status alone. */
export const loopListing: KindListing = {
  clauses: [PENDING_STAGES_CLAUSE, FAILED_LOOP],
  ownPipeline: LOOP_PIPELINE,
  owns: isLoop,
  fromReview(source, review) {
    if (review.reason !== 'loop_failed') return undefined;
    // An entry that names no item belongs to the item the workflow's id names.
    return reviewEntryDecision(
      source,
      review,
      'loop',
      review.reason,
      review.itemId || loopIdentity(source.workflowId).itemId,
    );
  },
  others(source, found) {
    return isLoop(source) && source.status === 'failed' && !found.some((d) => d.kind === 'loop')
      ? [partialLoop(source)]
      : [];
  },
};
