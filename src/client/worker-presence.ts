/**
 * No worker, no answer: queries and updates are answered by a worker, and with none running Temporal holds them
 * for half a minute before failing. Temporal's poller list cannot tell: it keeps a stopped worker for about a
 * minute. So a call that gets no answer within {@link WORKER_ANSWER_WAIT_MS} is given up on, whatever the list
 * says, and the caller says so and falls back on what Temporal answers without a worker (visibility, memo,
 * history, a closed item's result), read here too.
 */
import { randomUUID } from 'node:crypto';
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
import { APPROVALS_MEMO_KEY, type ApprovalsMemo } from '../kinds/approval/shapes';
import { TDD_TREE_FAILED } from '../kinds/tdd/shapes';
import { itemPriorityOf, type ItemPriority } from '../model/priority';
import { REVIEWS_MEMO_KEY, TreadlePipeline, TreadleStatus } from '../model/search-attributes';
import { WORK_ITEM_FAILED, type ReviewsMemo, type WorkItemResult } from '../model/state';
import { workerCommandFor } from '../worker/task-queues';
import { isNotFound, isUpdateUnanswered } from './errors';
import { acceptedUpdate, repeatedUpdateId, type RepeatOf } from './repeated-updates';
import { TreadleError } from '../config/errors';
import { serverTroubleStatus } from '../config/connection';

/**
 * How long a query or update may go unanswered before Treadle says no worker answered: a running worker answers in
 * milliseconds, and a command must still answer within 5 s (CLI start and the fallback read included).
 */
export const WORKER_ANSWER_WAIT_MS = 2_000;

/** How long the check for a worker after an unanswered call may take (a server in trouble retries each call). */
const PRESENCE_CHECK_MS = 10_000;
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
  let enhanced: string[] = [];
  try {
    const response = await client.workflowService.describeTaskQueue({
      ...request,
      apiMode: DESCRIBE_MODE_ENHANCED,
      reportPollers: true,
      taskQueueTypes: [TASK_QUEUE_TYPE_WORKFLOW],
    });
    enhanced = Object.values(response.versionsInfo ?? {})
      .flatMap((version) => version.typesInfo?.[String(TASK_QUEUE_TYPE_WORKFLOW)]?.pollers ?? [])
      .map((p) => p.identity ?? '?');
  } catch {
    // A server without the enhanced description: the root partition's list below.
  }
  if (enhanced.length > 0) return enhanced;
  // The enhanced description leaves out workers with a deployment version (server 1.29: its one entry, "", has no
  // pollers); the plain one lists them, with the root partition's other pollers.
  const response = await client.workflowService.describeTaskQueue({
    ...request,
    taskQueueType: TASK_QUEUE_TYPE_WORKFLOW,
  });
  return (response.pollers ?? []).map((p) => p.identity ?? '?');
}

/** The message for a task queue no worker polls, with the command that starts a worker on that queue. */
export function noWorkerMessage(taskQueue: string): string {
  return `no worker is polling task queue ${taskQueue}; start one with \`${workerCommandFor(taskQueue)}\``;
}

/** The message for a call no worker answered within `waitMs`, with the command that starts one on `taskQueue`. */
export function noAnswerMessage(taskQueue: string, waitMs: number): string {
  const within = `${Math.round(waitMs / 100) / 10}s`;
  return `no worker answered on task queue ${taskQueue} within ${within}; start one with \`${workerCommandFor(taskQueue)}\``;
}

/**
 * Runs a query or update of workflow `id` and gives up on it when no worker has answered within `waitMs`
 * (default {@link WORKER_ANSWER_WAIT_MS}): a TreadleError `no_worker` naming the execution's task queue. A call
 * that fails at once (a query of a closed workflow nobody polls for) is `no_worker` too when no worker polls the
 * queue; a worker's own refusal (an update's validator, a query the workflow does not know) passes through.
 */
export async function answeredByWorker<T>(
  client: Client,
  id: string,
  call: () => Promise<T>,
  waitMs: number = WORKER_ANSWER_WAIT_MS,
): Promise<T> {
  // Aborted, the call stops retrying too: a CLI command ends at once instead of holding its connection open.
  const unanswered = new AbortController();
  const timer = setTimeout(() => unanswered.abort(), waitMs);
  // Unanswered halfway, the call may well go unanswered: the queue its message names is read meanwhile.
  let taskQueue: Promise<string> | undefined;
  const halfway = setTimeout(() => {
    taskQueue = client.workflow
      .getHandle(id)
      .describe()
      .then((d) => d.taskQueue);
    taskQueue.catch(() => undefined);
  }, waitMs / 2);
  try {
    return await client.withAbortSignal(unanswered.signal, call);
  } catch (error) {
    // A worker gave this answer (an update's validator or handler refused, a query the workflow does not know).
    if (answeredByAWorker(error)) throw error;
    if (unanswered.signal.aborted && isUpdateUnanswered(error)) {
      const queue = await (taskQueue ??
        client.workflow
          .getHandle(id)
          .describe()
          .then((d) => d.taskQueue));
      throw new TreadleError(noAnswerMessage(queue, waitMs), 'no_worker');
    }
    // The server itself could not do the call (restarting, its database down): whether a worker polls is moot.
    if (serverTroubleStatus(error)) throw error;
    const queue = await client
      .withAbortSignal(AbortSignal.timeout(PRESENCE_CHECK_MS), () => queueWithoutWorker(client, id))
      .catch(() => undefined);
    throw queue !== undefined ? new TreadleError(noWorkerMessage(queue), 'no_worker') : error;
  } finally {
    clearTimeout(timer);
    clearTimeout(halfway);
  }
}

