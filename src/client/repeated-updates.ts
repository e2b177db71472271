/**
 * What a workflow's history says about updates it accepted, read without a worker. Temporal records each accepted
 * update with its id and argument, and answers a repeated id with the first one's outcome, even once the workflow
 * has closed (an update's id is its idempotency key). So a command repeated after its first try got no answer (the
 * server took the update, then failed before it could reply) can find its first try here and get that try's
 * outcome instead of a refusal ("not waiting", "already decided") of what it did itself.
 */
import { isDeepStrictEqual } from 'node:util';
import type { Client } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';
import { decodedPayload } from './recorded-decisions';

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;

/** How to recognise an update as the repeat of one the workflow accepted before. */
export interface RepeatOf {
  /** The update's name (`resolveReview`). */
  name: string;
  /** Its argument, as sent. */
  arg: unknown;
  /**
   * What the argument decides (a review's stage, an approval request's id): only the latest accepted update of the
   * same subject can be the one repeated, so a stage decided again since is not answered with an older decision.
   */
  subject: (arg: unknown) => unknown;
}

/** The id of the update `repeat` repeats: the latest accepted one of its subject, when its argument is the same. */
export async function repeatedUpdateId(client: Client, id: string, repeat: RepeatOf): Promise<string | undefined> {
  const { events } = await client.workflow.getHandle(id).fetchHistory();
  const sent = JSON.parse(JSON.stringify(repeat.arg)) as unknown;
  const subject = repeat.subject(sent);
  let latest: { updateId: string; arg: unknown } | undefined;
  for (const request of acceptedRequests(events ?? [])) {
    if (request.input?.name !== repeat.name || !request.meta?.updateId) continue;
    const payload = request.input.args?.payloads?.[0];
    const arg = payload ? decodedPayload(payload) : undefined;
    if (arg !== undefined && isDeepStrictEqual(repeat.subject(arg), subject))
      latest = { updateId: request.meta.updateId, arg };
  }
  return latest && isDeepStrictEqual(latest.arg, sent) ? latest.updateId : undefined;
}

/** Whether the history of `id` records that the workflow accepted update `updateId`. */
export async function acceptedUpdate(client: Client, id: string, updateId: string): Promise<boolean> {
  try {
    const { events } = await client.workflow.getHandle(id).fetchHistory();
    return acceptedRequests(events ?? []).some((request) => request.meta?.updateId === updateId);
  } catch {
    return false;
  }
}

const EVENT_TYPE_UPDATE_ACCEPTED = 41 as temporal.api.enums.v1.EventType;

/** The requests of the updates accepted in `events`, oldest first. */
function acceptedRequests(events: HistoryEvent[]): temporal.api.update.v1.IRequest[] {
  return events.flatMap((event) => {
    const request = event.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest;
    return event.eventType === EVENT_TYPE_UPDATE_ACCEPTED && request ? [request] : [];
  });
}
