/**
 * What a TDD node shows visibility: its status and waiting human step as search attributes, the step in the
 * `treadleReviews` memo the listings read, and (patched in) `TreadleDecisionAt` when its pending set changes.
 * Each upsert is a command and a history event, so only changes are upserted.
 */
import { patched, upsertMemo, upsertSearchAttributes } from '@temporalio/workflow';
import {
  REVIEWS_MEMO_KEY,
  TreadleDecisionAt,
  TreadlePendingReviews,
  TreadlePipeline,
  TreadleStatus,
} from '../../model/search-attributes';
import { Publications, pendingDecisionSet } from '../../workflow-kit/publishing';
import type { TddNodeState } from './shapes';

/** The listing's pipeline name for TDD nodes (`treadle reviews --pipeline tdd`). */
export const TDD_PIPELINE_NAME = 'tdd';

/** The patch that adds `TreadleDecisionAt` to the node's upsert (docs/versioning.md: `patched()` for tddNode). */
export const TDD_DECISION_AT_PATCH = 'tdd-decision-at';

/** The names under which the last published values are kept. */
const ATTRIBUTES = 'attributes';
const DECISIONS = 'decisions';

/** A node's publications; asks the patch once, when the node starts, so old histories replay without it. */
export class NodePublications {
  private readonly published = new Publications();
  private readonly decisionAt = patched(TDD_DECISION_AT_PATCH);

  /** Upserts the attributes and memo when the node's status or waiting step changed. */
  publish(state: TddNodeState): void {
    const { published } = this;
    const stages = state.pendingReviews.map((r) => r.stage);
    const first = !published.has(ATTRIBUTES);
    const decisionsChanged =
      this.decisionAt && published.decisionsChanged(DECISIONS, pendingDecisionSet(state.pendingReviews));
    const attributesChanged = published.changed(ATTRIBUTES, JSON.stringify([state.status, stages]));
    if (!attributesChanged && !decisionsChanged) return;
    upsertSearchAttributes([
      ...(first ? [{ key: TreadlePipeline, value: TDD_PIPELINE_NAME }] : []),
      { key: TreadleStatus, value: state.status },
      { key: TreadlePendingReviews, value: stages.length > 0 ? stages : null },
      ...(decisionsChanged ? [{ key: TreadleDecisionAt, value: new Date() }] : []),
    ]);
    upsertMemo({
      [REVIEWS_MEMO_KEY]:
        state.pendingReviews.length > 0
          ? { pipeline: TDD_PIPELINE_NAME, reviews: state.pendingReviews, omitted: 0 }
          : null,
    });
  }
}
