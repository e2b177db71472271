/**
 * Cancelling a work item (issue 40): the `cancelItem` update's check, and how the item says who cancelled it
 * and why. Pure, so the workflow, the client and the unit tests share one wording.
 */
import { truncateText } from '../model/limits';
import type { ItemStatus, WorkItemState } from '../model/state';

/** Who a cancel is recorded as when the caller names no one (the client fills in its own default first). */
export const UNNAMED_CANCELLER = 'anonymous';

/** A cancel the item accepted: who, and why when they said. */
export interface AcceptedCancel {
  by: string;
  reason?: string;
}

/** The statuses after which an item has nothing left to cancel. */
const FINISHED: ReadonlySet<ItemStatus> = new Set<ItemStatus>(['completed', 'failed', 'cancelled']);

/**
 * Checks a `cancelItem` request against the item's status: a finished item is refused ("has already completed;
 * there is nothing to cancel"), as is a `by` or `reason` that is not a string. The reason is cut to the
 * history's text limit.
 */
export function checkCancel(
  itemId: string,
  status: ItemStatus,
  request: unknown,
): { ok: true; cancel: AcceptedCancel } | { ok: false; error: string } {
  if (FINISHED.has(status))
    return { ok: false, error: `work item ${itemId} has already ${status}; there is nothing to cancel` };
  const { by, reason } = (typeof request === 'object' && request !== null ? request : {}) as Record<string, unknown>;
  if (by !== undefined && (typeof by !== 'string' || by.trim() === ''))
    return {
      ok: false,
      error: `cancel: "by" must be a non-empty string naming who cancels, got ${JSON.stringify(by)}`,
    };
  if (reason !== undefined && typeof reason !== 'string')
    return { ok: false, error: `cancel: "reason" must be a string, got ${JSON.stringify(reason)}` };
  const said = reason?.trim();
  return {
    ok: true,
    cancel: { by: by?.trim() ?? UNNAMED_CANCELLER, ...(said ? { reason: truncateText(said) } : {}) },
  };
}

/** How the item's error and `treadle status` say it was cancelled: "cancelled by ann: out of scope". */
export function describeCancel(cancel: AcceptedCancel | undefined): string {
  if (cancel === undefined) return 'work item cancelled';
  return `work item cancelled by ${cancel.by}${cancel.reason !== undefined ? `: ${cancel.reason}` : ''}`;
}

/**
 * Engine 8's record of a cancel in the item's state: the error saying who and why (when a `cancelItem` update
 * came first), `cancelledBy` and `cancelReason`, and its approval requests and human stages' requests still
 * pending end `cancelled` (so they leave the listings; actions never run, answers are refused). Returns the error.
 */
export function recordCancel(state: WorkItemState, cancel: AcceptedCancel | undefined): string {
  state.error = describeCancel(cancel);
  if (cancel !== undefined) {
    state.cancelledBy = cancel.by;
    if (cancel.reason !== undefined) state.cancelReason = cancel.reason;
  }
  for (const approval of state.approvals ?? []) if (approval.status === 'pending') approval.status = 'cancelled';
  // A human stage's request leaves the listings too, and its answer is refused as for a decided one.
  for (const request of state.humanRequests ?? []) if (request.status === 'pending') request.status = 'cancelled';
  return state.error;
}
