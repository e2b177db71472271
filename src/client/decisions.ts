/**
 * Every pending decision across work items, TDD nodes and loop stages (issue 27), read from visibility alone
 * in one paged listing: the pure mapping from an execution's memo and search attributes to
 * {@link PendingDecision}s, the listing itself, and the delta listing the review inbox's index applies. What
 * each kind's decisions are, and how they are found, its listing says (its entry in kind-clients.ts).
 */
import type { Client } from '@temporalio/client';
import { listExecutions, type ListedExecution } from './visibility';
import {
  REVIEWS_MEMO_KEY,
  TreadleApprovals,
  TreadleDecisionAt,
  TreadlePendingReviews,
  TreadlePipeline,
  TreadleStatus,
} from '../model/search-attributes';
import { APPROVALS_MEMO_KEY, type ApprovalsMemo } from '../kinds/approval/shapes';
import { HUMAN_MEMO_KEY, type HumanMemo } from '../kinds/human/shapes';
import type { PendingReview, ReviewsMemo } from '../model/state';
import { byRequestTime, type DecisionKind, type PendingDecision } from '../model/decisions';
import { quoted, type DecisionSource, type KindListing } from './decision-listing';
import { KIND_CLIENTS } from './kind-clients';

export type { DecisionSource } from './decision-listing';
// What each kind's listing reads, where the client and its tests have always found it.
export { approvalDecision } from '../kinds/approval/client-listing';
export { tddHumanReason } from '../kinds/tdd/client-listing';
export { loopIdentity } from '../kinds/loop/client-listing';

/** The listings that claim a review entry or pending stage, the last of the table first (see `KindListing`). */
const CLAIMANTS: readonly KindListing[] = KIND_CLIENTS.map((client) => client.listing).reverse();

/** One memo review entry as a decision of the kind whose listing claims it (its execution and reason say). */
export function reviewDecision(source: DecisionSource, review: PendingReview): PendingDecision {
  for (const listing of CLAIMANTS) {
    const decision = listing.fromReview?.(source, review);
    if (decision) return decision;
  }
  throw new Error(`no listing claims the review of ${review.stage} in ${source.workflowId}`);
}

/** A stage named in `TreadlePendingReviews` but absent from the memo: listed with what visibility knows. */
function partialReview(source: DecisionSource, stage: string): PendingDecision {
  for (const listing of CLAIMANTS) {
    const decision = listing.fromPendingStage?.(source, stage);
    if (decision) return decision;
  }
  throw new Error(`no listing claims the pending stage ${stage} of ${source.workflowId}`);
}

/** Every decision one execution waits on, from its memo and attributes (unsorted). */
export function decisionsOf(source: DecisionSource): PendingDecision[] {
  const decisions: PendingDecision[] = [];
  const reviews = source.reviews?.reviews ?? [];
  for (const review of reviews) decisions.push(reviewDecision(source, review));
  // A memo cut short or not written (older workflows) still lists the stages the attribute names.
  const inMemo = new Set(reviews.map((r) => r.stage));
  for (const stage of source.pendingStages) if (!inMemo.has(stage)) decisions.push(partialReview(source, stage));
  for (const { listing } of KIND_CLIENTS) if (listing.others) decisions.push(...listing.others(source, decisions));
  return decisions;
}

/**
 * The narrowest visibility query for the kinds asked (all when none): the clauses of the listings of those kinds,
 * each once (reviews, budgets, TDD steps and engine-7 loops share `TreadlePendingReviews`).
 */
export function pendingDecisionsQuery(options: { pipeline?: string; kinds?: readonly DecisionKind[] } = {}): string {
  const kinds = options.kinds && options.kinds.length > 0 ? options.kinds : undefined;
  const listings = KIND_CLIENTS.filter((client) => !kinds || client.kinds.some((kind) => kinds.includes(kind))).map(
    (client) => client.listing,
  );
  const clauses = [...new Set(listings.flatMap((listing) => listing.clauses))];
  const pending = clauses.length === 1 ? clauses[0]! : `(${clauses.join(' OR ')})`;
  // A kind's own workflows carry their own TreadlePipeline (`ownPipeline`); their memo names the item's pipeline,
  // which listPendingDecisions filters on after reading it.
  const nested = listings.flatMap((listing) => (listing.ownPipeline ? [quoted(listing.ownPipeline)] : []));
  const named = quoted(options.pipeline ?? '');
  const pipeline = !options.pipeline
    ? ''
    : nested.length > 0
      ? ` AND ${TreadlePipeline.name} IN (${[named, ...nested].join(', ')})`
      : ` AND ${TreadlePipeline.name} = ${named}`;
  return `ExecutionStatus = 'Running' AND ${pending}${pipeline}`;
}

