/**
 * What a stage review tells beyond the item (issue 40, engine 8): its deadline passing (`review_sla`), and its
 * announcements to webhooks when the item announces. Workflow code: deterministic.
 */
import type { ReviewSla } from '../model/pipeline-shapes';
import type { PendingReview } from '../model/state';
import { announceQuietly, ownDecisionKey } from '../notify/announce';
import { now } from '../workflow-kit/common';
import { breach } from '../workflow-kit/deadline';
import type { StageRun } from './stage-run';

/** The review waited past its `review_sla`: recorded once (escalated when the stage says so), then announced. */
export async function overdue(
  run: StageRun,
  pending: PendingReview,
  sla: ReviewSla,
  said: ReturnType<typeof announced> | undefined,
): Promise<void> {
  const message = breach(pending, sla, `${run.stage.name}'s review`, now());
  run.emit('ReviewOverdue', message, {
    stage: run.stage.name,
    attempt: pending.attempt,
    details: { dueAt: pending.dueAt!, ...(pending.escalated ? { escalatedTo: pending.escalated.to } : {}) },
  });
  run.touch();
  if (said) await said('overdue', message);
}

/** Announces an event of a stage review (engine 8 with notifications; never throws, never holds the stage). */
export function announced(run: StageRun, pending: PendingReview) {
  const { stage, spec, itemId } = run;
  const kind = pending.reason === 'budget_exhausted' ? 'budget' : 'review';
  return (
    event: 'decision_owed' | 'overdue' | 'decided',
    message: string,
    extra: { decidedBy?: string; outcome?: string } = {},
  ) =>
    announceQuietly({
      event,
      key: ownDecisionKey(kind, stage.name),
      itemId,
      pipeline: spec.name,
      stage: stage.name,
      kind,
      ...(pending.reviewers !== undefined ? { reviewers: pending.reviewers } : {}),
      message,
      requestedAt: pending.requestedAt,
      ...extra,
    });
}
