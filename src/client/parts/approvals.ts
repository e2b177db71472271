/**
 * `client.approvals`: approval requests (an approval stage's action waiting for a person) — list them, read one
 * with its payload, approve or reject one. `TreadleClient.listApprovals`, `getApproval` and `decideApproval` are
 * aliases.
 */
import { WorkflowUpdateFailedError, type WorkflowHandle } from '@temporalio/client';
import { resolveArtefact } from '../../storage/blob-store';
import type { ApprovalDecided, ApprovalDecision, ApprovalRequest } from '../../kinds/approval/shapes';
import { decideApprovalUpdate } from '../../kinds/approval/messages';
import { defaultReviewer, isNotFound, TreadleError } from '../errors';
import { listApprovals, type ApprovalListing } from '../listings';
import { updatedByWorker } from '../worker-presence';
import { describeDecision, recordedApproval } from '../recorded-decisions';
import { AlreadyDecidedError } from '../../config/errors';
import { approvalItem, decidedBefore } from '../on-demand';
import { ClientPart } from './context';

/** The approvals part of `TreadleClient` (`client.approvals`). */
export class ApprovalsClient extends ClientPart {
  /**
   * Pending approval requests across all work items, from visibility alone (one listing call: each waiting
   * item's memo carries its first 50 requests; `treadle status` shows all). Payloads are left out: read
   * them with {@link get}. Eventually consistent, like `decisions.listReviews`.
   */
  async list(options: { pipeline?: string } = {}): Promise<ApprovalListing[]> {
    return listApprovals(this.context.client, options).catch(this.context.rethrow);
  }

  /** An approval request with its payload resolved (for reviewing it); `status` says whether it is still pending. */
  async get(id: string): Promise<ApprovalRequest> {
    const itemId = await approvalItem(this.context.client, id);
    const state = await this.parts.items.state(itemId, { eventLimit: 1 });
    const request = state.approvals?.find((r) => r.id === id);
    if (!request) throw new TreadleError(`work item ${itemId} has no approval request ${id}`, 'not_found');
    return { ...request, payload: (await resolveArtefact(request.payload, this.context.blobs)) ?? null };
  }

  /**
   * Approves or rejects a pending approval request by id. A request already decided (or expired) is refused
   * saying how it was decided (by whom, what, when); an id no item has is "not found". Nothing enters the history.
   * With no worker answering within `answerWaitMs` nothing is sent: a TreadleError `no_worker`, or an
   * {@link AlreadyDecidedError} when the item's history shows the request was decided already.
   */
  async decide(
    id: string,
    decision: 'approve' | 'reject',
    options: { by?: string; reason?: string; group?: string } = {},
  ): Promise<ApprovalDecided> {
    const { client, answerWaitMs, reviewTimeoutMs } = this.context;
    const itemId = await approvalItem(client, id);
    const payload: ApprovalDecision = {
      id,
      decision,
      by: options.by ?? defaultReviewer(),
      ...(options.reason !== undefined ? { reason: options.reason } : {}),
      // The reviewer group decided for: kept in the update's argument for the audit; the workflow ignores it.
      ...(options.group ? { group: options.group } : {}),
    };
    return this.context.call(itemId, async (h) => {
      try {
        return await updatedByWorker(client, itemId, {
          what: `the decision on ${id} (work item ${itemId})`,
          send: (updateId) => h.executeUpdate(decideApprovalUpdate, { args: [payload], updateId }),
          answerWaitMs,
          timeoutMs: reviewTimeoutMs,
          // The same decision sent again (its first answer lost to a server failure) gets the first one's answer.
          repeatOf: { name: decideApprovalUpdate.name, arg: payload, subject: (a) => (a as { id?: unknown }).id },
        });
      } catch (error) {
        throw await this.refusal(error, h, id, itemId);
      }
    });
  }

  /** What a decision that failed throws: the refusal's reason, or who decided first when the item knows. */
  private async refusal(error: unknown, h: WorkflowHandle, id: string, itemId: string): Promise<unknown> {
    const { client } = this.context;
    if (error instanceof WorkflowUpdateFailedError)
      return new TreadleError(`decision refused: ${error.cause?.message ?? error.message}`, 'invalid_review');
    // The item exists (visibility found it) but takes no more updates: it has finished.
    if (isNotFound(error)) return decidedBefore(client, id, itemId);
    if (error instanceof TreadleError && error.code === 'no_worker') {
      // Nothing was sent; the history may still say who decided first.
      const description = await h.describe().catch(() => undefined);
      const recorded = description && (await recordedApproval(client, itemId, id, description).catch(() => undefined));
      if (recorded)
        return new AlreadyDecidedError(
          `decision refused: approval request ${id} is already ${describeDecision(recorded)} (as work item ${itemId}'s history records)`,
          recorded,
        );
      if (description && description.status.name !== 'RUNNING') return decidedBefore(client, id, itemId, 0);
    }
    return error;
  }
}
