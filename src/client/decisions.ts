/**
 * Every pending decision across work items, TDD nodes and loop stages (issue 27), read from visibility alone
 * in one paged listing: the pure mapping from an execution's memo and search attributes to
 * {@link PendingDecision}s, the listing itself, and the delta listing the review inbox's index applies.
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
import type { PendingReview, ReviewsMemo } from '../model/state';
import {
  ANSWERS,
  byRequestTime,
  decisionKey,
  type DecisionKind,
  type PendingDecision,
  type TddHumanReason,
} from '../model/decisions';

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
}

/** The message prefixes engine-6 TDD nodes write (`stuck: …`), the only place their human reason was kept. */
const TDD_PREFIX = /^(stuck|clarification|review_rejected):\s*/;

const TDD_NODE_TYPE = 'tddNode';
const LOOP_TYPE = 'loopStage';

/** Whether the execution is a TDD node (by its pipeline attribute, or its workflow type when the server says). */
function isTddNode(source: DecisionSource): boolean {
  return source.pipeline === 'tdd' || source.workflowType === TDD_NODE_TYPE;
}

/** Whether the execution is a loop stage's workflow. */
function isLoop(source: DecisionSource): boolean {
  return source.pipeline === 'loop' || source.workflowType === LOOP_TYPE;
}

/** A TDD node's human reason: the memo's `human` field (engine 7), else the message's prefix (engine 6). */
export function tddHumanReason(review: Pick<PendingReview, 'human' | 'message'>): TddHumanReason {
  if (review.human) return review.human;
  const prefix = TDD_PREFIX.exec(review.message)?.[1] as TddHumanReason | undefined;
  // Engine-6 nodes only ask a person for these three; an unprefixed message is the stuck report's shape.
  return prefix ?? 'stuck';
}

/**
 * A loop stage workflow's id is `<itemId>.<stage>.<attempt>` (kinds/loop/workflow.ts): its work item and stage
 * when the id has that shape, else the id itself and `loop`.
 */
export function loopIdentity(workflowId: string): { itemId: string; stage: string; attempt?: number } {
  const match = /^(.+)\.([^.]+)\.(\d+)$/.exec(workflowId);
  return match
    ? { itemId: match[1]!, stage: match[2]!, attempt: Number(match[3]) }
    : { itemId: workflowId, stage: 'loop' };
}

/** One memo review entry as a decision of the kind its execution and reason make it. */
export function reviewDecision(source: DecisionSource, review: PendingReview): PendingDecision {
  const pipeline = source.reviews?.pipeline || source.pipeline || '';
  const common = {
    workflowId: source.workflowId,
    itemId: review.itemId ?? source.workflowId,
    pipeline,
    stage: review.stage,
    message: review.message,
    requestedAt: review.requestedAt,
    ...(review.expiresAt ? { expiresAt: review.expiresAt } : {}),
    attempt: review.attempt,
    ...(review.attempts !== undefined ? { attempts: review.attempts } : {}),
    ...(review.reviewers ? { reviewers: review.reviewers } : {}),
  };
  const kind: DecisionKind =
    review.reason === 'loop_failed'
      ? 'loop'
      : isTddNode(source)
        ? 'tdd'
        : review.reason === 'budget_exhausted'
          ? 'budget'
          : 'review';
  if (kind === 'loop' && !review.itemId) common.itemId = loopIdentity(source.workflowId).itemId;
  const reason = kind === 'tdd' ? tddHumanReason(review) : review.reason;
  return { key: decisionKey(source.workflowId, kind, review.stage), kind, ...common, reason, answers: ANSWERS[kind] };
}

/** A stage named in `TreadlePendingReviews` but absent from the memo: listed with what visibility knows. */
function partialReview(source: DecisionSource, stage: string): PendingDecision {
  const kind: DecisionKind = isTddNode(source) ? 'tdd' : 'review';
  return {
    key: decisionKey(source.workflowId, kind, stage),
    kind,
    workflowId: source.workflowId,
    itemId: source.workflowId,
    pipeline: source.reviews?.pipeline || source.pipeline || '',
    stage,
    reason: kind === 'tdd' ? 'stuck' : 'unknown',
    message: 'details not in the listing; open it to see them',
    requestedAt: source.startTime.toISOString(),
    answers: ANSWERS[kind],
    partial: true,
  };
}

