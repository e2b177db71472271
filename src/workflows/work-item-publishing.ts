/**
 * What a work item publishes where listings and the Web UI look: its status, waiting reviews and approval
 * requests as search attributes, its approvals and reviews as memo, and the Web UI's current details. Each
 * is written only when it changed: an upsert is a command, a history event and a visibility write.
 */
import { setCurrentDetails, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import {
  MAX_APPROVAL_IDS_ATTRIBUTE,
  REVIEWS_MEMO_KEY,
  TreadleApprovals,
  TreadleDecisionAt,
  TreadlePendingReviews,
  TreadlePipeline,
  TreadleStatus,
} from '../model/search-attributes';
import type { WorkItemState } from '../model/state';
import { APPROVALS_MEMO_KEY } from '../kinds/workflow-table';
import { Publications, attributeStages, pendingDecisionSet, reviewsMemo } from '../workflow-kit/publishing';
import { approvalsMemoOf, renderDetails } from './work-item-details';

/** The name under which the search attributes' last published value is kept. */
const ATTRIBUTES = 'attributes';
/** The name under which the pending decisions last published are kept (engine 7). */
const DECISIONS = 'decisions';

/** A work item's publications: what it last published, and publishing what changed since. */
export class WorkItemPublications {
  private readonly published = new Publications();

  /**
   * TreadleClient.start sets the pipeline and `running` as the item starts: nothing to upsert until they
   * change (an upsert is an event and a visibility write). Items started by other means get the upsert.
   */
  assumeStartAttributes(pipeline: string): void {
    const started = workflowInfo().typedSearchAttributes;
    if (
      started.get(TreadlePipeline) === pipeline &&
      started.get(TreadleStatus) === 'running' &&
      started.get(TreadlePendingReviews) === undefined
    )
      this.published.assume(ATTRIBUTES, JSON.stringify(['running', [], []]));
  }

  /**
   * Upserts what changed of `state` and refreshes the Web UI details; `publishesDecisions` (engine 7) also
   * upserts when the set of pending decisions changed.
   */
  publish(state: WorkItemState, publishesDecisions: boolean): void {
    const waiting = attributeStages(state.pendingReviews.map((r) => r.stage));
    const approvalIds = pendingApprovalIds(state).slice(0, MAX_APPROVAL_IDS_ATTRIBUTE);
    const first = !this.published.has(ATTRIBUTES);
    // Engine 7 upserts when the pending set changed even if the attribute's cut-short stage list did not.
    const decisionsChanged =
      publishesDecisions &&
      this.published.decisionsChanged(DECISIONS, pendingDecisionSet(state.pendingReviews, pendingApprovalIds(state)));
    const attributesChanged = this.published.changed(ATTRIBUTES, JSON.stringify([state.status, waiting, approvalIds]));
    if (attributesChanged || decisionsChanged) {
      // When to upsert stays what it was (commands replay); the value also names decided requests, newest
      // first, so a decision on one finds its item and hears how it was decided instead of "not found".
      const decidedIds = (state.approvals ?? [])
        .filter((r) => r.status !== 'pending')
        .map((r) => r.id)
        .reverse();
      const searchableIds = [...approvalIds, ...decidedIds].slice(0, MAX_APPROVAL_IDS_ATTRIBUTE);
      upsertSearchAttributes([
        ...(first ? [{ key: TreadlePipeline, value: state.pipeline }] : []),
        { key: TreadleStatus, value: state.status },
        { key: TreadlePendingReviews, value: waiting.length > 0 ? waiting : null },
        // Only once an item has had approvals: items without any never carry the attribute.
        ...(approvalIds.length > 0 || state.approvals !== undefined
          ? [{ key: TreadleApprovals, value: searchableIds.length > 0 ? searchableIds : null }]
          : []),
        // Workflow time: deterministic, and when the set changed as far as a listing of changes is concerned.
        ...(decisionsChanged ? [{ key: TreadleDecisionAt, value: new Date() }] : []),
      ]);
    }
    if (state.approvals !== undefined) this.published.memo(APPROVALS_MEMO_KEY, approvalsMemoOf(state), false);
    this.published.memo(REVIEWS_MEMO_KEY, reviewsMemo(state.pipeline, state.pendingReviews), true);
    setCurrentDetails(renderDetails(state));
  }
}

/** The ids of the item's approval requests that wait for a decision, oldest first. */
function pendingApprovalIds(state: WorkItemState): string[] {
  return (state.approvals ?? []).filter((r) => r.status === 'pending').map((r) => r.id);
}
