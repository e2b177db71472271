/**
 * No worker, no answer: queries and updates are answered by a worker, and with none polling the item's task
 * queue Temporal holds them for half a minute before failing. A call that is slow to answer has the queue's
 * pollers checked (DescribeTaskQueue), so "no worker" is said within seconds instead; and what Temporal
 * answers without a worker (visibility, memo, a closed item's result) is read here too.
 */
import {
  ApplicationFailure,
  QueryNotRegisteredError,
  QueryRejectedError,
  WorkflowFailedError,
  WorkflowUpdateFailedError,
  type Client,
  type WorkflowHandle,
} from '@temporalio/client';
import type { temporal } from '@temporalio/proto';
import { TDD_TREE_FAILED } from '../kinds/tdd/shapes';
import { REVIEWS_MEMO_KEY, TreadlePipeline, TreadleStatus } from '../model/search-attributes';
import { WORK_ITEM_FAILED, type ReviewsMemo, type WorkItemResult } from '../model/state';
import { workerCommandFor } from '../task-queues';
import { isUpdateUnanswered } from './errors';
import { TreadleError } from './treadle-error';

/** How long a query or update may take before the item's queue is checked for a worker (a worker answers in ms). */
const WORKER_CHECK_AFTER_MS = 1_000;
// temporal.api.enums.v1 values, written out: the proto package is the SDK's, not a dependency of ours.
const TASK_QUEUE_TYPE_WORKFLOW = 1 as temporal.api.enums.v1.TaskQueueType;
const TASK_QUEUE_KIND_NORMAL = 1 as temporal.api.enums.v1.TaskQueueKind;
const DESCRIBE_MODE_ENHANCED = 1 as temporal.api.enums.v1.DescribeTaskQueueMode;

/**
 * The identities of the workers that polled `taskQueue` for workflow tasks lately (Temporal keeps about a
 * minute), over all of the queue's partitions. A queue has several: the plain description reads only the root
 * one, whose list stays empty after a server restart while the workers' polls wait on the others.
 */
export async function pollersOf(client: Client, taskQueue: string): Promise<string[]> {
  const request = { namespace: client.options.namespace, taskQueue: { name: taskQueue, kind: TASK_QUEUE_KIND_NORMAL } };
  try {
    const response = await client.workflowService.describeTaskQueue({
      ...request,
      apiMode: DESCRIBE_MODE_ENHANCED,
      reportPollers: true,
      taskQueueTypes: [TASK_QUEUE_TYPE_WORKFLOW],
    });
    return Object.values(response.versionsInfo ?? {})
      .flatMap((version) => version.typesInfo?.[String(TASK_QUEUE_TYPE_WORKFLOW)]?.pollers ?? [])
      .map((p) => p.identity ?? '?');
  } catch {
    // A server without the enhanced description: the root partition's list.
    const response = await client.workflowService.describeTaskQueue({
      ...request,
      taskQueueType: TASK_QUEUE_TYPE_WORKFLOW,
    });
    return (response.pollers ?? []).map((p) => p.identity ?? '?');
  }
}

/** The message for a task queue no worker polls, with the command that starts a worker on that queue. */
export function noWorkerMessage(taskQueue: string): string {
  return `no worker is polling task queue ${taskQueue}; start one with \`${workerCommandFor(taskQueue)}\``;
}

/**
 * Runs a query or update of workflow `id`; if it has not answered after {@link WORKER_CHECK_AFTER_MS}, or
 * failed, checks the execution's task queue and, when no worker polls it, aborts the call and rejects at once
 * (a TreadleError `no_worker`). With a worker seen, the call keeps its own time (at most `timeoutMs` when given)
 * and its own errors.
 */
