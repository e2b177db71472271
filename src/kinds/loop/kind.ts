/** The `loop` stage kind's workflow side (seed 004): its row in the workflow table (../workflow-table.ts). */
import type { WorkflowStageKind } from '../../workflow-kit/stage-kind';
import { loopQueueSignal, loopStateQuery, resumeLoopUpdate } from './messages';
import { LOOP_STAGE } from './shapes';
import { runLoopStage } from './stage';

/** A `loopStage` child workflow; a failed loop waiting for a resume is a pending decision of that child. */
export const loopKind: WorkflowStageKind = {
  name: LOOP_STAGE,
  runAttempt: ({ run, stageIndex }) => runLoopStage(run, stageIndex),
  callsModels: true,
  messages: [loopStateQuery.name, resumeLoopUpdate.name, loopQueueSignal.name],
  decisions: 'child',
};
