/** Small pipelines built for the integration tests. */
import { pipeline, type RetryBudgetOptions } from '../../src/kinds/builder';
import type { ReviewPolicy } from '../../src/model/pipeline';
import type { Json } from '../../src/model/shapes';
import type { ActionCatalog } from '../../src/kinds/approval/worker/activities';

/** `draft` (scripted stage + gate) → `publish` (scripted), with the given budget and policy on draft. */
export function draftPublish(
  budget: RetryBudgetOptions,
  policy: ReviewPolicy = 'never',
  publishPolicy: ReviewPolicy = 'never',
) {
  return pipeline('draft-publish')
    .stage('draft', 'scripted')
    .stage('publish', 'scripted')
    .qualityGate('draft', 'scripted')
    .retryBudget('draft', budget)
    .reviewPolicy('draft', policy)
    .reviewPolicy('publish', publishPolicy)
    .dependency('publish', 'draft');
}

/**
 * A one-stage loop pipeline `name` (seed 004) of fixed length, as a pipeline file spells it: stage `work`,
 * whose agent the input scripts (`agent_replies: {work: [...]}`).
 */
export function fixedLoopSpec(name: string, maxIterations: number) {
  return {
    name,
    stages: [
      {
        name: 'work',
        run: 'loop',
        with: {
          stage: {
            name: 'work',
            prompt: 'Read ${CTX}. Append to ${PROGRESS}. Write ${OUTPUT}. Report in ${STATUS}.',
            termination: { type: 'fixed' },
          },
          max_iterations: maxIterations,
        },
      },
    ],
  };
}

/** Iteration n's scripted reply, as an agent writes it: an output, a progress entry and a `continue` status. */
export function loopReply(n: number): Json {
  return {
    output: `# Output ${n}\n`,
    progress: `## Iteration ${n}\n- did step ${n}\n`,
    status: {
      decision: 'continue',
      reason: `iteration ${n}`,
      summary: `summary ${n}`,
      work: { items_completed: [], files_touched: [] },
      errors: [],
    },
  };
}

/** An approval action type `note` (payload `{title}`) that does nothing when approved. */
export const noteActions: ActionCatalog = {
  validatePayload: (type) => (type === 'note' ? [] : [`unknown action type "${type}"`]),
  summarize: (_type, payload) => `note "${(payload as { title: string }).title}"`,
  names: () => ['note'],
  execute: async () => ({ noted: true }),
};
