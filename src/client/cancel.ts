/**
 * `TreadleClient.cancel` (issue 40): the item records who cancels it and why (the `cancelItem` update, which a
 * worker validates: a finished item refuses), then its run is cancelled through Temporal, which cancels its
 * stages' activities, its children (fan-out elements, TDD nodes, loops) and its waits for people.
 */
import { WorkflowUpdateFailedError, type Client, type WorkflowHandle } from '@temporalio/client';
import { cancelItemUpdate } from '../workflow-kit/messages';
import { isNotFound, TreadleError } from './errors';
import { updatedByWorker } from './worker-presence';

/** Who cancels and why (`treadle cancel <id> --by ann --reason "…"`). */
export interface CancelOptions {
  /** Why, in a line; shown by `treadle status` and the inbox. */
  reason?: string;
  /** Who cancels (default `TREADLE_REVIEWER`, else `USER`). */
  by?: string;
}

/** What {@link cancelItem} answers. */
export interface CancelOutcome {
  id: string;
  by: string;
  reason?: string;
  /**
   * Whether the workflow recorded who and why: a work item does; a TDD tree's root or a loop stage's own workflow
   * (cancelled by its id) is cancelled through Temporal alone.
   */
  recorded: boolean;
  /** Whether the run had ended as cancelled within the client's review timeout (it normally ends within seconds). */
  closed: boolean;
}

/** What cancelling needs of the client. */
export interface CancelContext {
  client: Client;
  answerWaitMs: number;
  timeoutMs: number;
}

/** The workflow type of work items: the only one that answers `cancelItem`. */
const WORK_ITEM_TYPE = 'workItem';

/**
 * Cancels work item `id` as `by`: the update records who and why (refused, code `invalid_input`, for an item that
 * has finished), then Temporal's cancellation is requested and waited for up to `timeoutMs`. With no worker
 * answering, nothing is sent (`no_worker`): who and why could not be recorded. A TDD tree's root or a loop stage's
 * workflow is cancelled through Temporal alone (they have no `cancelItem`).
 */
export async function cancelItem(
  context: CancelContext,
  handle: WorkflowHandle,
  by: string,
  reason: string | undefined,
): Promise<CancelOutcome> {
  const { client, answerWaitMs, timeoutMs } = context;
  const id = handle.workflowId;
  const request = { by, ...(reason !== undefined ? { reason } : {}) };
  // One describe first: a closed run is refused without asking a worker, and only work items take the update.
  const described = await handle.describe();
  if (described.status.name !== 'RUNNING') throw finished(id, described.status.name);
  const recorded = described.type === WORK_ITEM_TYPE;
  let accepted: { by: string; reason?: string } = request;
  if (recorded)
    try {
      accepted = await updatedByWorker(client, id, {
        what: `the cancel of ${id}`,
        send: (updateId) => handle.executeUpdate(cancelItemUpdate, { args: [request], updateId }),
        answerWaitMs,
        timeoutMs,
        // A cancel repeated after its first try recorded who and why but lost its answer goes on from there.
        repeatOf: { name: cancelItemUpdate.name, arg: request, subject: () => 'cancel' },
      });
    } catch (error) {
      throw await refusal(error, handle);
    }
  try {
    await handle.cancel();
  } catch (error) {
    // The item finished between the update and the cancellation: it was not cancelled, and says so.
    throw await refusal(error, handle);
  }
  const closed = await client
    .withAbortSignal(AbortSignal.timeout(timeoutMs), () => handle.result())
    .then(
      () => true,
      () => handle.describe().then((d) => d.status.name !== 'RUNNING'),
    )
    .catch(() => false);
  return {
    id,
    by: accepted.by,
    ...(accepted.reason !== undefined ? { reason: accepted.reason } : {}),
    recorded,
    closed,
  };
}

/** What a refused or failed cancel throws: the item's refusal, "has already …" for a closed one, else `error`. */
async function refusal(error: unknown, handle: WorkflowHandle): Promise<unknown> {
  if (error instanceof WorkflowUpdateFailedError)
    return new TreadleError(`cancel refused: ${error.cause?.message ?? error.message}`, 'invalid_input');
  if (isNotFound(error)) {
    // The id may name a finished item rather than no item at all; say which.
    const status = await handle.describe().then(
      (d) => d.status.name,
      () => undefined,
    );
    if (status !== undefined && status !== 'RUNNING') return finished(handle.workflowId, status);
  }
  return error;
}

/** The refusal of a cancel of a run that has closed (exit 2 in the CLI). */
function finished(id: string, status: string): TreadleError {
  return new TreadleError(
    `cancel refused: work item ${id} has already ${finishedAs(status)}; there is nothing to cancel`,
    'invalid_input',
  );
}

/** A closed execution's status as the item's own words say it ("completed", "failed", "cancelled"). */
function finishedAs(status: string): string {
  const words: Record<string, string> = {
    COMPLETED: 'completed',
    FAILED: 'failed',
    CANCELLED: 'cancelled',
    TERMINATED: 'been terminated',
    TIMED_OUT: 'timed out',
    CONTINUED_AS_NEW: 'continued as new',
  };
  return words[status] ?? status.toLowerCase();
}
