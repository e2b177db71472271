/** Small pipelines built for the integration tests. */
import { pipeline, type RetryBudgetOptions } from '../../src/model/builder';
import type { ReviewPolicy } from '../../src/model/pipeline';

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
