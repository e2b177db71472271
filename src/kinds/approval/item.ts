/**
 * The approval kind's part of the work item (seed 003): its requests live in the item's state, so the item
 * handles their decisions (by id, by update or signal) and publishes them (the `TreadleApprovals` search
 * attribute and the approvals memo, which listings read, and a block of the Web UI's current details). The kind's row (kind.ts) hands these to the work
 * item as its `installHandlers` and `publish` hooks (docs/stage-kinds.md).
 */
import { ApplicationFailure } from '@temporalio/workflow';
import { truncateText } from '../../model/limits';
import { MAX_APPROVAL_IDS_ATTRIBUTE, TreadleApprovals } from '../../model/search-attributes';
import type { ApprovalRequest, WorkItemState } from '../../model/state';
import { describePayload } from '../../workflow-kit/publishing';
import type { KindItemContext, KindPublication } from '../../workflow-kit/stage-kind';
import { approvalSignal, decideApprovalUpdate } from './messages';
import { APPROVALS_MEMO_KEY, checkApprovalDecision, type ApprovalsMemo } from './shapes';
import { applyDecision } from './stage';

/** Sets the work item's handlers of the approval messages: a decision by signal or by (validated) update. */
export function installApprovalHandlers(item: KindItemContext): void {
  const { state, itemId, setHandler } = item;
  setHandler(approvalSignal, (payload) => {
    const decided = decideApproval(item, payload);
    if (!decided.ok)
      item.emit('ApprovalInputRejected', truncateText(decided.error), { details: describePayload(payload) });
  });
  setHandler(
    decideApprovalUpdate,
    (payload) => {
      const decided = decideApproval(item, payload);
      if (!decided.ok) throw ApplicationFailure.nonRetryable(decided.error, 'InvalidDecision');
      const { id, step, status, decidedBy } = decided.request;
      return { id, itemId, step, status: status as 'approved' | 'rejected', decidedBy: decidedBy! };
    },
    {
      validator: (payload) => {
        const checked = checkApprovalDecision(state.approvals ?? [], itemId, payload);
        if (!checked.ok) throw new Error(checked.error);
      },
      description:
        'Approve or reject a pending approval request by id: {id, decision: "approve" | "reject", by?, reason?}.',
    },
  );
}

/** An approval decision, checked and applied to its request. */
function decideApproval(item: KindItemContext, payload: unknown): ReturnType<typeof checkApprovalDecision> {
  const checked = checkApprovalDecision(item.state.approvals ?? [], item.itemId, payload);
  if (!checked.ok) return checked;
  const { request, decision } = checked;
  const by = decision.by ?? 'anonymous';
  applyDecision(request, decision.decision, by, decision.reason);
  item.emit(
    'ApprovalDecided',
    `${request.step}: approval ${request.id} ${request.status} by ${by}${decision.reason ? `: ${decision.reason}` : ''}`,
    { stage: request.step, details: { id: request.id, status: request.status, by } },
  );
  item.touch();
  return checked;
}

/**
 * What the item publishes for its approval requests, once it has had any (items without any never carry the
 * attribute or the memo key): the pending ids, the `TreadleApprovals` attribute and the approvals memo.
 */
export function approvalsPublication(state: WorkItemState): KindPublication | undefined {
  const { approvals } = state;
  if (approvals === undefined) return undefined;
  const waiting = approvals.filter((r) => r.status === 'pending');
  const watched = waiting.map((r) => r.id).slice(0, MAX_APPROVAL_IDS_ATTRIBUTE);
  return {
    // A request with a deadline (issue 40) handed to another group is a change the inbox's delta must see.
    pending: waiting.map((r) => (r.dueAt !== undefined && r.escalated ? `${r.id}:${r.reviewers ?? ''}` : r.id)),
    attribute: {
      // When to upsert stays what it was (commands replay): the pending ids decide. The value also names
      // decided requests, newest first, so a decision on one finds its item and hears how it was decided
      // instead of "not found".
      watched,
      value: () => {
        const decided = approvals
          .filter((r) => r.status !== 'pending')
          .map((r) => r.id)
          .reverse();
        const searchable = [...watched, ...decided].slice(0, MAX_APPROVAL_IDS_ATTRIBUTE);
        return { key: TreadleApprovals, value: searchable.length > 0 ? searchable : null };
      },
    },
    memo: { [APPROVALS_MEMO_KEY]: approvalsMemoOf(state) },
    ...(waiting.length > 0 ? { details: approvalDetails(approvals) } : {}),
  };
}

/** Pending requests listed in the Web UI's current details (as many as its stage rows); the rest are counted. */
const DETAIL_ROWS = 30;

/** The pending requests' block of the Web UI's current details. */
function approvalDetails(approvals: readonly ApprovalRequest[]): NonNullable<KindPublication['details']> {
  const pending = approvals.filter((r) => r.status === 'pending');
  const lines = pending
    .slice(0, DETAIL_ROWS)
    .map(
      (r) =>
        `- \`${r.id}\` **${r.step}** ${r.actionType}: ${r.summary}${r.escalated ? ` (escalated to ${r.reviewers})` : ''}`,
    );
  if (pending.length > DETAIL_ROWS) lines.push(`- … ${pending.length - DETAIL_ROWS} more`);
  return { heading: 'Waiting for approval (treadle approve <id>):', lines };
}

/** Approval requests kept in the memo for listings; the `state` query has them all. */
const MEMO_APPROVALS = 50;

/** The pending approval requests for listings (payloads and results left out), or null when none waits. */
export function approvalsMemoOf(state: WorkItemState): ApprovalsMemo | null {
  const pending = (state.approvals ?? []).filter((r) => r.status === 'pending');
  if (pending.length === 0) return null;
  return {
    pipeline: state.pipeline,
    requests: pending.slice(0, MEMO_APPROVALS).map(({ payload: _payload, result: _result, ...rest }) => rest),
    omitted: Math.max(0, pending.length - MEMO_APPROVALS),
  };
}