/**
 * The SDK's own query, which every workflow answers: asked before an update, it tells whether a worker runs the
 * workflow now, at no cost to its history.
 */
const WORKFLOW_METADATA_QUERY = '__temporal_workflow_metadata';

/** An update for {@link updatedByWorker}: what it is, for messages, and how to send it. */
export interface UpdateCall<T> {
  /** What is sent, as a message names it: "the review of draft of item-1". */
  what: string;
  /** Sends the update with this id (by its id, the history tells whether a worker accepted it). */
  send: (updateId: string) => Promise<T>;
  /** How long a worker may take to show it is there (default {@link WORKER_ANSWER_WAIT_MS}). */
  answerWaitMs?: number;
  /** How long the update may take once a worker has shown it is there. */
  timeoutMs: number;
  /**
   * How to recognise this update as the repeat of one the workflow accepted before: refused now ("not waiting",
   * the item finished), it gets that one's outcome instead (see repeated-updates.ts).
   */
  repeatOf?: RepeatOf;
}

/**
 * Sends an update to workflow `id` only once a worker has answered a query of it. An update no worker takes is not
 * dropped: the server keeps it (admitted, in memory) and hands it to the next worker that runs the workflow, which
 * may apply it minutes later. Asking first makes "not sent" the truth: with no answer within the wait, nothing
 * is sent (a TreadleError `no_worker`, "… was not sent: no worker answered …"). An update that then gets no answer
 * within `timeoutMs` (the worker stopped in between) is `unreachable`, saying whether the workflow accepted it.
 */
export async function updatedByWorker<T>(client: Client, id: string, update: UpdateCall<T>): Promise<T> {
  const handle = client.workflow.getHandle(id);
  try {
    await answeredByWorker(client, id, () => handle.query(WORKFLOW_METADATA_QUERY), update.answerWaitMs);
  } catch (error) {
    if (error instanceof TreadleError && error.code === 'no_worker') throw notSent(update.what, error);
    throw error;
  }
  const send = (updateId: string) =>
    client.withAbortSignal(AbortSignal.timeout(update.timeoutMs), () => update.send(updateId));
  const updateId = randomUUID();
  try {
    return await send(updateId);
  } catch (error) {
    const earlier = update.repeatOf && refused(error) ? await repeatedUpdate(client, id, update.repeatOf) : undefined;
    if (earlier) return asRepeat(await send(earlier));
    if (!isUpdateUnanswered(error)) throw error;
    const within = `${Math.round(update.timeoutMs / 100) / 10}s`;
    const status = `see \`treadle status ${id}\``;
    const message = (await acceptedUpdate(client, id, updateId))
      ? `${update.what} was accepted by ${id} but not completed within ${within}; it completes when a worker runs the item (${status})`
      : `${update.what} was not delivered within ${within}: no worker took it, and Temporal keeps it for the next worker that runs ${id}, which may still apply it (${status} before sending it again)`;
    throw new TreadleError(message, 'unreachable');
  }
}

/** Whether the workflow refused an update: its validator or handler did, or it has closed. */
const refused = (error: unknown): boolean => error instanceof WorkflowUpdateFailedError || isNotFound(error);

/** An earlier update's answer, marked `repeated: true` (an object's; ReviewAccepted and ApprovalDecided say so). */
const asRepeat = <T>(answer: T): T =>
  typeof answer === 'object' && answer !== null ? { ...answer, repeated: true } : answer;

/** {@link repeatedUpdateId}, or undefined when the history cannot be read. */
const repeatedUpdate = (client: Client, id: string, repeat: RepeatOf): Promise<string | undefined> =>
  repeatedUpdateId(client, id, repeat).catch(() => undefined);

/** `noAnswer` (a `no_worker` error) told of what was therefore not sent: "the review of … was not sent: …". */
export function notSent(what: string, noAnswer: TreadleError): TreadleError {
  return new TreadleError(`${what} was not sent: ${noAnswer.message}, then send it again`, 'no_worker');
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
export async function queueWithoutWorker(client: Client, id: string): Promise<string | undefined> {
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
export interface VisibleItem extends ItemPriority {
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
  /** Pending approval requests, from the approvals memo (without their payloads). */
  pendingApprovals: ApprovalsMemo['requests'];
  /** A closed item's result (its own, or the one its failure carries). */
  result?: WorkItemResult;
  /** A closed workflow's failure when it carries no result (an engine error, a termination). */
  failure?: string;
}

/**
 * {@link VisibleItem} of workflow `id`: one describe (its search attributes, memo and priority), and for a closed
 * one its result.
 */
export async function visibleItem(client: Client, id: string): Promise<VisibleItem> {
  const handle = client.workflow.getHandle(id);
  const description = await handle.describe();
  const execution = description.status.name;
  const memo = description.memo?.[REVIEWS_MEMO_KEY] as ReviewsMemo | undefined;
  const approvals = description.memo?.[APPROVALS_MEMO_KEY] as ApprovalsMemo | undefined;
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
    pendingApprovals: closed ? [] : (approvals?.requests ?? []),
    ...itemPriorityOf(description.priority),
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
