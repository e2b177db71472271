/**
 * What the review inbox's detail view shows for one pending decision (issue 27): the item's stage table, every
 * attempt with its verdict and artefact, the approval's payload, a TDD node's diff and test output, a loop's
 * failure, progress.md and last iterations. Read from the workflow's state query; when no worker answers it,
 * from the visibility listing alone (`live: false`).
 */
import { parseDecisionKey, type AttemptView, type DecisionDetail, type PendingDecision } from '../model/decisions';
import type { PendingReview, WorkItemState } from '../model/state';
import type { LoopState } from '../kinds/loop/shapes';
import type { BlobStore } from '../storage/blob-store';
import { truncateText } from '../model/limits';
import { TreadleError } from './errors';
import type { DecideContext } from './decide';
import { approvalDecision, listedDecisionsOf, reviewDecision, type DecisionSource } from './decisions';
import { artefactView, blobView } from './artefact-view';

/** How many of a loop's last iterations the detail carries. */
const DETAIL_ITERATIONS = 5;

/** What a detail may leave out. */
export interface DetailOptions {
  /** review/budget: read the outputs of these attempts only (a diff of two); the others come without `output`. */
  attempts?: readonly number[];
}

/** What a detail needs: the deciding context and the client's blob store (offloaded artefacts are read there). */
interface DetailContext {
  context: DecideContext;
  blobs: BlobStore;
  options: DetailOptions;
  key: string;
  workflowId: string;
  subject: string;
}

/** The error for a key its workflow no longer waits on (the inbox answers it with 404). */
function gone(key: string): TreadleError {
  return new TreadleError(`no pending decision ${key}: it was decided, or its workflow no longer waits`, 'not_found');
}

/**
 * The detail of the pending decision `key` (see `TreadleClient.decisionDetail`). Rejects with `not_found`
 * when its workflow does not exist or no longer waits on it, `invalid_review` for a string that is not a key.
 */
export async function decisionDetail(
  context: DecideContext,
  key: string,
  blobs: BlobStore,
  options: DetailOptions = {},
): Promise<DecisionDetail> {
  const parsed = parseDecisionKey(key);
  if (!parsed) throw new TreadleError(`"${key}" is not a decision key`, 'invalid_review');
  const ctx: DetailContext = { context, blobs, options, key, workflowId: parsed.workflowId, subject: parsed.subject };
  switch (parsed.kind) {
    case 'approval':
      return approvalDetail(ctx);
    case 'tdd':
      return tddDetail(ctx);
    case 'loop':
      return loopDetail(ctx);
    default:
      return reviewDetail(ctx);
  }
}

/**
 * The workflow's state; undefined when no worker answered within the client's `answerWaitMs` (as every command
 * falls back on what Temporal knows without one: a worker that just stopped still shows as polling for a minute,
 * and the server would hold the query half a minute). An unknown workflow is gone.
 */
async function queried<T>(ctx: DetailContext, query: (timeoutMs: number) => Promise<T>): Promise<T | undefined> {
  try {
    return await query(ctx.context.answerWaitMs);
  } catch (error) {
    if (!(error instanceof TreadleError)) throw error;
    if (error.code === 'no_worker' || error.code === 'unreachable') return undefined;
    if (error.code === 'not_found') throw gone(ctx.key);
    throw error;
  }
}

/** No worker answered: the decision as the listing has it, nothing the state query alone knows. */
async function listedDetail(ctx: DetailContext): Promise<DecisionDetail> {
  const decision = (await listedDecisionsOf(ctx.context.client, ctx.workflowId)).find((d) => d.key === ctx.key);
  if (!decision) throw gone(ctx.key);
  return { decision, live: false };
}

/** A work item's state as the listing's source (its memos are what the state holds). */
function itemSource(state: WorkItemState): DecisionSource {
  return {
    workflowId: state.id,
    workflowType: 'workItem',
    startTime: new Date(state.startedAt),
    pipeline: state.pipeline,
    status: state.status,
    pendingStages: [],
    reviews: { pipeline: state.pipeline, reviews: state.pendingReviews, omitted: 0 },
    approvals: { pipeline: state.pipeline, requests: state.approvals ?? [], omitted: 0 },
  };
}

/** The item's stage table, in the pipeline's order. */
function stageTable(state: WorkItemState): NonNullable<DecisionDetail['stages']> {
  return Object.entries(state.stages).map(([name, stage]) => ({
    name,
    status: stage.status,
    attempts: stage.attempts.length,
    ...(stage.summary !== undefined ? { summary: stage.summary } : {}),
  }));
}