/** An engine-6 failed loop: running, `TreadleStatus = failed`, no memo; its details are in the loopState query. */
function partialLoop(source: DecisionSource): PendingDecision {
  const { itemId, stage, attempt } = loopIdentity(source.workflowId);
  return {
    key: decisionKey(source.workflowId, 'loop', stage),
    kind: 'loop',
    workflowId: source.workflowId,
    itemId,
    pipeline: source.pipeline || 'loop',
    stage,
    reason: 'loop_failed',
    message: 'loop failed; open it to see why',
    requestedAt: source.startTime.toISOString(),
    ...(attempt !== undefined ? { attempt } : {}),
    answers: ANSWERS.loop,
    partial: true,
  };
}

/** A pending approval request as a decision; its key's subject is the request id. */
export function approvalDecision(source: DecisionSource, request: ApprovalsMemo['requests'][number]): PendingDecision {
  return {
    key: decisionKey(source.workflowId, 'approval', request.id),
    kind: 'approval',
    workflowId: source.workflowId,
    itemId: request.itemId || source.workflowId,
    pipeline: source.approvals?.pipeline || source.pipeline || '',
    stage: request.step,
    reason: 'approval',
    message: request.summary,
    requestedAt: request.createdAt,
    ...(request.expiresAt ? { expiresAt: request.expiresAt } : {}),
    ...(request.reviewers ? { reviewers: request.reviewers } : {}),
    approval: {
      id: request.id,
      actionType: request.actionType,
      summary: request.summary,
      context: request.context,
      ...(request.escalated ? { escalated: true } : {}),
    },
    answers: ANSWERS.approval,
  };
}

/** Every decision one execution waits on, from its memo and attributes (unsorted). */
export function decisionsOf(source: DecisionSource): PendingDecision[] {
  const decisions: PendingDecision[] = [];
  const reviews = source.reviews?.reviews ?? [];
  for (const review of reviews) decisions.push(reviewDecision(source, review));
  // A memo cut short or not written (older workflows) still lists the stages the attribute names.
  const inMemo = new Set(reviews.map((r) => r.stage));
  for (const stage of source.pendingStages) if (!inMemo.has(stage)) decisions.push(partialReview(source, stage));
  for (const request of source.approvals?.requests ?? [])
    if (request.status === 'pending') decisions.push(approvalDecision(source, request));
  if (isLoop(source) && source.status === 'failed' && !decisions.some((d) => d.kind === 'loop'))
    decisions.push(partialLoop(source));
  return decisions;
}

/** Quotes a value for a visibility query. */
function quoted(value: string): string {
  return `'${value.replace(/'/g, "''")}'`;
}

/** The engine-6 trace of a failed loop (it writes no pending attribute). */
const FAILED_LOOP = `(${TreadlePipeline.name} = 'loop' AND ${TreadleStatus.name} = 'failed')`;

/**
 * The narrowest visibility query for the kinds asked (all when none): reviews, budgets, TDD steps and engine-7
 * loops name their stage in `TreadlePendingReviews`, approvals are in `TreadleApprovals`, engine-6 failed
 * loops are only their status.
 */
export function pendingDecisionsQuery(options: { pipeline?: string; kinds?: readonly DecisionKind[] } = {}): string {
  const kinds = options.kinds && options.kinds.length > 0 ? options.kinds : undefined;
  const wants = (kind: DecisionKind): boolean => !kinds || kinds.includes(kind);
  const clauses: string[] = [];
  if (wants('review') || wants('budget') || wants('tdd') || wants('loop'))
    clauses.push(`${TreadlePendingReviews.name} IS NOT NULL`);
  if (wants('approval')) clauses.push(`${TreadleApprovals.name} IS NOT NULL`);
  if (wants('loop')) clauses.push(FAILED_LOOP);
  const pending = clauses.length === 1 ? clauses[0]! : `(${clauses.join(' OR ')})`;
  // TDD nodes and loops carry their own TreadlePipeline ('tdd', 'loop'); their memo names the item's pipeline,
  // which listPendingDecisions filters on after reading it.
  const nested = (['tdd', 'loop'] as const).filter(wants).map(quoted);
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
