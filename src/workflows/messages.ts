/**
 * Messages of the `workItem` workflow. Wire names equal the constants' stems (STYLE.md).
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { ReviewRequest } from '../model/shapes';
import type { WorkItemState } from '../model/state';

/**
 * Fire-and-forget review, friendly to `temporal workflow signal`. A signal cannot answer, so invalid input
 * is recorded as a `ReviewInputRejected` event and changes nothing.
 */
export const reviewSignal = defineSignal<[ReviewRequest]>('review');

/** What `resolveReview` answers once the review is accepted. */
export interface ReviewAccepted {
  itemId: string;
  stage: string;
  outcome: 'approve' | 'reject' | 'approve_with_edits';
  reviewer: string;
}

/**
 * Validated review: an update, so the caller learns at once whether the review was accepted, and a bad
 * review (unknown stage, stage not waiting, malformed edits) is rejected before it enters the history.
 */
export const resolveReviewUpdate = defineUpdate<ReviewAccepted, [ReviewRequest]>('resolveReview');

/** The whole state for UIs and CLIs; a query because reading must never change the item. */
export const stateQuery = defineQuery<WorkItemState>('state');
