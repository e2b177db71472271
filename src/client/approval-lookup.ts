/**
 * Finding an approval request's work item by the request's id, and explaining why a request of a finished
 * item can no longer be decided (how it was decided, by whom, when).
 */
import type { Client } from '@temporalio/client';
import { listExecutions } from './visibility';
import { APPROVAL_ID_PATTERN } from '../kinds/approval/shapes';
import type { WorkItemState } from '../model/state';
import { stateQuery } from '../workflow-kit/messages';
import { TreadleError } from './errors';
import { describeDecision, recordedApproval } from './recorded-decisions';

/** How long a refused decision waits for a worker to say how a finished item's request was decided. */
const DECIDED_QUERY_WAIT_MS = 5_000;

/** The work item holding an approval request (pending or decided), found in visibility by the request's id. */
export async function approvalItem(client: Client, id: string): Promise<string> {
  if (!APPROVAL_ID_PATTERN.test(id))
    throw new TreadleError(
      `"${id}" is not an approval id (they look like ap-7k3m9q2xwd; see treadle approve list)`,
      'invalid_review',
    );
  for await (const execution of listExecutions(client, `TreadleApprovals = '${id}'`, 2)) return execution.workflowId;
  const hint = 'treadle approve list shows the pending ones';
  const message = `approval request ${id} not found: no work item has it (${hint})`;
  throw new TreadleError(message, 'not_found');
}

/**
 * Why a request of an item that has finished cannot be decided: how it was decided (by whom, what, when), from the
 * item's last state when a worker answers the query within `queryWaitMs` (0: ask none), else from the decisions in
 * its history.
 */
export async function decidedBefore(
  client: Client,
  id: string,
  itemId: string,
  queryWaitMs = DECIDED_QUERY_WAIT_MS,
): Promise<TreadleError> {
  const handle = client.workflow.getHandle(itemId);
  const description = await handle.describe();
  const query = (): Promise<WorkItemState> => handle.query(stateQuery, { eventLimit: 1 });
  const state =
    queryWaitMs > 0 ? await client.withDeadline(Date.now() + queryWaitMs, query).catch(() => undefined) : undefined;
  const request = state?.approvals?.find((r) => r.id === id);
  let how: string | undefined;
  if (request && request.status !== 'pending') {
    const by = request.decidedBy ? ` by ${request.decidedBy}` : '';
    const at = request.decidedAt ? ` at ${request.decidedAt}` : '';
    how = `${request.status}${by}${at}${request.reason ? `: ${request.reason}` : ''}`;
  } else {
    // No worker answered: the decision as the history recorded it (expiries are timers, not decisions).
    const recorded = await recordedApproval(client, itemId, id);
    if (recorded) how = describeDecision(recorded);
  }
  const ended = `work item ${itemId} has finished (${description.status.name.toLowerCase()})`;
  const message = `decision refused: approval request ${id} is already ${how ?? 'decided'}; ${ended}`;
  return new TreadleError(message, 'invalid_review');
}
