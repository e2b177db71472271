/**
 * The contract each kind's listing implements (`src/kinds/<kind>/client-listing.ts`, the `listing` of the kind's
 * entry in kind-clients.ts): how the pending decisions of one kind are found in a visibility listing
 * (decisions.ts) and read from what it lists of an execution, so the listing never names a kind. Also the shapes
 * and helpers those listings share. No I/O here: the listings are pure, and unit-tested without a server.
 */
import { TreadlePendingReviews } from '../model/search-attributes';
import type { ApprovalsMemo } from '../kinds/approval/shapes';
import type { HumanMemo } from '../kinds/human/shapes';
import type { PendingReview, ReviewsMemo } from '../model/state';
import { ANSWERS, decisionKey, type DecisionKind, type PendingDecision } from '../model/decisions';

/** What the mapping reads of one execution: its id, type, start, two keywords, the pending stages and two memos. */
export interface DecisionSource {
  workflowId: string;
  workflowType?: string;
  startTime: Date;
  /** `TreadlePipeline`. */
  pipeline?: string;
  /** `TreadleStatus`. */
  status?: string;
  /** `TreadlePendingReviews`. */
  pendingStages: readonly string[];
  reviews?: ReviewsMemo | null;
  approvals?: ApprovalsMemo | null;
  /** `treadleHuman`: the pending requests of the item's human stages (issue 40). */
  human?: HumanMemo | null;
}

/**
 * How one kind's pending decisions (the `kinds` of its entry in kind-clients.ts) are found and read in a listing.
 * The listing asks each entry of the table: its clauses and own pipeline build the query (in the table's order;
 * a listing asked for other kinds only leaves them out), a memo review entry or a pending stage is the decision
 * of the last entry that claims it (so the work item's own reviews, first in the table, take whatever no kind
 * claims), and each entry then adds the decisions it reads elsewhere (in the table's order).
 */
export interface KindListing {
  /**
   * The visibility clauses that match a running execution waiting on one of its decisions; a clause several
   * entries share (see {@link PENDING_STAGES_CLAUSE}) is sent once.
   */
  readonly clauses: readonly string[];
  /**
   * The `TreadlePipeline` its own workflows publish when they are not work items: a pipeline filter keeps them,
   * since their memo names the item's pipeline, which the listing filters on after reading it.
   */
  readonly ownPipeline?: string;
  /** Whether a listed execution is this kind's own workflow (a TDD node, a loop stage), not a work item. */
  owns?(source: DecisionSource): boolean;
  /** A memo review entry (`treadleReviews`) as this kind's decision; undefined when the entry is not its. */
  fromReview?(source: DecisionSource, review: PendingReview): PendingDecision | undefined;
  /** A stage `TreadlePendingReviews` names but the memo lacks, as this kind's partial decision; else undefined. */
  fromPendingStage?(source: DecisionSource, stage: string): PendingDecision | undefined;
  /** Its decisions read from the rest of the source, after those of the reviews memo and pending stages (`found`). */
  others?(source: DecisionSource, found: readonly PendingDecision[]): PendingDecision[];
}

/** Reviews, budgets, TDD steps and engine-7 loops name their waiting stage in `TreadlePendingReviews`. */
export const PENDING_STAGES_CLAUSE = `${TreadlePendingReviews.name} IS NOT NULL`;

/** Quotes a value for a visibility query. */
export function quoted(value: string): string {
  return `'${value.replace(/'/g, "''")}'`;
}

/** The pipeline a decision of `source` shows: its reviews memo's (a node's or loop's item), else its attribute. */
function reviewsPipeline(source: DecisionSource): string {
  return source.reviews?.pipeline || source.pipeline || '';
}

/**
 * A memo review entry as a decision of `kind` with `reason` (the kind's reading of the entry), keyed by its stage;
 * `itemId` when the kind knows the item better than the entry does.
 */
export function reviewEntryDecision(
  source: DecisionSource,
  review: PendingReview,
  kind: DecisionKind,
  reason: PendingDecision['reason'],
  itemId: string = review.itemId ?? source.workflowId,
): PendingDecision {
  const common = {
    workflowId: source.workflowId,
    itemId,
    pipeline: reviewsPipeline(source),
    stage: review.stage,
    message: review.message,
    requestedAt: review.requestedAt,
    ...(review.expiresAt ? { expiresAt: review.expiresAt } : {}),
    ...(review.dueAt ? { dueAt: review.dueAt } : {}),
    ...(review.escalated ? { escalated: review.escalated } : {}),
    attempt: review.attempt,
    ...(review.attempts !== undefined ? { attempts: review.attempts } : {}),
    ...(review.reviewers ? { reviewers: review.reviewers } : {}),
  };
  return { key: decisionKey(source.workflowId, kind, review.stage), kind, ...common, reason, answers: ANSWERS[kind] };
}

/** A stage named in `TreadlePendingReviews` but absent from the memo, as a `kind` decision with what visibility knows. */
export function partialStageDecision(
  source: DecisionSource,
  stage: string,
  kind: DecisionKind,
  reason: PendingDecision['reason'],
): PendingDecision {
  return {
    key: decisionKey(source.workflowId, kind, stage),
    kind,
    workflowId: source.workflowId,
    itemId: source.workflowId,
    pipeline: reviewsPipeline(source),
    stage,
    reason,
    message: 'details not in the listing; open it to see them',
    requestedAt: source.startTime.toISOString(),
    answers: ANSWERS[kind],
    partial: true,
  };
}
