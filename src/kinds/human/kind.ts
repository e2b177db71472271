/** The `human` stage kind's workflow side (issue 40): its row in the workflow table (../workflow-table.ts). */
import type { WorkflowStageKind } from '../../workflow-kit/stage-kind';
import { humanPublication, installHumanHandlers } from './item';
import { respondHumanUpdate } from './messages';
import { HUMAN_STAGE } from './shapes';
import { runHumanStage } from './stage';

/** A request held in the work item's own state, answered through the item's `respondHuman` and published by it. */
export const humanKind: WorkflowStageKind = {
  name: HUMAN_STAGE,
  runAttempt: ({ run }) => runHumanStage(run),
  callsModels: false,
  messages: [respondHumanUpdate.name],
  decisions: 'item',
  installHandlers: installHumanHandlers,
  publish: humanPublication,
};
