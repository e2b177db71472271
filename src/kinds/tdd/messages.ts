/**
 * A TDD node's messages (seed 001): its `state` query, the merge handshake between a child and its parent,
 * and the sibling broadcast. Its review and events messages are the work item's (workflow-kit/messages.ts).
 */
import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { StateQueryArgs } from '../../model/state';
import type { UsageTotals } from '../../model/shapes';
import type { TddNodeState } from './shapes';

/** A TDD node's `state` query: the work item's wire name, answered with the node's own state and one page of events. */
export const tddStateQuery = defineQuery<TddNodeState, [StateQueryArgs?]>('state');

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
