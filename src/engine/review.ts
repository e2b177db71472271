/**
 * Checking a review against the item's state, shared by the `resolveReview` update's validator (which
 * rejects bad input to the caller) and the `review` signal (which records bad input as an event).
 */
import { parseReviewRequest } from '../model/review-request';
import { formatDuration } from '../model/duration';
import type { Artefact, AttemptRecord, Json, QualityFeedback, ReviewOutcome } from '../model/shapes';
import { REVIEWER_ATTENTION_ENGINE, type PendingReview, type ReviewReason, type ReviewRecord } from '../model/state';

/** Inline edits larger than this would bloat the history (and the update carrying them) past safe sizes. */
export const MAX_INLINE_EDIT_CHARS = 512 * 1024;

/** A review that passed every check, ready to apply. */
export interface AcceptedReview {
  stage: string;
  outcome: ReviewOutcome;
  reviewer: string;
}

/**
 * What a review is checked against: a work item's state, or a workflow that answers reviews as one does (a
 * TDD node): its id, the stages a review may name with their attempts, and the reviews it waits for.
 */
export interface ReviewTarget {
  id: string;
  stages: Readonly<Record<string, { status: string; attempts: readonly AttemptRecord[] }>>;
  pendingReviews: readonly PendingReview[];
  /** A work item's human stages' requests (issue 40): a review naming one is pointed at `treadle respond`. */
  humanRequests?: readonly { stage: string; status: string }[];
}

/** Validates a review payload against the current state; the error names exactly what is wrong. */
export function checkReview(
  state: ReviewTarget,
  payload: unknown,
): { ok: true; review: AcceptedReview } | { ok: false; error: string } {
  const parsed = parseReviewRequest(payload);
  if (!parsed.ok) return { ok: false, error: `invalid review: ${parsed.issues.slice(0, 5).join('; ')}` };
  const { stage, outcome, reviewer } = parsed.review;
  // Stage names are data: only the item's own stages count, never a name inherited from Object.prototype.
  const stageState = Object.hasOwn(state.stages, stage) ? state.stages[stage] : undefined;
  if (!stageState) {
    const known = Object.keys(state.stages);
    return {
      ok: false,
      error: `unknown stage "${stage}" in work item ${state.id} (stages: ${known.join(', ') || 'none'})`,
    };
  }
  if (!state.pendingReviews.some((r) => r.stage === stage)) {
    if (state.humanRequests?.some((r) => r.stage === stage && r.status === 'pending'))
      return {
        ok: false,
        error: `stage "${stage}" of work item ${state.id} waits for a person's output, not a review: give it with treadle respond ${state.id} ${stage} --output @output.json (or --reject <reason>), or TreadleClient.respond`,
      };
    const waiting = state.pendingReviews.map((r) => r.stage);
    return {
      ok: false,
      error: `stage "${stage}" of work item ${state.id} is not waiting for review (it is ${stageState.status}); ${waiting.length ? `waiting: ${waiting.join(', ')}` : 'no stage is waiting for review'}`,
    };
  }
  if (outcome.kind === 'approve_with_edits') {
    const size = JSON.stringify(outcome.artefact).length;
    if (size > MAX_INLINE_EDIT_CHARS) {
      return {
        ok: false,
        error: `the edited artefact is ${Math.round(size / 1024)} KB of JSON; edits over ${MAX_INLINE_EDIT_CHARS / 1024} KB must be stored in the blob store and passed by reference (TreadleClient.approveWithEdits and "treadle review --edit" do this)`,
      };
    }
  }
  if (outcome.kind === 'approve' && outcome.attempt !== undefined) {
    const chosen = stageState.attempts.find((a) => a.attempt === outcome.attempt);
    if (!chosen)
      return {
        ok: false,
        error: `stage "${stage}" has no attempt ${outcome.attempt} (attempts: 1-${stageState.attempts.length})`,
      };
    if (chosen.artefact === undefined)
      return { ok: false, error: `attempt ${outcome.attempt} of stage "${stage}" produced no output to approve` };
  }
  return { ok: true, review: { stage, outcome, reviewer } };
}

/** The attempt an approval carries on: the chosen one, else the latest attempt that produced an artefact. */
export function approvedAttempt(attempts: AttemptRecord[], attempt?: number): AttemptRecord | undefined {
  if (attempt !== undefined) return attempts.find((a) => a.attempt === attempt);
  for (let i = attempts.length - 1; i >= 0; i--) {
    if (attempts[i]?.artefact !== undefined) return attempts[i];
  }
  return undefined;
}

/** What a stage waiting for review must do once a human (or the TTL) has decided. */
export type ReviewDecision =
  | { action: 'fail'; error: string; message: string }
  | { action: 'complete'; artefact?: Artefact; summary?: string; message: string }
  /** Carry on with the stage's attempts (a spent token budget was waived). */
  | { action: 'resume' }
  /**
   * The reviewer requested changes: one more attempt runs with `feedback` (their note beside the gate's last
   * feedback), beyond the retry budget if need be; a budget review resumes the attempt it held back instead.
   */
  | { action: 'retry'; feedback: QualityFeedback; message: string };

/**
 * The feedback the attempt after a reviewer's "request changes" gets: the gate's last feedback (its summary
 * and failed criteria) with the reviewer's note as `guidance`, so both reach the stage's prompt. A stored
 * feedback's `ref` is dropped: the activity would hand the implementation the stored whole, without the note.
 */
export function changesRequestedFeedback(
  reviewer: string,
  note: string,
  gate: QualityFeedback | undefined,
): QualityFeedback {
  const requested = `changes requested by ${reviewer}`;
  return {
    summary: gate ? `${requested}; the gate's last feedback: ${gate.summary}` : requested,
    failedCriteria: gate?.failedCriteria ?? [],
    guidance: note,
    reviewer,
  };
}

