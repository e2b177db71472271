/**
 * Cross-item listings read from visibility alone (search attributes and memo kept by the workflows), so no
 * item is queried and no worker is needed: pending reviews and pending approval requests.
 */
import type { Client } from '@temporalio/client';
import { listExecutions } from './visibility';
import {
  PENDING_APPROVALS_QUERY,
  PENDING_REVIEWS_QUERY,
  REVIEWS_MEMO_KEY,
  TreadlePendingReviews,
  TreadlePipeline,
} from '../model/search-attributes';
import { APPROVALS_MEMO_KEY, type ApprovalsMemo } from '../kinds/approval/shapes';
import type { PendingReview, ReviewsMemo } from '../model/state';
import { HUMAN_MEMO_KEY, type HumanMemo } from '../kinds/human/shapes';

/** A pending review across work items. */
export interface PendingReviewListing extends PendingReview {
  itemId: string;
  pipeline: string;
}

/** A pending approval request across work items (no payload: `TreadleClient.getApproval` has it). */
export type ApprovalListing = ApprovalsMemo['requests'][number] & { pipeline: string };

/**
 * Orders strings by UTF-16 code units: ISO timestamps and ids sort the same on every machine, and 1,000
 * listings sort in well under a millisecond (`localeCompare` goes through ICU, ~5 ms for 1,000).
 */
function byCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** A visibility query narrowed to one pipeline when one is named. */
function forPipeline(query: string, pipeline: string | undefined): string {
  return pipeline ? `${query} AND TreadlePipeline = '${pipeline.replace(/'/g, "''")}'` : query;
}

/** Pending reviews across all work items, oldest request first (see `TreadleClient.listPendingReviews`). */
export async function listPendingReviews(
  client: Client,
  options: { pipeline?: string } = {},
): Promise<PendingReviewListing[]> {
  const listings: PendingReviewListing[] = [];
  for await (const execution of listExecutions(client, forPipeline(PENDING_REVIEWS_QUERY, options.pipeline))) {
    const pipeline = execution.keyword(TreadlePipeline.name) ?? '';
    const memo = (await execution.memo(REVIEWS_MEMO_KEY)) as ReviewsMemo | null | undefined;
    const reviews = memo?.reviews ?? [];
    for (const review of reviews) listings.push({ ...review, itemId: execution.workflowId, pipeline });
    // Stages named in the search attribute but not in the memo (a memo cut short, or written by an older
    // workflow version) are still listed, with what visibility knows.
    const inMemo = new Set(reviews.map((r) => r.stage));
    // A human stage waits on a person's output, not a review (`treadle decisions` lists it).
    const human = (await execution.memo(HUMAN_MEMO_KEY)) as HumanMemo | null | undefined;
    for (const request of human?.requests ?? []) inMemo.add(request.stage);
    for (const stage of execution.keywordList(TreadlePendingReviews.name)) {
      if (inMemo.has(stage)) continue;
      listings.push({
        itemId: execution.workflowId,
        pipeline,
        stage,
        reason: 'unknown',
        message: 'details not in the listing; see treadle status',
        requestedAt: execution.startTime.toISOString(),
        attempt: 0,
      });
    }
  }
  return listings.sort(
    (a, b) =>
      byCodeUnits(a.requestedAt, b.requestedAt) || byCodeUnits(a.itemId, b.itemId) || byCodeUnits(a.stage, b.stage),
  );
}

/** Pending approval requests across all work items, oldest first (see `TreadleClient.listApprovals`). */
export async function listApprovals(client: Client, options: { pipeline?: string } = {}): Promise<ApprovalListing[]> {
  const listings: ApprovalListing[] = [];
  for await (const execution of listExecutions(client, forPipeline(PENDING_APPROVALS_QUERY, options.pipeline))) {
    const pipeline = execution.keyword(TreadlePipeline.name) ?? '';
    const memo = (await execution.memo(APPROVALS_MEMO_KEY)) as ApprovalsMemo | null | undefined;
    for (const request of memo?.requests ?? [])
      if (request.status === 'pending') listings.push({ ...request, pipeline });
  }
  return listings.sort((a, b) => byCodeUnits(a.createdAt, b.createdAt) || byCodeUnits(a.id, b.id));
}
