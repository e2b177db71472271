/**
 * `treadle notify test` (docs/cli.md): a sample announcement, signed and posted to each webhook of the
 * notifications file (or the one named) straight from the command, without Temporal, with each receiver's answer.
 */
import { decisionKey } from '../../model/decisions';
import type { Webhook } from '../settings';
import type { Announcement } from '../shapes';
import { isDelivered, noAnswerReason, postWebhook } from './delivery';
import type { WorkerNotifications } from './settings-file';

/** One webhook's answer to the sample. */
export interface SampleResult {
  webhook: string;
  url: string;
  /** The receiver's status, when it answered. */
  status?: number;
  /** `200 OK`, `500 Internal Server Error: <body>`, or why there was no answer. */
  answer: string;
  delivered: boolean;
}

/** The sample: a decision owed on a test item; a new key each time, so receivers that dedupe still see it. */
export function sampleAnnouncement(nowMs = Date.now()): Announcement {
  const itemId = `treadle-notify-test-${nowMs}`;
  return {
    event: 'decision_owed',
    key: decisionKey(itemId, 'review', 'sample'),
    occurredAt: new Date(nowMs).toISOString(),
    itemId,
    workflowId: itemId,
    pipeline: 'notify-test',
    stage: 'sample',
    kind: 'review',
    message: 'a sample from `treadle notify test`: no decision is owed',
  };
}

/** Posts the sample to `webhooks` one after the other; never throws for a receiver's failure. */
export async function sendSamples(
  notifications: WorkerNotifications,
  webhooks: readonly Webhook[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<SampleResult[]> {
  const announcement = sampleAnnouncement();
  const results: SampleResult[] = [];
  for (const webhook of webhooks) {
    const base = { webhook: webhook.name, url: webhook.url };
    try {
      const answer = await postWebhook(webhook, announcement, {
        secret: env[webhook.secretEnv] ?? '',
        ...(notifications.uiUrl ? { uiUrl: notifications.uiUrl } : {}),
      });
      const delivered = isDelivered(answer.status);
      const said = !delivered && answer.body ? `: ${answer.body.replace(/\s+/g, ' ').trim()}` : '';
      results.push({
        ...base,
        status: answer.status,
        answer: `${answer.status} ${answer.statusText}${said}`,
        delivered,
      });
    } catch (error) {
      results.push({ ...base, answer: `no answer: ${noAnswerReason(error)}`, delivered: false });
    }
  }
  return results;
}
