/**
 * The loop kind for the client (see `KindClient` in src/client/decision-kind.ts): a failed loop stage, listed by
 * client-listing.ts, is resumed or abandoned through its own workflow's `resumeLoop` update; its detail is the
 * failure, `progress.md` as it was then and the last iterations.
 */
import type { DecisionDetail, PendingDecision } from '../../model/decisions';
import type { PendingReview } from '../../model/state';
import { truncateText } from '../../model/limits';
import type { LoopState, ResumeRequest } from './shapes';
import type { DecisionSource } from '../../client/decision-listing';
import { loopListing } from './client-listing';
import { blobView } from '../../client/artefact-view';
import { sendResume } from '../../client/loop-resume';
import {
  decidedBy,
  gone,
  listedDetail,
  queried,
  type DetailContext,
  type KindClient,
  type KindDecisions,
} from '../../client/decision-kind';

/** How many of a loop's last iterations the detail carries. */
const DETAIL_ITERATIONS = 5;

/** loop: the failure, `progress.md` as it was at the failure and the last iterations. */
async function loopDetail(ctx: DetailContext): Promise<DecisionDetail> {
  const state = await queried(ctx, (wait) => ctx.parts.loopStages.state(ctx.workflowId, wait));
  if (!state) return listedDetail(ctx);
  const failure = state.failure;
  if (state.status !== 'failed' || !failure || state.stage !== ctx.subject) throw gone(ctx.key);
  const decision = await loopDecision(ctx, state);
  if (!decision) throw gone(ctx.key);
  const progressRef = failure.progressRef;
  const progress = progressRef ? await blobView(ctx.context.blobs, progressRef, 'text/markdown') : undefined;
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
  const listed = (await ctx.listed.of(ctx.workflowId)).find((d) => d.key === ctx.key);
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
  const decision = ctx.listed.reviewDecision(source, review);
  return decision.key === ctx.key ? decision : undefined;
}

/** A failed loop stage waiting for a resume (`loop` decisions). */
const loopDecisions: KindDecisions = {
  /**
   * Resumes or abandons the loop stage workflow, recording who decided; sent only once a worker answers, and
   * bounded by the client's review timeout as reviews and approvals are (see `updatedByWorker`).
   */
  async decide(ctx, { workflowId }, answer, reviewer) {
    const request: ResumeRequest = {
      action: answer.action === 'abandon' ? 'abandon' : 'resume',
      ...(answer.reason !== undefined ? { reason: answer.reason } : {}),
      // Request changes is a resume whose note the rerun iteration reads.
      ...(answer.action !== 'abandon' && answer.note !== undefined ? { note: answer.note } : {}),
      by: reviewer,
    };
    const { client, reviewTimeoutMs, answerWaitMs } = ctx.context;
    await sendResume(client, workflowId, request, reviewTimeoutMs, answerWaitMs);
    return decidedBy(answer, reviewer);
  },

  async decidedEarlier(ctx, { workflowId }) {
    const state = await ctx.parts.loopStages.state(workflowId);
    return state.status === 'failed' ? undefined : { status: 'already_decided', outcome: state.status };
  },

  detail: loopDetail,
};

/** The loop kind's entry in the client's table (src/client/kind-clients.ts). */
export const loopClient: KindClient = { kinds: ['loop'], listing: loopListing, answers: loopDecisions };
