/** The `fan_out` stage kind's workflow side: its row in the workflow table (../workflow-table.ts). */
import type { WorkflowStageKind } from '../../workflow-kit/stage-kind';
import { FAN_OUT_STAGE } from './shapes';
import { fanOutProgressSignal, handleFanOutProgress } from './workflow';

/**
 * Child work items, one per element. How they start is the engine's rule (`fanOut`: engines 1 to 4 started
 * them from the item itself), because a plain stage's own `fan_out` outcome (seed 000) runs the same way.
 */
export const fanOutKind: WorkflowStageKind = {
  name: FAN_OUT_STAGE,
  runAttempt: ({ run, engine }) => engine.fanOut(run),
  callsModels: false,
  messages: [fanOutProgressSignal.name],
  // The fan-out workflow reports its progress to the work item, which shows it in its state and details.
  installHandlers: handleFanOutProgress,
  // Each element is a work item of its own, which publishes its own decisions.
  decisions: 'none',
};
