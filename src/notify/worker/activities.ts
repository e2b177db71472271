/**
 * The notifications' activities (docs/notifications.md):
 * - `announce`: an item says something happened; the worker picks the webhooks of its notifications file that take
 *   it and hands it to the notifier workflow (signal-with-start), then the item goes on. Nothing to do without a
 *   matching webhook.
 * - `deliverWebhook`: the notifier's POST of one announcement to one webhook; a receiver that does not answer 2xx
 *   fails it, and Temporal retries it with backoff (the notifier's retry policy).
 */
import { ApplicationFailure } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { webhooksFor } from '../settings';
import {
  MAX_FIELD_CHARS,
  MAX_MESSAGE_CHARS,
  notifierWorkflowId,
  type Announcement,
  type DeliveryResult,
  type NotifierAnnouncement,
  type WebhookDelivery,
} from '../shapes';
import { notifySignal, type NotifierInput } from '../messages';
import { isDelivered, noAnswerReason, postWebhook } from './delivery';
import { NOTIFY_ENV, type WorkerNotifications } from './settings-file';

/** What the activities need: the worker's notifications, and where the notifier runs. */
export interface NotifyActivityOptions {
  /** The worker's notifications file (undefined: none, announcements are dropped here). */
  notifications: WorkerNotifications | undefined;
  /** A client for signal-with-start (made on first use). */
  client: () => Client;
  /** The core task queue: its workers run the notifier workflow. */
  taskQueue: string;
  /** Where secrets are read (default `process.env`). */
  env?: NodeJS.ProcessEnv;
}

/** What `announce` did: the webhooks the announcement went to the notifier for (none: nothing sent). */
export interface AnnounceResult {
  webhooks: string[];
}

const cut = (text: string, max: number): string => (text.length <= max ? text : `${text.slice(0, max - 1)}…`);

/** The announcement with every field within its bound (the notifier refuses longer ones). */
function bounded(announcement: Announcement): Announcement {
  const out = { ...announcement, message: cut(announcement.message, MAX_MESSAGE_CHARS) };
  for (const field of ['stage', 'kind', 'reviewers', 'decidedBy', 'outcome', 'itemId', 'pipeline'] as const)
    if (out[field] !== undefined) out[field] = cut(out[field], MAX_FIELD_CHARS);
  return out;
}

/** Creates `announce` and `deliverWebhook` (see the module's comment). */
export function createNotifyActivities(options: NotifyActivityOptions) {
  const env = options.env ?? process.env;
  return {
    /** Hands `announcement` to the notifier for the webhooks that take it; resolves at once when none does. */
    async announce(announcement: Announcement): Promise<AnnounceResult> {
      if (!options.notifications) return { webhooks: [] };
      const webhooks = webhooksFor(options.notifications, announcement).map((w) => w.name);
      if (webhooks.length === 0) return { webhooks };
      const signal: NotifierAnnouncement = { ...bounded(announcement), webhooks };
      const input: NotifierInput = {};
      await options.client().workflow.signalWithStart('treadleNotifier', {
        workflowId: notifierWorkflowId(options.taskQueue),
        taskQueue: options.taskQueue,
        args: [input],
        signal: notifySignal,
        signalArgs: [signal],
      });
      return { webhooks };
    },

    /** POSTs one announcement to one webhook; throws (retryable) unless the receiver answers 2xx. */
    async deliverWebhook({ webhook: name, announcement }: WebhookDelivery): Promise<DeliveryResult> {
      const webhook = options.notifications?.webhooks.find((w) => w.name === name);
      // Retryable: during a deploy, another worker (or this one, restarted) may have the webhook.
      if (!webhook)
        throw ApplicationFailure.retryable(
          `webhook "${name}" is not in this worker's ${NOTIFY_ENV} file; give every worker on the queue the same file`,
          'WebhookUnknown',
        );
      const secret = env[webhook.secretEnv];
      if (!secret)
        throw ApplicationFailure.retryable(
          `${webhook.secretEnv} (webhook "${name}"'s key) is not set on this worker`,
          'WebhookUnknown',
        );
      const uiUrl = options.notifications?.uiUrl;
      let answer;
      try {
        answer = await postWebhook(webhook, announcement, { secret, ...(uiUrl ? { uiUrl } : {}) });
      } catch (error) {
        throw ApplicationFailure.retryable(`webhook "${name}": ${noAnswerReason(error)}`, 'WebhookUnreachable');
      }
      if (!isDelivered(answer.status))
        throw ApplicationFailure.retryable(
          `webhook "${name}" answered ${answer.status} ${answer.statusText}${answer.body ? `: ${answer.body}` : ''}`,
          'WebhookRefused',
        );
      return { status: answer.status, deliveryId: answer.deliveryId };
    },
  };
}

/** The notifications' activities, by name. */
export type NotifyActivities = ReturnType<typeof createNotifyActivities>;
