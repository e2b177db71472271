/**
 * Custom search attributes, registered on the dev server at start (`treadle dev`, docker-compose) and kept
 * current by the workflow, so work items and pending reviews can be listed with visibility queries.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

export const TreadlePipeline = defineSearchAttributeKey('TreadlePipeline', SearchAttributeType.KEYWORD);
export const TreadleStatus = defineSearchAttributeKey('TreadleStatus', SearchAttributeType.KEYWORD);
/** The stages of an item that wait for a human; absent when none do. */
export const TreadlePendingReviews = defineSearchAttributeKey('TreadlePendingReviews', SearchAttributeType.KEYWORD_LIST);

/** The work item's correlation id (seed 003): a UUID made at start, on every activity, call record and log line. */
export const TreadleCorrelationId = defineSearchAttributeKey('TreadleCorrelationId', SearchAttributeType.KEYWORD);

/** The ids of an item's pending approval requests (the first {@link MAX_APPROVAL_IDS_ATTRIBUTE}); absent when none. */
export const TreadleApprovals = defineSearchAttributeKey('TreadleApprovals', SearchAttributeType.KEYWORD_LIST);
/** Ids kept in the attribute (visibility limits a value to 2 KB); the rest are found through the state query. */
export const MAX_APPROVAL_IDS_ATTRIBUTE = 100;

/** `name=Type` pairs as `temporal server start-dev --search-attribute` takes them. */
export const SEARCH_ATTRIBUTE_DEFINITIONS: Record<string, 'Keyword' | 'KeywordList'> = {
  TreadlePipeline: 'Keyword',
  TreadleStatus: 'Keyword',
  TreadlePendingReviews: 'KeywordList',
  TreadleApprovals: 'KeywordList',
  TreadleCorrelationId: 'Keyword',
};

/** Visibility query listing every work item with a pending approval request. */
export const PENDING_APPROVALS_QUERY = "ExecutionStatus = 'Running' AND TreadleApprovals IS NOT NULL";

/** Visibility query listing every work item with a pending review. */
export const PENDING_REVIEWS_QUERY = "ExecutionStatus = 'Running' AND TreadlePendingReviews IS NOT NULL";

/** Memo key under which a work item keeps its pending reviews for listings (`ReviewsMemo`). */
export const REVIEWS_MEMO_KEY = 'treadleReviews';