export async function answeredByWorker<T>(
  client: Client,
  id: string,
  call: () => Promise<T>,
  timeoutMs?: number,
): Promise<T> {
  // Aborted, the call stops retrying too: a CLI command ends at once instead of holding its connection open.
  const abandon = new AbortController();
  const signal =
    timeoutMs === undefined ? abandon.signal : AbortSignal.any([abandon.signal, AbortSignal.timeout(timeoutMs)]);
  // A call that fails at once (a query of a closed workflow nobody polls for) is "no worker" too.
  const answer = client.withAbortSignal(signal, call).catch(async (error: unknown) => {
    // A worker gave this answer (an update's validator or handler refused, a query the workflow does not know).
    if (answeredByAWorker(error)) throw error;
    const queue = await queueWithoutWorker(client, id).catch(() => undefined);
    throw queue !== undefined ? new TreadleError(noWorkerMessage(queue), 'no_worker') : error;
  });
  let timer: NodeJS.Timeout | undefined;
  const absent = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      void queueWithoutWorker(client, id).then(
        (queue) => {
          if (queue === undefined) return;
          reject(new TreadleError(noWorkerMessage(queue), 'no_worker'));
          abandon.abort();
        },
        // The check is a courtesy: when it cannot answer, the call keeps waiting as it would have.
        () => undefined,
      );
    }, WORKER_CHECK_AFTER_MS);
  });
  try {
    return await Promise.race([answer, absent]);
  } finally {
    clearTimeout(timer);
    // Left behind when "no worker" won the race: its own failure later is nobody's business.
    answer.catch(() => undefined);
  }
}

/**
 * A query of workflow `id` as {@link answeredByWorker} runs it, with a bound: a worker seen polling that has not
 * answered within `timeoutMs` is given up on, a TreadleError `unreachable` (without a bound, nothing changes).
 */
export async function queriedWithin<T>(
  client: Client,
  id: string,
  query: () => Promise<T>,
  timeoutMs?: number,
): Promise<T> {
  try {
    return await answeredByWorker(client, id, query, timeoutMs);
  } catch (error) {
    if (timeoutMs === undefined || !isUpdateUnanswered(error)) throw error;
    throw new TreadleError(
      `no worker answered the query of ${id} within ${Math.round(timeoutMs / 1000)}s`,
      'unreachable',
    );
  }
}

/** Whether a call's failure came from a worker: then one polls, and there is nothing to check. */
function answeredByAWorker(error: unknown): boolean {
  return (
    error instanceof WorkflowUpdateFailedError ||
    error instanceof QueryRejectedError ||
    error instanceof QueryNotRegisteredError
  );
}

/** How many times, {@link ABSENCE_RECHECK_MS} apart, a queue must show no poller before "no worker" is said. */
const ABSENCE_CHECKS = 4;
const ABSENCE_RECHECK_MS = 500;

/**
 * Whether no worker polls `taskQueue`. One empty answer is not enough: right after a server restart the list
 * is empty until each worker's next poll reaches it, though the workers are there; an absence that lasts
 * {@link ABSENCE_CHECKS} checks is.
 */
export async function noWorkerPolls(client: Client, taskQueue: string): Promise<boolean> {
  for (let check = 1; ; check++) {
    if ((await pollersOf(client, taskQueue)).length > 0) return false;
    if (check === ABSENCE_CHECKS) return true;
    await new Promise((resolve) => setTimeout(resolve, ABSENCE_RECHECK_MS));
  }
}

/**
 * The task queue of workflow `id` when no worker polls it, else undefined. An empty poller list is not proof
 * on its own: after a server restart a worker may serve the workflow from its sticky queue while its polls of
 * the normal queue wait out their backoff (up to ten seconds), so a workflow task a worker completed for this
 * workflow lately says a worker is there.
 */
async function queueWithoutWorker(client: Client, id: string): Promise<string | undefined> {
  const { taskQueue } = await client.workflow.getHandle(id).describe();
  if (!(await noWorkerPolls(client, taskQueue))) return undefined;
  return (await servedLately(client, id)) ? undefined : taskQueue;
}

