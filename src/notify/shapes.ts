/**
 * What notifications carry (docs/notifications.md): an {@link Announcement} of something a person should hear
 * about, sent by an item (through the `announce` activity) to the notifier workflow, which delivers it to each
 * webhook that takes it. Plain JSON, bounded: every field is capped where it is made (announce.ts).
 */

/** What a webhook can be told: a decision is owed, it is overdue, it was decided, an item failed. */
export const NOTIFY_EVENTS = ['decision_owed', 'overdue', 'decided', 'item_failed'] as const;
export type NotifyEvent = (typeof NOTIFY_EVENTS)[number];

/** Something a person should hear about; `key` with `event` identifies it (de-duplication, delivery ids). */
export interface Announcement {
  event: NotifyEvent;
  /** The decision's key (src/model/decisions.ts `decisionKey`); for `item_failed`, the item's workflow id. */
  key: string;
  /** Workflow time when it happened (ISO 8601). */
  occurredAt: string;
  itemId: string;
  /** The workflow that waits (the item, or its TDD node or loop stage) or failed. */
  workflowId: string;
  pipeline: string;
  stage?: string;
  /** The decision's kind (`review`, `budget`, `approval`, `tdd`, `loop`). */
  kind?: string;
  /** The reviewer group the decision is addressed to. */
  reviewers?: string;
  /** One readable line: the review's reason, the decision's outcome, the failure. */
  message: string;
  /** `decided`: who answered, and how (`approve`, `reject`, ...). */
  decidedBy?: string;
  outcome?: string;
  /**
   * When the decision was asked for (ISO 8601): a stage asked again (a new attempt after a rejection or a
   * request for changes) is a new round under the same key, announced again.
   */
  requestedAt?: string;
}

/** An announcement with the webhooks that take it (chosen by the worker from its notifications file). */
export interface NotifierAnnouncement extends Announcement {
  webhooks: string[];
}

/** One announcement to one webhook: the notifier's unit of work, and `deliverWebhook`'s input. */
export interface WebhookDelivery {
  webhook: string;
  announcement: Announcement;
}

/** What `deliverWebhook` reports: the receiver's status (2xx; anything else is a retried failure). */
export interface DeliveryResult {
  status: number;
  deliveryId: string;
}

/** The longest `message`; longer ones are cut (with …) where the announcement is made. */
export const MAX_MESSAGE_CHARS = 500;
/** The longest key, id, name or group an announcement may carry. */
export const MAX_FIELD_CHARS = 300;
/** The most webhooks one announcement may name. */
export const MAX_WEBHOOKS = 20;

/** The notifier of the workers polling `taskQueue` (one per namespace and core task queue). */
export function notifierWorkflowId(taskQueue: string): string {
  return `treadle-notifier:${taskQueue}`;
}

/** What the notifier de-duplicates on: each event of each decision is announced once. */
export function dedupKeyOf(announcement: Pick<Announcement, 'event' | 'key' | 'requestedAt'>): string {
  const { event, key, requestedAt } = announcement;
  return requestedAt === undefined ? `${event} ${key}` : `${event} ${key} ${requestedAt}`;
}

/** The inbox page of a decision under the inbox's address `uiUrl` (`treadle ui`'s `/d/<key>` route). */
export function decisionLink(uiUrl: string, key: string): string {
  return `${uiUrl.replace(/\/+$/, '')}/d/${encodeURIComponent(key)}`;
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const isText = (value: unknown, max: number): value is string =>
  typeof value === 'string' && value.length > 0 && value.length <= max;

/** What is wrong with an announcement sent to the notifier, or undefined (signals have no validator). */
export function announcementProblem(input: unknown): string | undefined {
  if (!isRecord(input)) return 'must be an object';
  if (!(NOTIFY_EVENTS as readonly unknown[]).includes(input.event))
    return `event: must be one of ${NOTIFY_EVENTS.join(', ')}`;
  for (const field of ['key', 'occurredAt', 'itemId', 'workflowId', 'pipeline'])
    if (!isText(input[field], MAX_FIELD_CHARS)) return `${field}: must be text of 1 to ${MAX_FIELD_CHARS} characters`;
  for (const field of ['stage', 'kind', 'reviewers', 'decidedBy', 'outcome', 'requestedAt'])
    if (input[field] !== undefined && !isText(input[field], MAX_FIELD_CHARS))
      return `${field}: must be text of 1 to ${MAX_FIELD_CHARS} characters`;
  if (typeof input.message !== 'string' || input.message.length > MAX_MESSAGE_CHARS)
    return `message: must be text of at most ${MAX_MESSAGE_CHARS} characters`;
  const { webhooks } = input;
  if (!Array.isArray(webhooks) || webhooks.length > MAX_WEBHOOKS || !webhooks.every((w) => isText(w, 64)))
    return `webhooks: must be a list of at most ${MAX_WEBHOOKS} webhook names`;
  return undefined;
}
