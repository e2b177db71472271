/**
 * The notifier workflow's messages (`treadleNotifier`, workflow.ts) and its input.
 *
 * - `notify` is a signal: the item's `announce` activity sends it with signal-with-start and needs no answer, and a
 *   signal costs the notifier one history event. Its input is checked in the handler (`announcementProblem`).
 * - `notifierState` is a query: what waits, what is being delivered, how many were delivered (tests, operators).
 */
import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { DeliveryResult, NotifierAnnouncement, WebhookDelivery } from './shapes';

/** An announcement for the webhooks it names. */
export const notifySignal = defineSignal<[NotifierAnnouncement]>('notify');

/** What the notifier holds now. */
export interface NotifierState {
  /** Deliveries not yet made (those being attempted included), oldest first. */
  queued: WebhookDelivery[];
  /** The webhooks with a delivery being attempted. */
  delivering: string[];
  /** Deliveries made by this run. */
  delivered: number;
  /** Announcements dropped as already announced, by this run. */
  duplicates: number;
  /** Deliveries given up (retries exhausted, or the queue full), by this run. */
  dropped: number;
}

/** The notifier's state as of its last activation. */
export const notifierStateQuery = defineQuery<NotifierState>('notifierState');

/** How `deliverWebhook` is retried: exponential backoff from `initialIntervalMs` up to `maximumIntervalMs`. */
export interface DeliveryRetry {
  initialIntervalMs: number;
  maximumIntervalMs: number;
}

/** The notifier's input: empty for a new notifier; a continued run gets what the run before held. */
export interface NotifierInput {
  carried?: { queue: WebhookDelivery[]; recent: string[] };
  /** Tests shorten the backoff; default {@link DEFAULT_DELIVERY_RETRY}. */
  retry?: DeliveryRetry;
  /** Continue as new past this many history events (tests set a small one). */
  maxHistoryEvents?: number;
}

/** Retries start after 2 s and back off to one every 10 minutes, for up to 24 hours. */
export const DEFAULT_DELIVERY_RETRY: DeliveryRetry = { initialIntervalMs: 2_000, maximumIntervalMs: 10 * 60_000 };

/** The activity the notifier runs (the worker's implementation: worker/activities.ts). */
export interface NotifierActivities {
  deliverWebhook(delivery: WebhookDelivery): Promise<DeliveryResult>;
}
