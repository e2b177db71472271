/**
 * Deadlines for a person's decision (issue 40, `review_sla:` with `on_breach:`): a decision that waits past its
 * deadline is overdue. The waiting workflow then records it once (an event; with `escalate_to`, the decision is
 * handed to that reviewer group, which moves it in the listings) and announces `overdue`; the decision keeps
 * waiting. Whether a decision is overdue *now* is read from its `dueAt`, so listings need no write to show it.
 * Engine 8 only: the callers check. Workflow code: deterministic.
 */
import { condition } from '@temporalio/workflow';
import { formatDuration } from '../model/duration';
import type { ReviewSla } from '../model/pipeline-shapes';
import { now, type StageKindRun } from './common';

/** What a waiting decision publishes of its deadline (a pending review, a human request). */
export interface DeadlineFields {
  reviewers?: string;
  dueAt?: string;
  escalated?: { to: string; from?: string; at: string };
}

/** When a decision asked for at `requestedAt` (ISO) becomes overdue. */
export function dueAt(requestedAt: string, sla: ReviewSla): string {
  return new Date(Date.parse(requestedAt) + sla.afterMs).toISOString();
}

/**
 * Marks `waiting` overdue at `at` (workflow time): with `escalate_to`, hands it to that group, unless it is already
 * theirs. Returns the event's message.
 */
export function breach(waiting: DeadlineFields, sla: ReviewSla, subject: string, at: string): string {
  const late = `${subject} is overdue: no decision within ${formatDuration(sla.afterMs)}`;
  if (sla.escalateTo === undefined || sla.escalateTo === waiting.reviewers) return late;
  waiting.escalated = {
    to: sla.escalateTo,
    ...(waiting.reviewers !== undefined ? { from: waiting.reviewers } : {}),
    at,
  };
  waiting.reviewers = sla.escalateTo;
  return `${late}; handed to ${sla.escalateTo}`;
}

/**
 * A decision waited past its deadline: {@link breach} once, the `ReviewOverdue` event (with the attempt it is
 * about), a look at the item (listings follow a hand-over), then `say` it (the announcement, when the item
 * announces). `subject` names it in the event: "draft's review".
 */
export async function recordOverdue(
  run: Pick<StageKindRun, 'emit' | 'touch'>,
  waiting: DeadlineFields & { stage: string; attempt: number },
  sla: ReviewSla,
  subject: string,
  say: ((message: string) => Promise<void>) | undefined,
): Promise<void> {
  const message = breach(waiting, sla, subject, now());
  run.emit('ReviewOverdue', message, {
    stage: waiting.stage,
    attempt: waiting.attempt,
    details: { dueAt: waiting.dueAt!, ...(waiting.escalated ? { escalatedTo: waiting.escalated.to } : {}) },
  });
  run.touch();
  if (say) await say(message);
}

/** How a decision waits: until `decided`, at most `limitMs` (then the caller's TTL applies) or forever (null). */
export interface DeadlineWait {
  decided: () => boolean;
  limitMs: number | null;
  /** The timer's summary in the Web UI, as the wait without a deadline names it. */
  limitSummary: string;
  /** The deadline; undefined waits exactly as without one (same commands). */
  sla: ReviewSla | undefined;
  slaSummary: string;
  /** Called once when the deadline passes first: records the breach and announces it. */
  onOverdue: () => Promise<void>;
}

/**
 * Waits as {@link DeadlineWait} says; resolves to false only when `limitMs` ran out. A deadline at or after the
 * limit changes nothing: the limit decides first. Without a deadline this is the very `condition` promise, not an
 * async wrapper: one more await would reorder the commands of an older item's concurrent stages in replay.
 */
export function waitWithDeadline(wait: DeadlineWait): Promise<boolean | void> {
  const { decided, limitMs, sla } = wait;
  if (sla === undefined || (limitMs !== null && sla.afterMs >= limitMs))
    return limitMs === null ? condition(decided) : condition(decided, limitMs, { summary: wait.limitSummary });
  return waitPastDeadline(wait, sla);
}

async function waitPastDeadline(wait: DeadlineWait, sla: ReviewSla): Promise<boolean | void> {
  const { decided, limitMs } = wait;
  const started = Date.now();
  if (await condition(decided, sla.afterMs, { summary: wait.slaSummary })) return true;
  await wait.onOverdue();
  if (limitMs === null) return condition(decided);
  const left = limitMs - (Date.now() - started);
  if (left <= 0) return decided();
  return condition(decided, left, { summary: wait.limitSummary });
}
