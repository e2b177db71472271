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
  /**
   * Set by the client (never by the workflow) when the same review was sent again: this is the first one's answer,
   * and the repeat changed nothing (see client/repeated-updates.ts).
   */
  repeated?: true;
}

/**
 * Validated review: an update, so the caller learns at once whether the review was accepted, and a bad
 * review (unknown stage, stage not waiting, malformed edits) is rejected before it enters the history.
 */
export const resolveReviewUpdate = defineUpdate<ReviewAccepted, [ReviewRequest]>('resolveReview');

/** The `cancelItem` update's argument: who cancels the work item and why (both optional). */
export interface CancelItemRequest {
  by?: string;
  reason?: string;
}

/** What `cancelItem` answers once the item has recorded who cancels it. */
export interface CancelItemAccepted {
  itemId: string;
  by: string;
  reason?: string;
}

/**
 * Records who cancels a work item and why, before the caller requests Temporal's cancellation of its run (the
 * item cannot cancel its own run: a workflow that throws a cancellation nobody requested ends failed, not
 * cancelled). Its validator refuses an item that has finished, so a refusal never enters the history.
 */
export const cancelItemUpdate = defineUpdate<CancelItemAccepted, [CancelItemRequest]>('cancelItem');

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
