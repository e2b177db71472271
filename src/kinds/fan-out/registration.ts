/**
 * The `fan_out` stage kind: registered so that specs naming it (`type: fan_out` or `run: fan_out`)
 * validate; its config (and element stage) is checked by the pipeline validation itself, against the same
 * implementations. The work item's stage runner runs it in the workflow (`kinds/fan-out/workflow.ts`; on engines 1
 * to 4 `workflows/legacy/engine-1-4-fan-out.ts`) as child work items; it never schedules the activity below.
 */
import { ApplicationFailure } from '@temporalio/common';
import type { Registry } from '../../activities/registry';
import { FAN_OUT_STAGE } from './shapes';

export function registerFanOut(registry: Registry): Registry {
  return registry.stage(FAN_OUT_STAGE, async () => {
    throw ApplicationFailure.nonRetryable(
      'a fan_out stage runs as child work items of its work item, never as an activity',
      'InvalidUse',
    );
  });
}
