/**
 * The `tdd` stage kind: a V3 TDD tree (seed 001) as one stage of an ordinary pipeline. The work item's
 * stage runner starts the tree as a child workflow (`tddNode`) and takes the root's `MergeComplete` as the
 * stage's artefact, so gates, retry budgets and reviews apply to it like to any stage. The name is
 * registered so that specs naming it validate (with its `with:` checked); the work item never schedules the
 * activity below.
 */
import { ApplicationFailure } from '@temporalio/common';
import type { Registry } from '../../activities/registry';
import { checkTddStageConfig, TDD_STAGE } from './spec';

export function registerTdd(registry: Registry): Registry {
  return registry.stage(
    TDD_STAGE,
    async () => {
      throw ApplicationFailure.nonRetryable(
        'a tdd stage runs as a child workflow of its work item, never as an activity',
        'InvalidUse',
      );
    },
    { usesAgent: true, checkConfig: checkTddStageConfig },
  );
}
