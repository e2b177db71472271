/**
 * The bodies a webhook receives (docs/notifications.md "Payload"): Treadle's JSON, or a Slack-compatible
 * `{ text, blocks }` message for an incoming webhook. Pure: the delivery (worker/delivery.ts) signs and posts them.
 */
import type { NotifyFormat } from './settings';
import type { Announcement, NotifyEvent } from './shapes';

/** The JSON body (`format: json`). */
export interface WebhookPayload extends Announcement {
  /** The delivery id, as in `X-Treadle-Delivery`: the same on every retry of this event to this webhook. */
  delivery: string;
  /** The webhook's name in the notifications file. */
  webhook: string;
  /** The decision's inbox page, when `TREADLE_UI_URL` is set (not for `item_failed`). */
  link?: string;
}

/** How each event reads in a chat message. */
const HEADLINES: Record<NotifyEvent, string> = {
  decision_owed: 'Decision owed',
  overdue: 'Decision overdue',
  decided: 'Decision made',
  item_failed: 'Item failed',
};

/** The body for `format`, as the bytes to sign and send. */
export function webhookBody(format: NotifyFormat, payload: WebhookPayload): string {
  return JSON.stringify(format === 'slack' ? slackMessage(payload) : payload);
}

/** Slack's mrkdwn treats these three as markup: escaped as Slack documents. */
const slackEscape = (text: string): string => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** A Slack-compatible message: `text` for notifications and clients without blocks, `blocks` for the layout. */
export function slackMessage(payload: WebhookPayload): { text: string; blocks: unknown[] } {
  const where = [payload.pipeline, payload.stage].filter(Boolean).join(' · ');
  const who = payload.decidedBy ? ` by ${payload.decidedBy}${payload.outcome ? ` (${payload.outcome})` : ''}` : '';
  const text = `${HEADLINES[payload.event]}${who}: ${payload.itemId} (${where})${payload.message ? ` — ${payload.message}` : ''}`;
  const title = payload.link ? `<${payload.link}|${slackEscape(payload.itemId)}>` : `*${slackEscape(payload.itemId)}*`;
  const context = [where, payload.reviewers ? `reviewers: ${payload.reviewers}` : '', payload.kind ?? '']
    .filter(Boolean)
    .map(slackEscape)
    .join(' · ');
  return {
    text,
    blocks: [
      {
        type: 'section',
        text: {
          type: 'mrkdwn',
          text: `*${HEADLINES[payload.event]}*${slackEscape(who)}: ${title}\n${slackEscape(payload.message)}`,
        },
      },
      { type: 'context', elements: [{ type: 'mrkdwn', text: context || payload.event }] },
    ],
  };
}
