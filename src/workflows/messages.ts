/**
 * Messages of the `workItem` workflow. Wire names equal the constants' stems (STYLE.md).
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { ApprovalDecided, ApprovalDecision } from '../kinds/approval/shapes';
import { LOOP_QUEUE_SIGNAL, RESUME_LOOP_UPDATE, type LoopState, type ResumeRequest } from '../kinds/loop/shapes';
import type { ReviewRequest } from '../model/shapes';
import type { TddNodeState } from '../kinds/tdd/shapes';
import type { ItemStatus, PendingReview, StateQueryArgs, WorkItemState } from '../model/state';
import type { TreadleEvent, UsageTotals } from '../model/shapes';

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

/**
 * The state for UIs and CLIs, with one page of events (`{ eventsAfter, eventLimit }`); a query because
 * reading must never change the item.
 */
export const stateQuery = defineQuery<WorkItemState, [StateQueryArgs?]>('state');

/** A TDD node's `state` query: the work item's wire name, answered with the node's own state and one page of events. */
export const tddStateQuery = defineQuery<TddNodeState, [StateQueryArgs?]>('state');

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

// ---------------------------------------------------------------------------------------------------------
// Approval requests (seed 003): decided by id.

/**
 * Fire-and-forget decision, friendly to `temporal workflow signal --name approval --input '{"id": …,
 * "decision": "approve"}'`; an invalid one is recorded as an `ApprovalInputRejected` event and changes nothing.
 */
export const approvalSignal = defineSignal<[ApprovalDecision]>('approval');

/** Validated decision: a stale or double decision is refused to the caller and never enters history. */
export const decideApprovalUpdate = defineUpdate<ApprovalDecided, [ApprovalDecision]>('decideApproval');

// ---------------------------------------------------------------------------------------------------------
// TDD nodes (seed 001): the merge handshake between a child and its parent, and the sibling broadcast.

/** A child asks its parent to judge and then take its merge (the parent's worktree is the parent's). */
export interface MergeRequest {
  nodePath: string;
  workflowId: string;
  specId: string;
  branch: string;
  /** The child's `TestsPassed` (ImplResult) and context, for the parent's judge. */
  implResultRef: string;
  contextRef: string;
}
export const mergeRequestSignal = defineSignal<[MergeRequest]>('tddMergeRequest');

/** The parent's answer: merge now into this worktree, or go back to TDDWriteTests with the judge's critiques. */
export type MergeGrant =
  | { granted: true; parentNodeId: string; parentBranch: string; parentWorktree: string }
  | { granted: false; reason: string; critiquesRef?: string };
export const mergeGrantSignal = defineSignal<[MergeGrant]>('tddMergeGrant');

/** The child's merger finished (either way); the parent's worktree is free again. */
export interface MergeDone {
  nodePath: string;
  merged: boolean;
  mergeCommit?: string;
  mergeRef?: string;
  impactLevel?: 'Trivial' | 'Additive' | 'Breaking';
  changesRef?: string;
  summary: string;
  /** The totals of the model calls of the child's tree so far (absent from children before totals). */
  usage?: UsageTotals;
}
export const mergeDoneSignal = defineSignal<[MergeDone]>('tddMergeDone');

/** A sibling merged into the parent's branch: rebase at the next safe point. */
export interface SiblingMerged {
  author: string;
  impactLevel: 'Trivial' | 'Additive' | 'Breaking';
  /** The MergeEvent (author, impact, changes) in the blob store. */
  mergeEventRef: string;
  parentBranch: string;
  newParentHead: string;
}
export const siblingMergedSignal = defineSignal<[SiblingMerged]>('tddSiblingMerged');

/** A loop stage's state (seed 004): iterations, decisions, the failure waiting for a resume. */
export const loopStateQuery = defineQuery<LoopState>('loopState');
/**
 * Resumes a failed loop stage from the iteration that failed (`action: "resume"`), or gives it up
 * (`abandon`: the stage fails for good). Refused, with the reason, when the loop is not failed.
 */
export const resumeLoopUpdate = defineUpdate<{ resumed: boolean; from: number }, [ResumeRequest]>(RESUME_LOOP_UPDATE);
/** A signal-fed queue's owner reports how many items are left (seed 004's queue termination). */
export const loopQueueSignal = defineSignal<[{ pending: number }]>(LOOP_QUEUE_SIGNAL);
