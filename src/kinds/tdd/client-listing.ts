/**
 * The TDD kind's decisions in a listing (see src/client/decision-listing.ts): a node's human step, which the node
 * publishes as the work item publishes a review (`TreadlePendingReviews`, the `treadleReviews` memo) under its
 * own `TreadlePipeline`, `tdd` (node-publishing.ts).
 */
import type { PendingReview } from '../../model/state';
import type { TddHumanReason } from '../../model/decisions';
import {
  PENDING_STAGES_CLAUSE,
  partialStageDecision,
  reviewEntryDecision,
  type DecisionSource,
  type KindListing,
} from '../../client/decision-listing';

/** The `TreadlePipeline` of TDD nodes (node-publishing.ts's `TDD_PIPELINE_NAME`, workflow code the client keeps out). */
const TDD_PIPELINE = 'tdd';
const TDD_NODE_TYPE = 'tddNode';

/** The message prefixes engine-6 TDD nodes write (`stuck: …`), the only place their human reason was kept. */
const TDD_PREFIX = /^(stuck|clarification|review_rejected):\s*/;

/** A TDD node's human reason: the memo's `human` field (engine 7), else the message's prefix (engine 6). */
export function tddHumanReason(review: Pick<PendingReview, 'human' | 'message'>): TddHumanReason {
  if (review.human) return review.human;
  const prefix = TDD_PREFIX.exec(review.message)?.[1] as TddHumanReason | undefined;
  // Engine-6 nodes only ask a person for these three; an unprefixed message is the stuck report's shape.
  return prefix ?? 'stuck';
}

/** Whether the execution is a TDD node (by its pipeline attribute, or its workflow type when the server says). */
function isTddNode(source: DecisionSource): boolean {
  return source.pipeline === TDD_PIPELINE || source.workflowType === TDD_NODE_TYPE;
}

/** A TDD node's questions to a person (`tdd` decisions): every review entry and pending stage of a node. */
export const tddListing: KindListing = {
  clauses: [PENDING_STAGES_CLAUSE],
  ownPipeline: TDD_PIPELINE,
  owns: isTddNode,
  fromReview(source, review) {
    return isTddNode(source) ? reviewEntryDecision(source, review, 'tdd', tddHumanReason(review)) : undefined;
  },
  fromPendingStage(source, stage) {
    return isTddNode(source) ? partialStageDecision(source, stage, 'tdd', 'stuck') : undefined;
  },
};
