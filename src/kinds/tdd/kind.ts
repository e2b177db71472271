/** The `tdd` stage kind's workflow side (seed 001): its row in the workflow table (../workflow-table.ts). */
import type { WorkflowStageKind } from '../../workflow-kit/stage-kind';
import { mergeDoneSignal, mergeGrantSignal, mergeRequestSignal, siblingMergedSignal } from './messages';
import { TDD_STAGE } from './shapes';
import { runTddTree } from './stage';

/** A tree of `tddNode` child workflows; its human steps are pending decisions of the nodes, listed under the item. */
export const tddKind: WorkflowStageKind = {
  name: TDD_STAGE,
  runAttempt: runTddTree,
  callsModels: true,
  // The node's `state`, `events` and review messages are the work item's wire names (workflow-kit/messages.ts).
  messages: [mergeRequestSignal.name, mergeGrantSignal.name, mergeDoneSignal.name, siblingMergedSignal.name],
  decisions: 'child',
};