/** How recent a completed workflow task must be to show that a worker serves the workflow. */
const SERVED_LATELY_MS = 60_000;
/** The last events read for it (a task's completion is followed by the few events its commands made). */
const SERVED_LATELY_EVENTS = 20;
const EVENT_TYPE_WORKFLOW_TASK_COMPLETED = 7 as temporal.api.enums.v1.EventType;

/** Whether a worker completed a workflow task of `id` in the last {@link SERVED_LATELY_MS}. */
async function servedLately(client: Client, id: string): Promise<boolean> {
  try {
    const { history } = await client.workflowService.getWorkflowExecutionHistoryReverse({
      namespace: client.options.namespace,
      execution: { workflowId: id },
      maximumPageSize: SERVED_LATELY_EVENTS,
    });
    const since = Date.now() - SERVED_LATELY_MS;
    return (history?.events ?? []).some(
      (event) =>
        event.eventType === EVENT_TYPE_WORKFLOW_TASK_COMPLETED &&
        Number(event.eventTime?.seconds ?? 0) * 1_000 >= since,
    );
  } catch {
    // No evidence either way: the poller check stands.
    return false;
  }
}

/** What Temporal knows of a work item or TDD node without a worker. */
export interface VisibleItem {
  id: string;
  /** Temporal's status: RUNNING, COMPLETED, FAILED, CANCELLED, TERMINATED, … */
  execution: string;
  type: string;
  taskQueue: string;
  pipeline?: string;
  /** The TreadleStatus search attribute: running, waiting_review, waiting_approval, … */
  status?: string;
  /** From the reviews memo (messages cut short). */
  pendingReviews: ReviewsMemo['reviews'];
  /** A closed item's result (its own, or the one its failure carries). */
  result?: WorkItemResult;
  /** A closed workflow's failure when it carries no result (an engine error, a termination). */
  failure?: string;
}

/** {@link VisibleItem} of workflow `id`: one describe, and for a closed one its result from its history. */
export async function visibleItem(client: Client, id: string): Promise<VisibleItem> {
  const handle = client.workflow.getHandle(id);
  const description = await handle.describe();
  const execution = description.status.name;
  const memo = description.memo?.[REVIEWS_MEMO_KEY] as ReviewsMemo | undefined;
  const closed = execution !== 'RUNNING' && execution !== 'CONTINUED_AS_NEW';
  const ended = closed
    ? await resultOf<WorkItemResult>(handle).then(
        (result) => ({ result }),
        (error: unknown) => ({
          failure:
            error instanceof Error ? ((error.cause as Error | undefined)?.message ?? error.message) : String(error),
        }),
      )
    : {};
  const pipeline = description.typedSearchAttributes.get(TreadlePipeline);
  const status = description.typedSearchAttributes.get(TreadleStatus);
  return {
    id,
    execution,
    type: description.type,
    taskQueue: description.taskQueue,
    ...(pipeline !== undefined ? { pipeline } : {}),
    ...(status !== undefined ? { status } : {}),
    pendingReviews: closed ? [] : (memo?.reviews ?? []),
    ...ended,
  };
}

/** The failure types whose first detail is the workflow's result (a work item's, a TDD node's). */
const RESULT_FAILURES: ReadonlySet<string> = new Set([WORK_ITEM_FAILED, TDD_TREE_FAILED]);

/**
 * A workflow's result: what it returned, or the result a failed item or tree carries as its failure's first
 * detail (engine 6's `WorkItemFailed`, `TddTreeFailed`); any other failure is thrown.
 */
export async function resultOf<T>(handle: WorkflowHandle): Promise<T> {
  try {
    return (await handle.result()) as T;
  } catch (error) {
    const cause = error instanceof WorkflowFailedError ? error.cause : undefined;
    const carriesResult = cause instanceof ApplicationFailure && RESULT_FAILURES.has(cause.type ?? '');
    if (carriesResult && cause.details?.[0] !== undefined) return cause.details[0] as T;
    throw error;
  }
}
