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
