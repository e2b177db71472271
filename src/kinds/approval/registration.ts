/**
 * The `approval` stage kind (seed 003): registered so that specs naming it (`type: approval` or
 * `run: approval`) validate, with its `with:` checked. The work item's stage runner runs it in the workflow
 * (`kinds/approval/stage.ts`) with the approval activities; it never schedules the activity below.
 */
import { ApplicationFailure } from '@temporalio/common';
import type { Registry } from '../../activities/registry';
import { checkApprovalStageConfig } from './spec';
import { APPROVAL_STAGE } from './shapes';

export function registerApproval(registry: Registry): Registry {
  return registry.stage(
    APPROVAL_STAGE,
    async () => {
      throw ApplicationFailure.nonRetryable(
        "an approval stage runs in its work item's workflow, never as an activity",
        'InvalidUse',
      );
    },
    { checkConfig: checkApprovalStageConfig },
  );
}
