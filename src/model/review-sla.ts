/**
 * `review_sla:` and `on_breach:` (issue 40), on a stage or the pipeline: how long a decision a person owes may wait
 * before it is overdue, and what happens then. The canonical spec carries each stage's own or the pipeline's as
 * `reviewSla` (workflow-kit/deadline.ts acts on it).
 */
import { z } from 'zod';
import { isRecord } from './pipeline-checks';
import type { ReviewSla } from './pipeline-shapes';

/** `notify` (the default) marks the decision overdue and announces it; `{ escalate_to: <group> }` also hands it over. */
export const OnBreachInput = z.union(
  [z.literal('notify'), z.object({ escalateTo: z.string().trim().min(1, 'must name a reviewer group') }).strict()],
  { error: 'must be notify, or { escalate_to: <reviewer group> }' },
);

type OnBreach = z.output<typeof OnBreachInput>;

interface SlaFields {
  reviewSla?: number;
  onBreach?: OnBreach;
}

/**
 * An `on_breach` with no deadline to act on, on the pipeline or a stage: one problem each. Read from the spec as
 * written (camelized), so they are listed beside the schema's own problems.
 */
export function onBreachProblems(input: unknown): { path: (string | number)[]; message: string }[] {
  if (!isRecord(input)) return [];
  const problems: { path: (string | number)[]; message: string }[] = [];
  const pipelineSla = input.reviewSla !== undefined;
  if (input.onBreach !== undefined && !pipelineSla)
    problems.push({ path: ['onBreach'], message: 'needs a review_sla beside it: the deadline it acts on' });
  const stages = Array.isArray(input.stages) ? (input.stages as unknown[]) : [];
  stages.forEach((stage, i) => {
    if (isRecord(stage) && stage.onBreach !== undefined && stage.reviewSla === undefined && !pipelineSla)
      problems.push({
        path: ['stages', i, 'onBreach'],
        message: 'needs a review_sla on the stage or the pipeline: the deadline it acts on',
      });
  });
  return problems;
}

/**
 * A stage's deadline: its own `review_sla`, else the pipeline's; its own `on_breach`, else the pipeline's, else
 * `notify`.
 */
export function reviewSlaOf(stage: SlaFields, pipeline: SlaFields): ReviewSla | undefined {
  const afterMs = stage.reviewSla ?? pipeline.reviewSla;
  if (afterMs === undefined) return undefined;
  const onBreach = stage.onBreach ?? pipeline.onBreach ?? 'notify';
  return onBreach === 'notify' ? { afterMs } : { afterMs, escalateTo: onBreach.escalateTo };
}
