/**
 * The human kind for the client (see `KindClient` in src/client/decision-kind.ts): a `human` stage's request is
 * listed by client-listing.ts and answered through the work item's `respondHuman` update. The person's output is
 * checked against the stage's `output_schema` (Ajv, here on the client: never in the workflow bundle) before
 * anything is sent, and goes by blob reference when it is over the blob threshold.
 */
import { WorkflowUpdateFailedError } from '@temporalio/client';
import type { DecisionDetail } from '../../model/decisions';
import type { Json } from '../../model/shapes';
import type { WorkItemState } from '../../model/state';
import { offloadArtefact } from '../../storage/blob-store';
import { TreadleError } from '../../client/errors';
import { updatedByWorker } from '../../client/worker-presence';
import { capacityWaitsDetail, editProblems, itemSource, schemaProblems, stageTable } from '../../client/item-decisions';
import {
  gone,
  listedDetail,
  queried,
  type DecisionContext,
  type DetailContext,
  type KindClient,
  type KindDecisions,
} from '../../client/decision-kind';
import { humanDecision, humanListing } from './client-listing';
import { respondHumanUpdate } from './messages';
import type { HumanResponded, HumanResponse } from './shapes';

/** The item's state as the listing's source, with its human requests. */
function humanSource(state: WorkItemState) {
  return { ...itemSource(state), human: { pipeline: state.pipeline, requests: state.humanRequests ?? [] } };
}

/** The request of `stage` waiting in `state`, or undefined. */
function waiting(state: WorkItemState, stage: string) {
  return state.humanRequests?.find((r) => r.stage === stage && r.status === 'pending');
}

/**
 * Sends the person's answer to `stage` of item `id`: its output (checked against the stage's output schema first:
 * `invalid_input` with one problem per line, nothing sent), or `reject` with a reason. The attempt answered is the
 * one waiting, read from the item's state.
 */
export async function respondToHumanStage(
  ctx: DecisionContext,
  id: string,
  stage: string,
  answer: { output: Json } | { reject: string },
  by: string,
): Promise<HumanResponded> {
  const state = await ctx.parts.items.state(id, { eventLimit: 1 });
  const request = waiting(state, stage);
  if (!request) {
    const pending = (state.humanRequests ?? []).filter((r) => r.status === 'pending').map((r) => r.stage);
    throw new TreadleError(
      `stage ${stage} of ${id} is not waiting for a person's output${pending.length > 0 ? ` (waiting: ${pending.join(', ')})` : ''}`,
      'invalid_review',
    );
  }
  const payload: HumanResponse = { stage, attempt: request.attempt, by };
  if ('reject' in answer) payload.reject = answer.reject;
  else {
    // Against the schema in the state read above: one query per answer.
    const problems = schemaProblems(state, stage, answer.output);
    if (problems.length > 0) {
      const lines = problems.map((p) => `${p.path === '' ? '(the whole output)' : p.path}: ${p.message}`);
      throw new TreadleError(
        `the output for ${stage} of ${id} does not match the stage's output schema:\n${lines.map((l) => `  - ${l}`).join('\n')}`,
        'invalid_input',
        lines,
      );
    }
    const { blobs, blobThresholdBytes } = ctx.context;
    const stored = await offloadArtefact(answer.output, blobs, blobThresholdBytes, `${stage} of ${id}, from ${by}`);
    if (stored !== undefined && stored !== answer.output) payload.outputRef = stored;
    else payload.output = answer.output;
  }
  const { client, answerWaitMs, reviewTimeoutMs } = ctx.context;
  return ctx.context.call(id, async (h) => {
    try {
      return await updatedByWorker(client, id, {
        what: `the output of ${stage} of ${id}`,
        send: (updateId) => h.executeUpdate(respondHumanUpdate, { args: [payload], updateId }),
        answerWaitMs,
        timeoutMs: reviewTimeoutMs,
        // The same answer sent again (its first reply lost to a server failure) gets the first one's reply.
        repeatOf: { name: respondHumanUpdate.name, arg: payload, subject: (a) => (a as { stage?: unknown }).stage },
      });
    } catch (error) {
      if (error instanceof WorkflowUpdateFailedError)
        throw new TreadleError(`response refused: ${error.cause?.message ?? error.message}`, 'invalid_review');
      throw error;
    }
  });
}

/** human: the request as the item keeps it, the stage table, the output schema and the attempts so far. */
async function humanDetail(ctx: DetailContext): Promise<DecisionDetail> {
  const state = await queried(ctx, (wait) => ctx.parts.items.state(ctx.workflowId, { eventLimit: 1 }, wait));
  if (!state) return listedDetail(ctx);
  const request = waiting(state, ctx.subject);
  if (!request) throw gone(ctx.key);
  const outputSchema = state.outputSchemas?.[ctx.subject];
  return {
    decision: humanDecision(humanSource(state), request),
    stages: stageTable(state),
    ...(await capacityWaitsDetail(ctx, state)),
    ...(outputSchema !== undefined ? { outputSchema } : {}),
    human: {
      attempt: request.attempt,
      ...(request.instructions !== undefined ? { instructions: request.instructions } : {}),
      ...(request.feedback !== undefined ? { feedback: request.feedback } : {}),
    },
    live: true,
  };
}

/** A human stage's requests (`human` decisions), keyed by the stage. */
const humanDecisions: KindDecisions = {
  answerProblem: (answer) =>
    answer.action === 'respond' && answer.artefact === undefined ? 'respond needs the output' : undefined,

  async decide(ctx, { workflowId, subject }, answer, reviewer) {
    const responded = await respondToHumanStage(
      ctx,
      workflowId,
      subject,
      answer.action === 'reject' ? { reject: answer.reason! } : { output: answer.artefact as Json },
      reviewer,
    );
    return { status: 'decided', by: responded.by, outcome: answer.action };
  },

  async decidedEarlier(ctx, { workflowId, subject }) {
    const state = await ctx.parts.items.state(workflowId, { eventLimit: 1 });
    if (waiting(state, subject)) return undefined;
    const last = state.humanRequests?.find((r) => r.stage === subject);
    if (!last) return undefined;
    return {
      status: 'already_decided',
      outcome: last.status === 'rejected' ? 'reject' : 'respond',
      ...(last.respondedBy ? { by: last.respondedBy } : {}),
      ...(last.respondedAt ? { at: last.respondedAt } : {}),
    };
  },

  detail: humanDetail,

  editProblems: (ctx, { workflowId, subject }, output) => editProblems(ctx, workflowId, subject, output),
};

/** The human kind's entry in the client's table (src/client/kind-clients.ts). */
export const humanClient: KindClient = { kinds: ['human'], listing: humanListing, answers: humanDecisions };
