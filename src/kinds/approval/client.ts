/**
 * The approval kind for the client (see `KindClient` in src/client/decision-kind.ts): its requests are listed
 * by client-listing.ts; a request is decided through the work item's `decideApproval` update; its detail is the
 * request with its payload.
 */
import type { DecisionDetail } from '../../model/decisions';
import { approvalDecision, approvalListing } from './client-listing';
import { artefactView } from '../../client/artefact-view';
import { capacityWaitsDetail, itemSource, stageTable } from '../../client/item-decisions';
import {
  gone,
  listedDetail,
  queried,
  type DetailContext,
  type KindClient,
  type KindDecisions,
} from '../../client/decision-kind';

/** approval: the pending request's payload (resolved) and the request without it. */
async function approvalDetail(ctx: DetailContext): Promise<DecisionDetail> {
  const state = await queried(ctx, (wait) => ctx.parts.items.state(ctx.workflowId, { eventLimit: 1 }, wait));
  if (!state) return listedDetail(ctx);
  const request = state.approvals?.find((r) => r.id === ctx.subject);
  if (!request || request.status !== 'pending') throw gone(ctx.key);
  const { payload, ...rest } = request;
  return {
    decision: approvalDecision(itemSource(state), request),
    stages: stageTable(state),
    ...(await capacityWaitsDetail(ctx, state)),
    approval: { payload: (await artefactView(payload, ctx.context.blobs))!, request: rest },
    live: true,
  };
}

/** Approval requests (`approval` decisions), keyed by the request's id. */
const approvalDecisions: KindDecisions = {
  async decide(ctx, { subject }, answer, reviewer, group) {
    const decided = await ctx.parts.approvals.decide(subject, answer.action as 'approve' | 'reject', {
      by: reviewer,
      ...(group ? { group } : {}),
      ...(answer.reason !== undefined ? { reason: answer.reason } : {}),
    });
    return { status: 'decided', by: decided.decidedBy, outcome: decided.status };
  },

  async decidedEarlier(ctx, { subject }) {
    const request = await ctx.parts.approvals.get(subject);
    if (request.status === 'pending') return undefined;
    return {
      status: 'already_decided',
      outcome: request.status,
      ...(request.decidedBy ? { by: request.decidedBy } : {}),
      ...(request.decidedAt ? { at: request.decidedAt } : {}),
    };
  },

  detail: approvalDetail,
};

/** The approval kind's entry in the client's table (src/client/kind-clients.ts). */
export const approvalClient: KindClient = { kinds: ['approval'], listing: approvalListing, answers: approvalDecisions };
