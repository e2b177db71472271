/**
 * What a stage review announces to webhooks when the item announces (issue 40, engine 8 with a notifications
 * file). Workflow code: deterministic.
 */
import type { PendingReview } from '../model/state';
import { decisionAnnouncer, type Announcer } from '../notify/announce';
import type { StageRun } from './stage-run';

/** The announcer of a stage review (never throws, never holds the stage). */
export function announced(run: StageRun, pending: PendingReview): Announcer {
  return decisionAnnouncer(
    {
      kind: pending.reason === 'budget_exhausted' ? 'budget' : 'review',
      subject: run.stage.name,
      itemId: run.itemId,
      pipeline: run.spec.name,
      stage: run.stage.name,
      requestedAt: pending.requestedAt,
    },
    () => pending.reviewers,
  );
}
