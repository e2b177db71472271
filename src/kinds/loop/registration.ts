/**
 * The `loop` stage kind: a seed 004 loop as one stage of an ordinary pipeline. The work item's stage runner
 * starts the loop as a child workflow (`loopStage`) and takes its {@link LoopArtefact} as the stage's
 * artefact. The name is registered so that specs naming it validate (with its `with:` checked); the work
 * item never schedules the activity below.
 */
import { ApplicationFailure } from '@temporalio/common';
import type { Registry } from '../../activities/registry';
import { checkLoopStageConfig, LOOP_STAGE } from './spec';

export function registerLoop(registry: Registry): Registry {
  return registry.stage(
    LOOP_STAGE,
    async () => {
      throw ApplicationFailure.nonRetryable(
        'a loop stage runs as a child workflow of its work item, never as an activity',
        'InvalidUse',
      );
    },
    { usesAgent: true, checkConfig: checkLoopStageConfig },
  );
}
