/**
 * The notifier workflow `treadleNotifier` (docs/notifications.md): one per namespace and core task queue (workflow id
 * from `notifierWorkflowId`), started on demand by the first `announce` (signal-with-start), as the limiter is.
 *
 * - Each announcement is de-duplicated by (event, key) against a bounded set of recent ones, then queued once per
 *   webhook it names.
 * - Each webhook has its own lane: one delivery at a time, oldest first, through `deliverWebhook`, which Temporal
 *   retries with backoff for up to {@link DELIVERY_DEADLINE}. A receiver down or slow holds back only its own lane,
 *   and never an item: items only signal.
 * - It continues as new when Temporal suggests it or the history passes {@link NOTIFIER_HISTORY_EVENTS}, carrying
 *   the queue (deliveries being attempted included: they start again, with the same delivery id) and the recent
 *   set. At least once: a receiver dedupes on `X-Treadle-Delivery`.
 */
import {
  condition,
  continueAsNew,
  log,
  proxyActivities,
  setHandler,
  setWorkflowOptions,
  workflowInfo,
} from '@temporalio/workflow';
import {
  DEFAULT_DELIVERY_RETRY,
  notifierStateQuery,
  notifySignal,
  type NotifierActivities,
  type NotifierInput,
  type NotifierState,
} from './messages';
import { announcementProblem, dedupKeyOf, type NotifierAnnouncement, type WebhookDelivery } from './shapes';

/** A notifier run continues as new past this many history events (sooner when Temporal suggests it). */
export const NOTIFIER_HISTORY_EVENTS = 5_000;
/** The most deliveries waiting; beyond it the oldest is dropped, with a warning (the queue is carried in history). */
export const MAX_QUEUED_DELIVERIES = 200;
/** How many recent (event, key) pairs are remembered for de-duplication. */
export const MAX_RECENT_KEYS = 500;
/** How long a delivery is retried before it is given up. */
export const DELIVERY_DEADLINE = '24h';
/** One POST's bound: the delivery's own 10 s timeout and a margin. */
const ATTEMPT_TIMEOUT = '15s';

/** Delivers what items announce to the webhooks (see the module's comment). */
export async function treadleNotifier(input: NotifierInput = {}): Promise<void> {
  const notifier = new Notifier(input);
  notifier.install();
  await notifier.run();
}

// Auto-upgrade, as the limiter (src/capacity/workflow.ts): one notifier serves the items of every live build, so
// it must follow the current build rather than be pinned to one that drains with its deliveries queued.
// As there, only on a versioned run.
setWorkflowOptions(
  () => (workflowInfo().currentDeploymentVersion?.deploymentName ? { versioningBehavior: 'AUTO_UPGRADE' } : {}),
  treadleNotifier,
);

/** The notifier's queue, recent keys and message handlers. */
class Notifier {
  private readonly queue: WebhookDelivery[];
  private readonly recent: string[];
  /** The webhooks with a delivery being attempted (the first of their lane in the queue). */
  private readonly delivering = new Set<string>();
  private readonly counts = { delivered: 0, duplicates: 0, dropped: 0 };
  private changed = true;
  private readonly activities: NotifierActivities;

  constructor(private readonly input: NotifierInput) {
    this.queue = [...(input.carried?.queue ?? [])];
    this.recent = [...(input.carried?.recent ?? [])];
    const retry = input.retry ?? DEFAULT_DELIVERY_RETRY;
    this.activities = proxyActivities<NotifierActivities>({
      startToCloseTimeout: ATTEMPT_TIMEOUT,
      scheduleToCloseTimeout: DELIVERY_DEADLINE,
      retry: {
        initialInterval: retry.initialIntervalMs,
        maximumInterval: retry.maximumIntervalMs,
        backoffCoefficient: 2,
      },
    });
  }

  /** Registers every handler before the first await. */
  install(): void {
    setHandler(notifySignal, (announcement) => this.accept(announcement));
    setHandler(notifierStateQuery, (): NotifierState => ({
      queued: this.queue,
      delivering: [...this.delivering],
      ...this.counts,
    }));
  }

  /** Queues an announcement once per webhook, unless it was announced already. */
  private accept(announcement: NotifierAnnouncement): void {
    const problem = announcementProblem(announcement);
    if (problem) return log.warn('notify signal ignored', { problem });
    const key = dedupKeyOf(announcement);
    if (this.recent.includes(key)) {
      this.counts.duplicates += 1;
      return;
    }
    this.recent.push(key);
    if (this.recent.length > MAX_RECENT_KEYS) this.recent.splice(0, this.recent.length - MAX_RECENT_KEYS);
    const { webhooks, ...rest } = announcement;
    for (const webhook of webhooks) this.queue.push({ webhook, announcement: rest });
    this.trim();
    this.changed = true;
  }

  /** Drops the oldest deliveries not being attempted while the queue is over its bound. */
  private trim(): void {
    while (this.queue.length > MAX_QUEUED_DELIVERIES) {
      const index = this.queue.findIndex((d, i) => !(this.delivering.has(d.webhook) && this.laneHead(d.webhook) === i));
      if (index < 0) return;
      const [dropped] = this.queue.splice(index, 1);
      this.counts.dropped += 1;
      log.warn('notification dropped: the queue is full', {
        webhook: dropped!.webhook,
        event: dropped!.announcement.event,
        key: dropped!.announcement.key,
      });
    }
  }

  private laneHead(webhook: string): number {
    return this.queue.findIndex((d) => d.webhook === webhook);
  }

  /** Starts the next delivery of every idle lane; continues as new when due. */
  async run(): Promise<never> {
    const maxEvents = this.input.maxHistoryEvents ?? NOTIFIER_HISTORY_EVENTS;
    for (;;) {
      this.changed = false;
      const info = workflowInfo();
      if (info.continueAsNewSuggested || info.historyLength > maxEvents) return this.continueAsNew();
      for (const delivery of this.queue)
        if (!this.delivering.has(delivery.webhook)) {
          this.delivering.add(delivery.webhook);
          void this.deliver(delivery);
        }
      await condition(() => this.changed);
    }
  }

  /** Delivers one (Temporal retries it); done or given up, it leaves the queue and its lane moves on. */
  private async deliver(delivery: WebhookDelivery): Promise<void> {
    try {
      await this.activities.deliverWebhook(delivery);
      this.counts.delivered += 1;
    } catch (error) {
      this.counts.dropped += 1;
      log.warn('notification given up', {
        webhook: delivery.webhook,
        event: delivery.announcement.event,
        key: delivery.announcement.key,
        error: (error as Error).message,
      });
    } finally {
      const index = this.queue.indexOf(delivery);
      if (index >= 0) this.queue.splice(index, 1);
      this.delivering.delete(delivery.webhook);
      this.changed = true;
    }
  }

  /** Carries the queue (deliveries being attempted start again) and the recent keys to a new run. */
  private continueAsNew(): Promise<never> {
    log.info('notifier continues as new', { queued: this.queue.length, recent: this.recent.length });
    return continueAsNew<typeof treadleNotifier>({
      ...this.input,
      carried: { queue: this.queue, recent: this.recent },
    });
  }
}
