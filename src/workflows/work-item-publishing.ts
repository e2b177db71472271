/**
 * What a work item publishes where listings and the Web UI look: its status and waiting reviews as search
 * attributes, its reviews as memo, what the kinds whose decisions it holds publish for them (their `publish`
 * hooks: approval requests as a search attribute and memo), and the Web UI's current details. Each is
 * written only when it changed: an upsert is a command, a history event and a visibility write.
 */
import { setCurrentDetails, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import {
  REVIEWS_MEMO_KEY,
  TreadleCorrelationId,
  TreadleDecisionAt,
  TreadlePendingReviews,
  TreadlePipeline,
  TreadleStatus,
} from '../model/search-attributes';
import type { WorkItemState } from '../model/state';
import { kindPublications } from '../kinds/workflow-table';
import { Publications, attributeStages, pendingDecisionSet, reviewsMemo } from '../workflow-kit/publishing';
import { renderDetails } from './work-item-details';

/** The name under which the search attributes' last published value is kept. */
const ATTRIBUTES = 'attributes';
/** The name under which the pending decisions last published are kept (engine 7). */
const DECISIONS = 'decisions';

/** A work item's publications: what it last published, and publishing what changed since. */
export class WorkItemPublications {
  private readonly published = new Publications();
  /** The item's correlation id, for the first upsert: its starter did not set it (engine 9). */
  private correlationId: string | undefined;

  /**
   * TreadleClient.start sets the pipeline and `running` as the item starts: nothing to upsert until they
   * change (an upsert is an event and a visibility write). Items started by other means get the upsert.
   */
  assumeStartAttributes({ pipeline, correlationId }: WorkItemState, lineage: boolean): void {
    const started = workflowInfo().typedSearchAttributes;
    // Engine 9 publishes a correlation id the starter did not set (a schedule's firing) in its first upsert.
    if (lineage && started.get(TreadleCorrelationId) !== correlationId) this.correlationId = correlationId;
    else if (
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
    const kinds = kindPublications(state);
    // The kinds' waiting stages (human) after the item's reviews; no kind of an older item has any.
    const waiting = attributeStages([
      ...state.pendingReviews.map((r) => r.stage),
      ...kinds.flatMap((k) => k.stages ?? []),
    ]);
    // The kinds' watched ids in one list: with one such kind (approval) this is the text every recorded
    // history was published by, and the one assumeStartAttributes assumes.
    const watched = kinds.flatMap((k) => k.attribute?.watched ?? []);
    const pending = kinds.flatMap((k) => k.pending);
    const first = !this.published.has(ATTRIBUTES);
    // Engine 7 upserts when the pending set changed even if the attribute's cut-short stage list did not.
    const decisionsChanged =
      publishesDecisions &&
      this.published.decisionsChanged(DECISIONS, pendingDecisionSet(state.pendingReviews, pending));
    const attributesChanged = this.published.changed(ATTRIBUTES, JSON.stringify([state.status, waiting, watched]));
    if (attributesChanged || decisionsChanged) {
      upsertSearchAttributes([
        ...(first ? [{ key: TreadlePipeline, value: state.pipeline }] : []),
        ...(first && this.correlationId !== undefined
          ? [{ key: TreadleCorrelationId, value: this.correlationId }]
          : []),
        { key: TreadleStatus, value: state.status },
        { key: TreadlePendingReviews, value: waiting.length > 0 ? waiting : null },
        // The kinds' (TreadleApprovals), once the item has had their decisions: others never carry them.
        ...kinds.flatMap((k) => (k.attribute !== undefined ? [k.attribute.value()] : [])),
        // Workflow time: deterministic, and when the set changed as far as a listing of changes is concerned.
        ...(decisionsChanged ? [{ key: TreadleDecisionAt, value: new Date() }] : []),
      ]);
    }
    for (const { memo } of kinds)
      for (const [key, value] of Object.entries(memo)) this.published.memo(key, value, false);
    this.published.memo(REVIEWS_MEMO_KEY, reviewsMemo(state.pipeline, state.pendingReviews), true);
    setCurrentDetails(renderDetails(state, kinds));
  }
}