/**
 * The query of executions whose decisions changed at or after `since`, or that closed since then (G3). The
 * status clause is not redundant: SQL visibility stores a running execution's close time as the far future
 * (`COALESCE(close_time, '9999-12-31…')`), so `CloseTime >= since` alone matches every running item and each
 * delta would list them all (measured: 12 s a delta at 10,000 pending, as long as a full rebuild).
 */
export function decisionChangesQuery(since: Date): string {
  const at = quoted(since.toISOString());
  const closed = `ExecutionStatus != 'Running' AND CloseTime >= ${at} AND ${TreadlePipeline.name} IS NOT NULL`;
  return `${TreadleDecisionAt.name} >= ${at} OR (${closed})`;
}

/** Reads what {@link decisionsOf} needs from a listed execution (memos only when the attributes say they matter). */
async function sourceOf(execution: ListedExecution): Promise<DecisionSource> {
  const pendingStages = execution.keywordList(TreadlePendingReviews.name);
  const hasApprovals = execution.keywordList(TreadleApprovals.name).length > 0;
  return {
    workflowId: execution.workflowId,
    ...(execution.workflowType ? { workflowType: execution.workflowType } : {}),
    startTime: execution.startTime,
    pipeline: execution.keyword(TreadlePipeline.name),
    status: execution.keyword(TreadleStatus.name),
    pendingStages,
    reviews: pendingStages.length > 0 ? ((await execution.memo(REVIEWS_MEMO_KEY)) as ReviewsMemo | null) : null,
    approvals: hasApprovals ? ((await execution.memo(APPROVALS_MEMO_KEY)) as ApprovalsMemo | null) : null,
    // A human stage's request (issue 40): its stage is among the pending ones.
    human:
      pendingStages.length > 0 ? (((await execution.memo(HUMAN_MEMO_KEY)) as HumanMemo | undefined) ?? null) : null,
  };
}

/**
 * Every pending decision, oldest request first, in one paged visibility listing (see
 * `TreadleClient.listPendingDecisions`). Eventually consistent, like every visibility listing.
 */
export async function listPendingDecisions(
  client: Client,
  options: { pipeline?: string; kinds?: readonly DecisionKind[] } = {},
): Promise<PendingDecision[]> {
  const kinds = options.kinds && options.kinds.length > 0 ? options.kinds : undefined;
  const decisions: PendingDecision[] = [];
  for await (const execution of listExecutions(client, pendingDecisionsQuery(options))) {
    for (const decision of decisionsOf(await sourceOf(execution)))
      if ((!kinds || kinds.includes(decision.kind)) && (!options.pipeline || decision.pipeline === options.pipeline))
        decisions.push(decision);
  }
  return decisions.sort(byRequestTime);
}

/** One execution whose decisions changed: what it waits on now (nothing once it closed). */
export interface DecisionChange {
  workflowId: string;
  closed: boolean;
  decisions: PendingDecision[];
}

/**
 * The executions whose pending decisions changed at or after `since`, each with its current decisions: the
 * review inbox's index replaces an execution's entries with them. Needs `TreadleDecisionAt` (engine 7) on
 * the server; older items only show up here when they close, so the index also reconciles in full now and then.
 */
export async function listDecisionChanges(client: Client, since: Date): Promise<DecisionChange[]> {
  const changes: DecisionChange[] = [];
  for await (const execution of listExecutions(client, decisionChangesQuery(since))) {
    const decisions = execution.running ? decisionsOf(await sourceOf(execution)).sort(byRequestTime) : [];
    changes.push({ workflowId: execution.workflowId, closed: !execution.running, decisions });
  }
  return changes;
}

/**
 * What the listing says workflow `workflowId` waits on now (nothing when it is not running): the detail view's
 * answer when no worker answers its query.
 */
export async function listedDecisionsOf(client: Client, workflowId: string): Promise<PendingDecision[]> {
  const decisions: PendingDecision[] = [];
  const query = `WorkflowId = ${quoted(workflowId)} AND ExecutionStatus = 'Running'`;
  for await (const execution of listExecutions(client, query))
    decisions.push(...decisionsOf(await sourceOf(execution)));
  return decisions;
}
