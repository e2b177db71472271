/**
 * Announcing from a work item (docs/notifications.md): engine 8's items whose prepare step says the worker has a
 * notifications file run the short activity `announce` (src/notify/worker/activities.ts) when a decision is owed,
 * is decided, or the item fails. The notifier workflow delivers; the item only hands it over.
 */
import { isCancellation, proxyActivities, workflowInfo } from '@temporalio/workflow';
import { decisionKey, type DecisionKind } from '../model/decisions';
import type { Announcement } from './shapes';

// Short and bounded: announcing never holds the item for long, and a failure is ignored (see announce below).
const { announce: announceActivity } = proxyActivities<{ announce(a: Announcement): Promise<{ webhooks: string[] }> }>({
  startToCloseTimeout: '10s',
  scheduleToCloseTimeout: '30s',
  retry: { maximumAttempts: 3, initialInterval: '1s' },
});

/** What an announcement from an item names; the rest (time, workflow id) is filled in here. */
export type ItemAnnouncement = Omit<Announcement, 'occurredAt' | 'workflowId'>;

/**
 * Announces `announcement`. Call it only when the item notifies (engine 8 and a worker with a notifications file,
 * both recorded in history, so replay issues the same commands), and await nothing otherwise. Throws only the
 * item's own cancellation: a notifier or signal that fails is ignored, since a notification must never delay or
 * fail the item (the notifier's own deliveries are retried, not this).
 */
export async function announceQuietly(announcement: ItemAnnouncement): Promise<void> {
  try {
    await announceActivity({
      ...announcement,
      occurredAt: new Date(Date.now()).toISOString(),
      workflowId: workflowInfo().workflowId,
    });
  } catch (error) {
    // A cancelled item stops here as anywhere; anything else is ignored on purpose (see above).
    if (isCancellation(error)) throw error;
  }
}

/** The key of a decision of this workflow (src/model/decisions.ts). */
export function ownDecisionKey(kind: DecisionKind, subject: string): string {
  return decisionKey(workflowInfo().workflowId, kind, subject);
}

/** What a decision of this workflow announces. */
export type DecisionEvent = 'decision_owed' | 'overdue' | 'decided';
/** Announces one event of a decision; see {@link decisionAnnouncer}. */
export type Announcer = (
  event: DecisionEvent,
  message: string,
  extra?: { decidedBy?: string; outcome?: string },
) => Promise<void>;

/**
 * The announcer of one decision of this workflow (its kind and subject make the key); `reviewers` is read at each
 * event, since a decision handed over on its deadline changes group. Call only when the workflow announces.
 */
export function decisionAnnouncer(
  decision: {
    kind: DecisionKind;
    subject: string;
    itemId: string;
    pipeline: string;
    stage: string;
    requestedAt: string;
  },
  reviewers: () => string | undefined,
): Announcer {
  const { kind, subject, ...named } = decision;
  return (event, message, extra = {}) => {
    const group = reviewers();
    return announceQuietly({
      event,
      key: ownDecisionKey(kind, subject),
      kind,
      ...named,
      ...(group !== undefined ? { reviewers: group } : {}),
      message,
      ...extra,
    });
  };
}
