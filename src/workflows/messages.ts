/**
 * Every message of Treadle's workflows in one place, for the client (src/client.ts, src/client/), which
 * imports them from here. Workflow code imports them from their homes: workflow-kit/messages.ts (review,
 * state, events) and each kind's messages.ts. Kept until the client's imports point there.
 */
export * from '../workflow-kit/messages';
// The kinds' messages, through the table like everything src/workflows/ takes from src/kinds/.
export {
  approvalSignal,
  decideApprovalUpdate,
  loopQueueSignal,
  loopStateQuery,
  mergeDoneSignal,
  mergeGrantSignal,
  mergeRequestSignal,
  resumeLoopUpdate,
  siblingMergedSignal,
  tddStateQuery,
  type MergeDone,
  type MergeGrant,
  type MergeRequest,
  type SiblingMerged,
} from '../kinds/workflow-table';
