/**
 * Approval requests (seed 003 "Approval Gate") as the `approval` stage kind keeps them: zod-free shapes and
 * pure rules, shared by the workflow (which owns the requests), the activities (which create and execute
 * them) and the client (which lists and decides them).
 *
 * A request lives in its work item's state (the `state` query), its pending ids in the `TreadleApprovals`
 * search attribute and its summary in the memo (listings in one visibility call), its creation and
 * decision in the workflow history; payloads above the blob threshold in the blob store, by reference.
 */
import type { Json } from '../../model/shapes';
import type { ApprovalRequest, ApprovalStatus } from '../../model/state';

// The requests are part of the work item's state (its `state` query), so their shapes live with it.
export type { ApprovalRequest, ApprovalStatus } from '../../model/state';

/** The stage implementation name of the approval stage kind (`run: approval`, or `type: approval`). */
export const APPROVAL_STAGE = 'approval';

/** What approval ids look like: `ap-` and ten characters of a base32 alphabet without l, o, 0 and 1. */
export const APPROVAL_ID_PATTERN = /^ap-[a-km-np-z2-9]{10}$/;

/** What happens to the run when a request is rejected (or expires). */
export type OnReject = 'skip' | 'stop';

/** The canonical `with:` of an approval stage (validated by `spec.ts`). */
export interface ApprovalStageConfig {
  /** One action type for every request; without it each item names its own (`action_type`). */
  action?: string;
  /** The upstream stage whose artefact holds the actions (default: the stage's only dependency). */
  from?: string;
  /** A dotted path to the list in that artefact, one request per element; without it, the artefact itself. */
  items?: string;
  /** Text for the reviewer, shown with every request of the stage. */
  context?: string;
  /** A field of each element shown as that request's own context. */
  contextField?: string;
  /** No decision within this long: expired (or escalated, when `escalation` is set). */
  ttlMs: number | null;
  onReject: OnReject;
  /** After the TTL the request goes to a second group of reviewers; after theirs, the default decision. */
  escalation?: { to: string; ttlMs: number; default: 'approve' | 'reject' };
  /** The reviewer group the request is first addressed to (shown in listings). */
  reviewers?: string;
}

/** A decision on a request: the `decideApproval` update's and the `approval` signal's argument. */
export interface ApprovalDecision {
  id: string;
  decision: 'approve' | 'reject';
  by?: string;
  reason?: string;
  /** The reviewer group `by` decided for (the inbox sets it); recorded in the history for the audit only. */
  group?: string;
}

/** What the update returns to the caller. */
export interface ApprovalDecided {
  id: string;
  itemId: string;
  step: string;
  status: 'approved' | 'rejected';
  decidedBy: string;
  /** Set by the client when the same decision was sent again: the first one's answer; the repeat changed nothing. */
  repeated?: true;
}

/** The memo entry listings read (pending requests only, payloads left out). */
export interface ApprovalsMemo {
  pipeline: string;
  requests: Omit<ApprovalRequest, 'payload' | 'result'>[];
  omitted: number;
}

/** Memo key of {@link ApprovalsMemo}. */
export const APPROVALS_MEMO_KEY = 'treadleApprovals';

/** How an approval step's activities end their summaries (`<stage> · attempt n/m · <this>`): the audit reads them. */
export const APPROVAL_REQUESTS_SUMMARY = 'approval requests';
export const APPROVAL_OUTCOME_SUMMARY = 'approval outcome';

/** Activity that turns an approval stage's input into requests: validated payloads, ids, idempotency keys. */
export const APPROVAL_CREATE_ACTIVITY = 'treadle.approvalCreate';
/** Activity that executes an approved request's action, idempotently. */
export const APPROVAL_EXECUTE_ACTIVITY = 'treadle.approvalExecute';

export interface ApprovalCreateInput {
  itemId: string;
  runId: string;
  step: string;
  /** The stage attempt; part of the ids, so that a second attempt's requests are new ones. */
  attempt: number;
  config: Json;
  /** The upstream artefacts (possibly blob references). */
  upstream: Record<string, Json>;
  /** The work item's input (possibly a reference): the actions' source when the stage has no dependency. */
  input: Json;
}

export type ApprovalCreateResult =
  | {
      ok: true;
      config: ApprovalStageConfig;
      requests: Pick<ApprovalRequest, 'id' | 'actionType' | 'payload' | 'summary' | 'context' | 'idempotencyKey'>[];
    }
  /** Every problem with the items (unknown action types, invalid payloads), each naming the element. */
  | { ok: false; problems: string[] };

export interface ApprovalExecuteInput {
  id: string;
  itemId: string;
  step: string;
  actionType: string;
  payload: Json;
  idempotencyKey: string;
}

export interface ApprovalExecuteResult {
  result: Json;
  summary: string;
}

/** Refuses a decision the workflow cannot take; the update's validator uses it, so refusals never enter history. */
export function checkApprovalDecision(
  requests: readonly ApprovalRequest[],
  itemId: string,
  payload: unknown,
): { ok: true; decision: ApprovalDecision; request: ApprovalRequest } | { ok: false; error: string } {
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload))
    return { ok: false, error: 'a decision is an object: {id, decision: "approve" | "reject", by?, reason?}' };
  const raw = payload as Record<string, unknown>;
  const problems: string[] = [];
  if (typeof raw.id !== 'string' || raw.id === '') problems.push('id: must name an approval request');
  if (raw.decision !== 'approve' && raw.decision !== 'reject')
    problems.push(`decision: must be "approve" or "reject", got ${JSON.stringify(raw.decision)}`);
  if (raw.by !== undefined && typeof raw.by !== 'string') problems.push('by: must be a string');
  if (raw.reason !== undefined && typeof raw.reason !== 'string') problems.push('reason: must be a string');
  if (problems.length > 0) return { ok: false, error: `invalid decision: ${problems.join('; ')}` };
  const id = raw.id as string;
  const request = requests.find((r) => r.id === id);
  if (!request) {
    const pending = requests.filter((r) => r.status === 'pending').map((r) => r.id);
    return {
      ok: false,
      error: `work item ${itemId} has no approval request ${id} (${pending.length > 0 ? `pending: ${pending.join(', ')}` : 'none is pending'})`,
    };
  }
  if (request.status !== 'pending') {
    return {
      ok: false,
      error: `approval request ${id} is already ${request.status}${request.decidedBy ? ` (by ${request.decidedBy}${request.decidedAt ? ` at ${request.decidedAt}` : ''})` : ''}`,
    };
  }
  const decision: ApprovalDecision = { id, decision: raw.decision as 'approve' | 'reject' };
  if (typeof raw.by === 'string' && raw.by !== '') decision.by = raw.by;
  if (typeof raw.reason === 'string' && raw.reason !== '') decision.reason = raw.reason;
  return { ok: true, decision, request };
}

/** The artefact of an approval stage: every request's outcome, in request order. */
export interface ApprovalStageArtefact {
  requests: {
    id: string;
    actionType: string;
    status: ApprovalStatus;
    decidedBy?: string;
    reason?: string;
    result?: Json;
    error?: string;
  }[];
  approved: number;
  rejected: number;
  expired: number;
}
