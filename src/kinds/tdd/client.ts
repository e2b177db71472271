/**
 * The TDD kind for the client (see `KindClient` in src/client/decision-kind.ts): a node's questions are listed by
 * client-listing.ts; a question is answered through the node's `resolveReview` update, as a work item's stage
 * review is; an edit is the answer's text. Its detail is the question, the latest branch diff and test output.
 */
import type { DecisionDetail } from '../../model/decisions';
import type { DecisionSource } from '../../client/decision-listing';
import { tddListing } from './client-listing';
import { blobView } from '../../client/artefact-view';
import {
  decidedBy,
  gone,
  listedDetail,
  queried,
  reviewOutcome,
  type DetailContext,
  type KindClient,
  type KindDecisions,
} from '../../client/decision-kind';

/** tdd: the node's question, its latest branch diff and test output when the node recorded them. */
async function tddDetail(ctx: DetailContext): Promise<DecisionDetail> {
  const state = await queried(ctx, (wait) => ctx.parts.trees.state(ctx.workflowId, {}, wait));
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
  const decision = ctx.listed.reviewDecision(source, review);
  if (decision.key !== ctx.key) throw gone(ctx.key);
  const latest = state.latest;
  const blobs = ctx.context.blobs;
  const diff = latest?.diffRef ? await blobView(blobs, latest.diffRef, 'text/x-diff') : undefined;
  const testOutput = latest?.testOutputRef ? await blobView(blobs, latest.testOutputRef, 'text/plain') : undefined;
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

/** A TDD node's questions to a person (`tdd` decisions). */
const tddDecisions: KindDecisions = {
  answerProblem(answer) {
    return answer.action === 'edit' && typeof answer.artefact !== 'string'
      ? "a TDD step's edit is the answer's text"
      : undefined;
  },

  async decide(ctx, { workflowId, subject }, answer, reviewer) {
    await ctx.parts.decisions.review(workflowId, subject, reviewOutcome(answer), reviewer);
    return decidedBy(answer, reviewer);
  },

  async decidedEarlier(ctx, { workflowId, subject }) {
    const state = await ctx.parts.trees.state(workflowId);
    return state.pendingReviews.some((r) => r.stage === subject) ? undefined : { status: 'already_decided' };
  },

  detail: tddDetail,
};

/** The TDD kind's entry in the client's table (src/client/kind-clients.ts). */
export const tddClient: KindClient = { kinds: ['tdd'], listing: tddListing, answers: tddDecisions };
