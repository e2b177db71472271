/**
 * Checking a review against the item's state, shared by the `resolveReview` update's validator (which
 * rejects bad input to the caller) and the `review` signal (which records bad input as an event).
 */
import { parseReviewRequest } from '../model/review-request';
import type { AttemptRecord, ReviewOutcome } from '../model/shapes';
import type { WorkItemState } from '../model/state';

/** Inline edits larger than this would bloat the history (and the update carrying them) past safe sizes. */
export const MAX_INLINE_EDIT_CHARS = 512 * 1024;

/** A review that passed every check, ready to apply. */
export interface AcceptedReview {
  stage: string;
  outcome: ReviewOutcome;
  reviewer: string;
}

/** Validates a review payload against the current state; the error names exactly what is wrong. */
export function checkReview(state: WorkItemState, payload: unknown): { ok: true; review: AcceptedReview } | { ok: false; error: string } {
  const parsed = parseReviewRequest(payload);
  if (!parsed.ok) return { ok: false, error: `invalid review: ${parsed.issues.slice(0, 5).join('; ')}` };
  const { stage, outcome, reviewer } = parsed.review;
  const stageState = state.stages[stage];
  if (!stageState) {
    const known = Object.keys(state.stages);
    return { ok: false, error: `unknown stage "${stage}" in work item ${state.id} (stages: ${known.join(', ') || 'none'})` };
  }
  if (!state.pendingReviews.some((r) => r.stage === stage)) {
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
    if (!chosen) return { ok: false, error: `stage "${stage}" has no attempt ${outcome.attempt} (attempts: 1-${stageState.attempts.length})` };
    if (chosen.artefact === undefined) return { ok: false, error: `attempt ${outcome.attempt} of stage "${stage}" produced no output to approve` };
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