/** The event and the stage record a decision leaves behind. */
export interface ReviewDecided {
  decision: ReviewDecision;
  event: { type: 'ReviewResolved' | 'ReviewExpired'; message: string; details: Record<string, Json> };
  review: ReviewRecord;
}

/** A reviewer's request for changes: the next attempt, with their note in its feedback. */
function changesRequested(
  stage: string,
  reason: ReviewReason,
  reviewer: string,
  note: string,
  attempts: AttemptRecord[],
): ReviewDecision {
  return {
    action: 'retry',
    feedback: changesRequestedFeedback(reviewer, note, attempts[attempts.length - 1]?.feedback),
    message:
      reason === 'budget_exhausted'
        ? `${stage}: ${reviewer} requested changes; the stage continues past the token budget with their note`
        : `${stage}: ${reviewer} requested changes; attempt ${attempts.length + 1} runs with their note`,
  };
}

/**
 * The review to apply, the reviewer's or on expiry the configured action's (`expired`), and the record it
 * leaves on the stage.
 */
function reviewOutcome(
  args: Pick<Parameters<typeof decideReview>[0], 'stage' | 'resolution' | 'onReviewExpired' | 'at'>,
): { resolution: AcceptedReview; expired: boolean; review: ReviewRecord } {
  const { stage, at } = args;
  const resolution = args.resolution ?? {
    stage,
    reviewer: 'ttl',
    outcome:
      args.onReviewExpired === 'approve'
        ? { kind: 'approve' as const }
        : { kind: 'reject' as const, reason: 'review expired' },
  };
  const expired = args.resolution === undefined;
  const { outcome, reviewer } = resolution;
  const review: ReviewRecord = expired
    ? { reviewer: 'ttl', kind: outcome.kind === 'approve' ? 'expired_approve' : 'expired_reject', at }
    : { reviewer, kind: outcome.kind, at, ...(outcome.note !== undefined ? { note: outcome.note } : {}) };
  return { resolution, expired, review };
}

/**
 * Applies a review outcome, or the TTL's expiry (`resolution` undefined), to a stage waiting for review.
 * Expiry means exactly what the configured action means when a human takes it: `approve` on a spent token
 * budget lets the stage continue, elsewhere it approves the latest output; `reject` fails the stage.
 */
export function decideReview(args: {
  stage: string;
  reason: ReviewReason;
  attempts: AttemptRecord[];
  resolution: AcceptedReview | undefined;
  onReviewExpired: 'approve' | 'reject';
  reviewTtlMs: number | null;
  at: string;
}): ReviewDecided {
  const { stage, attempts } = args;
  const { resolution, expired, review } = reviewOutcome(args);
  const { outcome, reviewer } = resolution;
  const after = formatDuration(args.reviewTtlMs ?? 0);
  const event = (message: string): ReviewDecided['event'] =>
    expired
      ? {
          type: 'ReviewExpired',
          message: `${stage} review expired after ${after}; ${message}`,
          details: { outcome: review.kind },
        }
      : { type: 'ReviewResolved', message, details: { reviewer, outcome: outcome.kind } };

  if (outcome.kind === 'reject') {
    if (!expired) review.reason = outcome.reason;
    return {
      decision: expired
        ? { action: 'fail', error: `review expired after ${after}`, message: `${stage} failed: review expired` }
        : {
            action: 'fail',
            error: `rejected by ${reviewer}: ${outcome.reason}`,
            message: `${stage} failed: rejected by ${reviewer}`,
          },
      event: event(expired ? 'rejected by policy' : `${stage} rejected by ${reviewer}: ${outcome.reason}`),
      review,
    };
  }
  if (outcome.kind === 'request_changes') {
    const decision = changesRequested(stage, args.reason, reviewer, outcome.note, attempts);
    return { decision, event: event(`${stage}: changes requested by ${reviewer}: ${outcome.note}`), review };
  }
  if (outcome.kind === 'approve_with_edits') {
    return {
      decision: {
        action: 'complete',
        artefact: outcome.artefact,
        summary: outcome.note ?? `edited by ${reviewer}`,
        message: `${stage} completed with the reviewer's edits`,
      },
      event: event(`${stage} approved with edits by ${reviewer}${outcome.note ? `: ${outcome.note}` : ''}`),
      review,
    };
  }
  if (args.reason === 'budget_exhausted' && outcome.attempt === undefined) {
    return {
      decision: { action: 'resume' },
      event: event(
        expired
          ? 'approved by policy: the stage continues past the token budget'
          : `${stage}: ${reviewer} approved spending beyond the token budget`,
      ),
      review,
    };
  }
  if (outcome.attempt !== undefined) review.attempt = outcome.attempt;
  const chosen = approvedAttempt(attempts, outcome.attempt);
  return {
    decision: {
      action: 'complete',
      ...(chosen?.artefact !== undefined ? { artefact: chosen.artefact } : {}),
      ...(chosen?.outputSummary !== undefined ? { summary: chosen.outputSummary } : {}),
      message: expired ? `${stage} completed: review expired and policy approves` : `${stage} completed after approval`,
    },
    event: event(
      expired
        ? 'approved by policy'
        : `${stage} approved by ${reviewer}${outcome.attempt !== undefined ? ` (attempt ${outcome.attempt})` : ''}`,
    ),
    review,
  };
}

/** Why an item of an engine before reviewer attention refuses a request for changes (its runners know no retry after a review). */
export function changesRefusedOnEngine(itemId: string, engine: number): string {
  return `work item ${itemId} runs on engine ${engine}, which cannot request changes (engine ${REVIEWER_ATTENTION_ENGINE} and later can); approve, reject or edit its output, or start the item again`;
}
