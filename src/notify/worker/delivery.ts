/**
 * Posting to a webhook (docs/notifications.md): the body for its format, signed with its secret, with a delivery id
 * that is the same on every retry, within {@link WEBHOOK_TIMEOUT_MS}. Used by the `deliverWebhook` activity and by
 * `treadle notify test`.
 */
import { createHash } from 'node:crypto';
import { webhookBody, type WebhookPayload } from '../payload';
import type { Webhook } from '../settings';
import { decisionLink, type Announcement } from '../shapes';
import { signatureOf } from './signing';

/** How long a receiver has to answer one POST. */
export const WEBHOOK_TIMEOUT_MS = 10_000;
/** How much of a receiver's answer is kept for messages. */
const ANSWER_CHARS = 200;

/** The headers a delivery carries (lower case, as Node's http server shows them). */
export const DELIVERY_HEADERS = {
  signature: 'x-treadle-signature',
  timestamp: 'x-treadle-timestamp',
  delivery: 'x-treadle-delivery',
  event: 'x-treadle-event',
} as const;

/**
 * The delivery id of `announcement` to `webhook`: stable across retries, workers and notifier runs; a new round of
 * the same decision (`requestedAt`) is a new delivery.
 */
export function deliveryIdOf(
  announcement: Pick<Announcement, 'key' | 'event' | 'requestedAt'>,
  webhook: string,
): string {
  const round = announcement.requestedAt === undefined ? '' : `\n${announcement.requestedAt}`;
  return createHash('sha256')
    .update(`${announcement.key}\n${announcement.event}\n${webhook}${round}`)
    .digest('hex')
    .slice(0, 32);
}

/** The receiver's answer to one POST. */
export interface WebhookAnswer {
  status: number;
  statusText: string;
  /** The start of the answer's body, for messages. */
  body: string;
  deliveryId: string;
}

/** What one POST needs besides the announcement. */
export interface PostOptions {
  /** The webhook's HMAC key (from its `secret_env`). */
  secret: string;
  /** The inbox's address, for the decision's link. */
  uiUrl?: string;
  /** Unix time in ms (tests). */
  nowMs?: number;
  timeoutMs?: number;
}

/**
 * POSTs `announcement` to `webhook`, signed; resolves to the receiver's answer whatever its status, rejects when no
 * answer came (refused, reset, timed out).
 */
export async function postWebhook(
  webhook: Webhook,
  announcement: Announcement,
  options: PostOptions,
): Promise<WebhookAnswer> {
  const deliveryId = deliveryIdOf(announcement, webhook.name);
  const payload: WebhookPayload = {
    ...announcement,
    delivery: deliveryId,
    webhook: webhook.name,
    ...(options.uiUrl &&
      announcement.event !== 'item_failed' && { link: decisionLink(options.uiUrl, announcement.key) }),
  };
  const body = webhookBody(webhook.format, payload);
  const timestamp = String(Math.floor((options.nowMs ?? Date.now()) / 1000));
  const response = await fetch(webhook.url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'user-agent': 'treadle-webhooks',
      [DELIVERY_HEADERS.signature]: signatureOf(options.secret, timestamp, body),
      [DELIVERY_HEADERS.timestamp]: timestamp,
      [DELIVERY_HEADERS.delivery]: deliveryId,
      [DELIVERY_HEADERS.event]: announcement.event,
    },
    body,
    redirect: 'manual',
    signal: AbortSignal.timeout(options.timeoutMs ?? WEBHOOK_TIMEOUT_MS),
  });
  const text = await response.text().catch(() => '');
  return {
    status: response.status,
    statusText: response.statusText,
    body: text.slice(0, ANSWER_CHARS),
    deliveryId,
  };
}

/** Whether a receiver's status counts as delivered. */
export const isDelivered = (status: number): boolean => status >= 200 && status < 300;

/** Why a POST got no answer, in one line (fetch's own error says only "fetch failed"). */
export function noAnswerReason(error: unknown): string {
  const err = error as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (err.name === 'TimeoutError') return `no answer within ${WEBHOOK_TIMEOUT_MS / 1000} s`;
  const cause = err.cause?.code ?? err.cause?.message;
  return cause ? `${err.message ?? 'failed'} (${cause})` : (err.message ?? String(error));
}
