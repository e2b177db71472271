/**
 * A work item's own decisions, `review` and `budget`: a stage waiting for a person, answered through the item's
 * `resolveReview` update (an edit through `approveWithEdits`, which checks it against the stage's output schema).
 * With its listing (item-listing.ts) the first entry of the table in kind-clients.ts, `itemClient`; the kinds'
 * own entries live in their folders.
 */
import type { AttemptView, DecisionDetail } from '../model/decisions';
import type { Json } from '../model/shapes';
import type { WorkItemState } from '../model/state';
import type { DecisionSource } from './decision-listing';
import { itemListing } from './item-listing';
import { artefactView } from './artefact-view';
import { outputSchemaChecks } from '../agents/output-schema-checks-lazy';
import type { SchemaProblem } from '../agents/output-schema-checks';
import {
  decidedBy,
  gone,
  listedDetail,
  queried,
  reviewOutcome,
  type DecisionContext,
  type DetailContext,
  type KindClient,
  type KindDecisions,
} from './decision-kind';

/** A work item's state as the listing's source (its memos are what the state holds). */
export function itemSource(state: WorkItemState): DecisionSource {
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
export function stageTable(state: WorkItemState): NonNullable<DecisionDetail['stages']> {
  return Object.entries(state.stages).map(([name, stage]) => ({
    name,
    status: stage.status,
    attempts: stage.attempts.length,
    ...(stage.summary !== undefined ? { summary: stage.summary } : {}),
  }));
}

/**
 * `detail.capacityWaits` of a work item: its calls waiting for model capacity (one describe), asked only while a
 * stage runs; the detail page shows without them when the describe fails (they are a hint, not the decision).
 */
export async function capacityWaitsDetail(
  ctx: DecisionContext,
  state: WorkItemState,
): Promise<Pick<DecisionDetail, 'capacityWaits'>> {
  if (!Object.values(state.stages).some((s) => s.status === 'running')) return {};
  const waits = await ctx.parts.items.capacityWaits(state.id, state).catch(() => []);
  if (waits.length === 0) return {};
  return {
    capacityWaits: waits.map((w) => ({
      ...(w.stage !== undefined ? { stage: w.stage } : {}),
      activityType: w.activityType,
      line: w.line,
    })),
  };
}

/** The problems of an edit of `stage` of work item `workflowId` against the schema its state keeps for it. */
export async function editProblems(
  ctx: DecisionContext,
  workflowId: string,
  stage: string,
  artefact: unknown,
): Promise<SchemaProblem[]> {
  return schemaProblems(await ctx.parts.items.state(workflowId, { eventLimit: 1 }), stage, artefact);
}

/** The problems of `artefact` against `stage`'s output schema in a state already read (none without a schema). */
export function schemaProblems(state: WorkItemState, stage: string, artefact: unknown): SchemaProblem[] {
  // Ajv loads with the first check: status, reviews and the other short commands never need it.
  return outputSchemaChecks().checkOutput(state.outputSchemas?.[stage], artefact);
}

/** review and budget: the decision re-read from the state, the stage table, every attempt, the output schema. */
async function reviewDetail(ctx: DetailContext): Promise<DecisionDetail> {
  const state = await queried(ctx, (wait) => ctx.parts.items.state(ctx.workflowId, { eventLimit: 1 }, wait));
  if (!state) return listedDetail(ctx);
  const review = state.pendingReviews.find((r) => r.stage === ctx.subject);
  const decision = review ? ctx.listed.reviewDecision(itemSource(state), review) : undefined;
  if (!decision || decision.key !== ctx.key) throw gone(ctx.key);
  const attempts: AttemptView[] = await Promise.all(
    (state.stages[ctx.subject]?.attempts ?? []).map(async (a) => {
      const wanted = !ctx.options.attempts || ctx.options.attempts.includes(a.attempt);
      const output = wanted ? await artefactView(a.artefact, ctx.context.blobs) : undefined;
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
    ...(await capacityWaitsDetail(ctx, state)),
    attempts,
    ...(outputSchema !== undefined ? { outputSchema } : {}),
    live: true,
  };
}

/** A work item's stage reviews (`review` and `budget` decisions). */
const itemDecisions: KindDecisions = {
  async decide(ctx, { workflowId, subject }, answer, reviewer, group) {
    if (answer.action === 'edit')
      await ctx.parts.decisions.approveWithEdits(workflowId, subject, answer.artefact as Json, {
        reviewer,
        ...(answer.note !== undefined ? { note: answer.note } : {}),
        ...(group ? { group } : {}),
      });
    else await ctx.parts.decisions.review(workflowId, subject, reviewOutcome(answer), reviewer, group);
    return decidedBy(answer, reviewer);
  },

  async decidedEarlier(ctx, { workflowId, subject }) {
    const state = await ctx.parts.items.state(workflowId, { eventLimit: 1 });
    const stage = state.stages[subject];
    if (!stage || stage.status === 'waiting_review') return undefined;
    const record = stage.review;
    return record
      ? { status: 'already_decided', by: record.reviewer, outcome: record.kind, at: record.at }
      : { status: 'already_decided', outcome: stage.status };
  },

  detail: reviewDetail,

  editProblems: (ctx, { workflowId, subject }, artefact) => editProblems(ctx, workflowId, subject, artefact),
};

/** A work item's own stage reviews, the first entry of the table: listed and answered as `review` or `budget`. */
export const itemClient: KindClient = { kinds: ['review', 'budget'], listing: itemListing, answers: itemDecisions };
