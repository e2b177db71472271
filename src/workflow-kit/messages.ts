/**
 * The messages every Treadle workflow shares: a work item's (and a TDD node's, which answers to the same wire
 * names) review, state and events. A kind's own messages live in its folder (kinds/<kind>/messages.ts). Wire
 * names equal the constants' stems (STYLE.md).
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { ReviewOutcome, ReviewRequest } from '../model/shapes';
import type { ItemStatus, PendingReview, StateQueryArgs, WorkItemState } from '../model/state';
import type { TreadleEvent } from '../model/shapes';

/**
 * Fire-and-forget review, friendly to `temporal workflow signal`. A signal cannot answer, so invalid input
 * is recorded as a `ReviewInputRejected` event and changes nothing.
 */
export const reviewSignal = defineSignal<[ReviewRequest]>('review');

/** What `resolveReview` answers once the review is accepted. */
export interface ReviewAccepted {
  itemId: string;
  stage: string;
  outcome: ReviewOutcome['kind'];
  reviewer: string;
}

/**
 * Validated review: an update, so the caller learns at once whether the review was accepted, and a bad
 * review (unknown stage, stage not waiting, malformed edits) is rejected before it enters the history.
 */
export const resolveReviewUpdate = defineUpdate<ReviewAccepted, [ReviewRequest]>('resolveReview');

/**
 * The state for UIs and CLIs, with one page of events (`{ eventsAfter, eventLimit }`); a query because
 * reading must never change the item.
 */
export const stateQuery = defineQuery<WorkItemState, [StateQueryArgs?]>('state');

/** What `events` answers: the status and the events after a sequence number, without the stages. */
export interface EventsPage {
  status: ItemStatus;
  eventCount: number;
  events: TreadleEvent[];
  pendingReviews: PendingReview[];
  error?: string;
}

/** New events only, for `watch`: cheap to ask for every half second whatever the item's size. */
export const eventsQuery = defineQuery<EventsPage, [StateQueryArgs?]>('events');
