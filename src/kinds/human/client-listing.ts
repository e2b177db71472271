/**
 * The human kind's decisions in a listing (see src/client/decision-listing.ts): a `human` stage waiting for a
 * person's output. The item names the stage in `TreadlePendingReviews` (so the one listing finds it) and keeps
 * the request in its `treadleHuman` memo, which this listing reads.
 */
import { ANSWERS, decisionKey, type PendingDecision } from '../../model/decisions';
import type { HumanRequest } from '../../model/state';
import { PENDING_STAGES_CLAUSE, type DecisionSource, type KindListing } from '../../client/decision-listing';

/** A pending human request as a decision; its key's subject is the stage. */
export function humanDecision(source: DecisionSource, request: HumanRequest): PendingDecision {
  const again = request.feedback ? `; the gate sent attempt ${request.attempt - 1} back: ${request.feedback}` : '';
  return {
    key: decisionKey(source.workflowId, 'human', request.stage),
    kind: 'human',
    workflowId: source.workflowId,
    itemId: source.workflowId,
    pipeline: source.human?.pipeline || source.pipeline || '',
    stage: request.stage,
    reason: 'human',
    message: `${request.instructions ?? 'supply the stage output'}${again}`,
    requestedAt: request.requestedAt,
    attempt: request.attempt,
    ...(request.reviewers ? { reviewers: request.reviewers } : {}),
    ...(request.dueAt ? { dueAt: request.dueAt } : {}),
    ...(request.escalated ? { escalated: request.escalated } : {}),
    human: {
      ...(request.instructions !== undefined ? { instructions: request.instructions } : {}),
      ...(request.feedback !== undefined ? { feedback: request.feedback } : {}),
    },
    answers: ANSWERS.human,
  };
}

/** The pending request of `stage`, if the source's memo has one. */
function requestOf(source: DecisionSource, stage: string): HumanRequest | undefined {
  return source.human?.requests.find((r) => r.stage === stage && r.status === 'pending');
}

/** Human stages (`human` decisions): claimed among the pending stages, and read from the memo. */
export const humanListing: KindListing = {
  clauses: [PENDING_STAGES_CLAUSE],
  fromPendingStage(source, stage) {
    const request = requestOf(source, stage);
    return request ? humanDecision(source, request) : undefined;
  },
  others(source, found) {
    const listed = new Set(found.map((d) => d.key));
    return (source.human?.requests ?? [])
      .filter((r) => r.status === 'pending')
      .map((r) => humanDecision(source, r))
      .filter((d) => !listed.has(d.key));
  },
};
