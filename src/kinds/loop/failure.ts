/**
 * A loop stage waiting after a failed iteration (seed 004, fail fast): the failure as a pending decision, the
 * checks on a resume request's note, and its announcements to webhooks when the work item announces (issue 40).
 * Workflow code: deterministic.
 */
import { MAX_REVIEW_NOTE_CHARS, truncateText } from '../../model/limits';
import type { PendingReview } from '../../model/state';
import { decisionAnnouncer, type Announcer } from '../../notify/announce';
import { now } from '../../workflow-kit/common';
import type { LoopFailure, LoopStageInput } from './shapes';

/** A failed loop as a pending decision, in the shape the reviews memo lists (engine 7's flagged loops). */
export function failedLoopReview(
  input: Pick<LoopStageInput, 'stage' | 'itemId'>,
  iteration: number,
  error: Pick<LoopFailure['error'], 'type' | 'message'>,
): PendingReview {
  return {
    stage: input.stage,
    reason: 'loop_failed',
    message: truncateText(`iteration ${iteration}: ${error.type}: ${error.message}`),
    requestedAt: now(),
    attempt: iteration,
    itemId: input.itemId,
  };
}

/** Why a resume request's note is refused (it goes only with a resume, as non-empty text of at most 4 KiB); none when fine. */
export function noteProblem(request: { action?: string; note?: unknown }): string | undefined {
  const { note } = request;
  if (note === undefined) return undefined;
  if (typeof note !== 'string' || note.trim() === '')
    return `note must say what the rerun iteration should change (non-empty text), not ${JSON.stringify(note)}`;
  if (note.length > MAX_REVIEW_NOTE_CHARS)
    return `the note is ${note.length} characters, over the ${MAX_REVIEW_NOTE_CHARS} a resume note may have; shorten it`;
  if (request.action === 'abandon') return 'a note goes with a resume, not an abandon (give the reason instead)';
  return undefined;
}

/**
 * The announcer of a failed loop waiting to be resumed, when its work item announces (`announces`, engine 8 with
 * a notifications file); else undefined. Its key is the loop's own decision (kind `loop`, subject its stage).
 */
export function loopAnnouncer(
  input: Pick<LoopStageInput, 'stage' | 'itemId' | 'pipeline' | 'announces'>,
  failure: PendingReview,
): Announcer | undefined {
  if (input.announces !== true) return undefined;
  const { stage, itemId, pipeline } = input;
  return decisionAnnouncer(
    { kind: 'loop', subject: stage, itemId, pipeline, stage, requestedAt: failure.requestedAt },
    () => undefined,
  );
}
