/** The `approval` stage kind's workflow side (seed 003): its row in the workflow table (../workflow-table.ts). */
import type { WorkflowStageKind } from '../../workflow-kit/stage-kind';
import { approvalsPublication, installApprovalHandlers } from './item';
import { approvalSignal, decideApprovalUpdate } from './messages';
import { APPROVAL_STAGE } from './shapes';
import { runApprovalStage } from './stage';

/** Requests held in the work item's own state, decided through the item's messages and published by it. */
export const approvalKind: WorkflowStageKind = {
  name: APPROVAL_STAGE,
  runAttempt: ({ run }) => runApprovalStage(run),
  callsModels: false,
  messages: [approvalSignal.name, decideApprovalUpdate.name],
  decisions: 'item',
  installHandlers: installApprovalHandlers,
  publish: approvalsPublication,
};
