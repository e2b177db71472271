/**
 * Custom search attributes, registered on the dev server at start (`treadle dev`, docker-compose) and kept
 * current by the workflow, so work items and pending reviews can be listed with visibility queries.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

export const TreadlePipeline = defineSearchAttributeKey('TreadlePipeline', SearchAttributeType.KEYWORD);
export const TreadleStatus = defineSearchAttributeKey('TreadleStatus', SearchAttributeType.KEYWORD);
/** The stages of an item that wait for a human; absent when none do. */
export const TreadlePendingReviews = defineSearchAttributeKey(
  'TreadlePendingReviews',
  SearchAttributeType.KEYWORD_LIST,
);

/** The work item's correlation id (seed 003): a UUID made at start, on every activity, call record and log line. */
export const TreadleCorrelationId = defineSearchAttributeKey('TreadleCorrelationId', SearchAttributeType.KEYWORD);

/**
 * The ids of an item's approval requests, pending first, then decided ones newest first (at most
 * {@link MAX_APPROVAL_IDS_ATTRIBUTE}); absent when it has none. Items started before decided ids were kept
 * name only their pending ones. Which requests are pending is in the `treadleApprovals` memo.
 */
export const TreadleApprovals = defineSearchAttributeKey('TreadleApprovals', SearchAttributeType.KEYWORD_LIST);
/** Ids kept in the attribute (visibility limits a value to 2 KB); the rest are found through the state query. */
export const MAX_APPROVAL_IDS_ATTRIBUTE = 100;

/**
 * When the set of decisions the workflow waits on last changed (workflow time; engine 7): a review, approval,
 * human step or failed loop appeared or was decided. Kept after the set empties, so a listing of the changes
 * since a moment (the review inbox's) sees decisions disappear as well as appear.
 */
export const TreadleDecisionAt = defineSearchAttributeKey('TreadleDecisionAt', SearchAttributeType.DATETIME);

/** The item a fork was made from (`treadle fork`): the original lists its forks with `TreadleForkOf = '<id>'`. */
export const TreadleForkOf = defineSearchAttributeKey('TreadleForkOf', SearchAttributeType.KEYWORD);

/** The evaluation run an item belongs to (`treadle eval run`): its cases are listed with `TreadleEvalRun = '<run>'`. */
export const TreadleEvalRun = defineSearchAttributeKey('TreadleEvalRun', SearchAttributeType.KEYWORD);

/** `name=Type` pairs as `temporal server start-dev --search-attribute` takes them. */
export const SEARCH_ATTRIBUTE_DEFINITIONS: Record<string, 'Keyword' | 'KeywordList' | 'Datetime'> = {
  TreadlePipeline: 'Keyword',
  TreadleStatus: 'Keyword',
  TreadlePendingReviews: 'KeywordList',
  TreadleApprovals: 'KeywordList',
  TreadleCorrelationId: 'Keyword',
  TreadleDecisionAt: 'Datetime',
  TreadleForkOf: 'Keyword',
  TreadleEvalRun: 'Keyword',
};

/**
 * The `temporal operator search-attribute create` commands that register Treadle's search attributes on a
 * server `treadle dev` did not start: one per attribute (CLI 1.5.1 takes `--name` more than once but adds
 * only the first name when it does).
 */
export function searchAttributeCommands(): string[] {
  return Object.entries(SEARCH_ATTRIBUTE_DEFINITIONS).map(
    ([name, type]) => `temporal operator search-attribute create --name ${name} --type ${type}`,
  );
}

/**
 * A server's refusal of a query or start that names a search attribute it does not know, explained with
 * how to register Treadle's; any other message comes back as it was.
 */
export function explainSearchAttributeError(message: string): string {
  if (!/not a valid search attribute|no mapping defined for search attribute|unknown search attribute/i.test(message))
    return message;
  return `${message} (the server does not have Treadle's search attributes: treadle dev and docker-compose register them; on another server run: ${searchAttributeCommands().join(' && ')})`;
}

/** Visibility query listing every work item with a pending approval request. */
export const PENDING_APPROVALS_QUERY = "ExecutionStatus = 'Running' AND TreadleApprovals IS NOT NULL";

/** Visibility query listing every work item with a pending review. */
export const PENDING_REVIEWS_QUERY = "ExecutionStatus = 'Running' AND TreadlePendingReviews IS NOT NULL";

/** Memo key under which a work item keeps its pending reviews for listings (`ReviewsMemo`). */
export const REVIEWS_MEMO_KEY = 'treadleReviews';