/** review and budget: the decision re-read from the state, the stage table, every attempt, the output schema. */
async function reviewDetail(ctx: DetailContext): Promise<DecisionDetail> {
  const state = await queried(ctx, (wait) => ctx.context.getState(ctx.workflowId, { eventLimit: 1 }, wait));
  if (!state) return listedDetail(ctx);
  const review = state.pendingReviews.find((r) => r.stage === ctx.subject);
  const decision = review ? reviewDecision(itemSource(state), review) : undefined;
  if (!decision || decision.key !== ctx.key) throw gone(ctx.key);
  const attempts: AttemptView[] = await Promise.all(
    (state.stages[ctx.subject]?.attempts ?? []).map(async (a) => {
      const wanted = !ctx.options.attempts || ctx.options.attempts.includes(a.attempt);
      const output = wanted ? await artefactView(a.artefact, ctx.blobs) : undefined;
      return {
        attempt: a.attempt,
        startedAt: a.startedAt,
        ...(a.completedAt ? { completedAt: a.completedAt } : {}),
        ...(output ? { output } : {}),
        ...(a.verdict ? { verdict: a.verdict } : {}),
        ...(a.feedback ? { feedback: a.feedback } : {}),
        ...(a.error !== undefined ? { error: a.error } : {}),
        ...(a.timedOut ? { timedOut: true } : {}),
      };
    }),
  );
  const outputSchema = state.outputSchemas?.[ctx.subject];
  return {
    decision,
    stages: stageTable(state),
    attempts,
    ...(outputSchema !== undefined ? { outputSchema } : {}),
    live: true,
  };
}

/** approval: the pending request's payload (resolved) and the request without it. */
async function approvalDetail(ctx: DetailContext): Promise<DecisionDetail> {
  const state = await queried(ctx, (wait) => ctx.context.getState(ctx.workflowId, { eventLimit: 1 }, wait));
  if (!state) return listedDetail(ctx);
  const request = state.approvals?.find((r) => r.id === ctx.subject);
  if (!request || request.status !== 'pending') throw gone(ctx.key);
  const { payload, ...rest } = request;
  return {
    decision: approvalDecision(itemSource(state), request),
    stages: stageTable(state),
    approval: { payload: (await artefactView(payload, ctx.blobs))!, request: rest },
    live: true,
  };
}

/** tdd: the node's question, its latest branch diff and test output when the node recorded them. */
async function tddDetail(ctx: DetailContext): Promise<DecisionDetail> {
  const state = await queried(ctx, (wait) => ctx.context.getTddState(ctx.workflowId, {}, wait));
  if (!state) return listedDetail(ctx);
  const review = state.pendingReviews.find((r) => r.stage === ctx.subject);
  if (!review) throw gone(ctx.key);
  const source: DecisionSource = {
    workflowId: ctx.workflowId,
    workflowType: 'tddNode',
    startTime: new Date(state.startedAt),
    pipeline: 'tdd',
    status: state.status,
    pendingStages: [],
    reviews: { pipeline: 'tdd', reviews: state.pendingReviews, omitted: 0 },
  };
  const decision = reviewDecision(source, review);
  if (decision.key !== ctx.key) throw gone(ctx.key);
  const latest = state.latest;
  const diff = latest?.diffRef ? await blobView(ctx.blobs, latest.diffRef, 'text/x-diff') : undefined;
  const testOutput = latest?.testOutputRef ? await blobView(ctx.blobs, latest.testOutputRef, 'text/plain') : undefined;
  return {
    decision,
    tdd: {
      question: state.human?.message ?? review.message,
      ...(diff ? { diff } : {}),
      ...(testOutput ? { testOutput } : {}),
    },
    live: true,
  };
}

/** loop: the failure, `progress.md` as it was at the failure and the last iterations. */
async function loopDetail(ctx: DetailContext): Promise<DecisionDetail> {
  const state = await queried(ctx, (wait) => ctx.context.getLoopState(ctx.workflowId, wait));
  if (!state) return listedDetail(ctx);
  const failure = state.failure;
  if (state.status !== 'failed' || !failure || state.stage !== ctx.subject) throw gone(ctx.key);
  const decision = await loopDecision(ctx, state);
  if (!decision) throw gone(ctx.key);
  const progressRef = failure.progressRef;
  const progress = progressRef ? await blobView(ctx.blobs, progressRef, 'text/markdown') : undefined;
  return {
    decision,
    loop: { failure, ...(progress ? { progress } : {}), iterations: state.recent.slice(-DETAIL_ITERATIONS) },
    live: true,
  };
}

/**
 * A failed loop's decision: as listed (its memo names the work item's pipeline, which the loop's state does not
 * say), else as the loop's memo would list it, from the state.
 */
async function loopDecision(ctx: DetailContext, state: LoopState): Promise<PendingDecision | undefined> {
  const listed = (await listedDecisionsOf(ctx.context.client, ctx.workflowId)).find((d) => d.key === ctx.key);
  if (listed && !listed.partial) return listed;
  const failure = state.failure!;
  const review: PendingReview = {
    stage: state.stage,
    reason: 'loop_failed',
    message: truncateText(`iteration ${failure.iteration}: ${failure.error.type}: ${failure.error.message}`),
    requestedAt: failure.error.timestamp,
    attempt: failure.iteration,
    itemId: state.itemId,
  };
  const source: DecisionSource = {
    workflowId: ctx.workflowId,
    workflowType: 'loopStage',
    startTime: new Date(failure.error.timestamp),
    pipeline: listed?.pipeline ?? 'loop',
    status: 'failed',
    pendingStages: [],
  };
  const decision = reviewDecision(source, review);
  return decision.key === ctx.key ? decision : undefined;
}
