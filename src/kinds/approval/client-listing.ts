/**
 * The approval kind's decisions in a listing (see src/client/decision-listing.ts): the pending requests of the
 * work item's `treadleApprovals` memo, found by `TreadleApprovals`.
 */
import { TreadleApprovals } from '../../model/search-attributes';
import { ANSWERS, decisionKey, type PendingDecision } from '../../model/decisions';
import type { ApprovalsMemo } from './shapes';
import type { DecisionSource, KindListing } from '../../client/decision-listing';

/** A pending approval request as a decision; its key's subject is the request id. */
export function approvalDecision(source: DecisionSource, request: ApprovalsMemo['requests'][number]): PendingDecision {
  return {
    key: decisionKey(source.workflowId, 'approval', request.id),
    kind: 'approval',
    workflowId: source.workflowId,
    itemId: request.itemId || source.workflowId,
    pipeline: source.approvals?.pipeline || source.pipeline || '',
    stage: request.step,
    reason: 'approval',
    message: request.summary,
    requestedAt: request.createdAt,
    ...(request.expiresAt ? { expiresAt: request.expiresAt } : {}),
    ...(request.reviewers ? { reviewers: request.reviewers } : {}),
    ...(request.dueAt ? { dueAt: request.dueAt } : {}),
    approval: {
      id: request.id,
      actionType: request.actionType,
      summary: request.summary,
      context: request.context,
      ...(request.escalated ? { escalated: true } : {}),
    },
    answers: ANSWERS.approval,
  };
}

/** Approval requests (`approval` decisions): the memo's pending ones, decided ones left out. */
export const approvalListing: KindListing = {
  clauses: [`${TreadleApprovals.name} IS NOT NULL`],
  others(source) {
    const pending = (source.approvals?.requests ?? []).filter((request) => request.status === 'pending');
    return pending.map((request) => approvalDecision(source, request));
  },
};
