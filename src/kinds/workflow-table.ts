/**
 * The workflow side of the table of stage kinds: the one module src/workflows/ imports from src/kinds/.
 *
 * Why two tables: this one is bundled into the workflow bundle (deterministic code only), while the worker
 * side (src/kinds/index.ts: config checks, activities) loads Node built-ins and SDK clients, which the
 * bundle must not contain. Both list the same kinds (test/unit/stage-kind-table.test.ts checks it); a new
 * kind is one line in each (docs/stage-kinds.md).
 *
 * Besides the table, this module hands the work item the few kind-specific pieces it still holds for the
 * kinds (the kinds' workflows for the worker's bundle, a plain stage's own fan-out outcome, the approval
 * requests it keeps, the contracts on its edges), so that these too reach src/workflows/ only through here.
 */
import type { WorkflowStageKind } from '../workflow-kit/stage-kind';
import { approvalKind } from './approval/kind';
import { fanOutKind } from './fan-out/kind';
import { loopKind } from './loop/kind';
import { tddKind } from './tdd/kind';

const TABLE = new Map<string, WorkflowStageKind>();

/**
 * Adds a stage kind's workflow side. Call it at module load in a module the workflow bundle imports (the
 * registration then runs identically in every workflow, so replay sees the same table).
 */
export function registerWorkflowKind(kind: WorkflowStageKind): void {
  if (TABLE.has(kind.name)) throw new Error(`stage kind "${kind.name}" is already registered`);
  TABLE.set(kind.name, kind);
}

/** The kind a stage's `run:` names, or undefined for a plain stage (one activity per attempt). */
export function workflowKind(run: string): WorkflowStageKind | undefined {
  return TABLE.get(run);
}

/** The names of every registered kind, sorted. */
export function workflowKindNames(): string[] {
  return [...TABLE.keys()].sort();
}

// The table: one line per kind.
registerWorkflowKind(tddKind);
registerWorkflowKind(approvalKind);
registerWorkflowKind(fanOutKind);
registerWorkflowKind(loopKind);

export { tddNode } from './tdd/workflow';
export { loopStage } from './loop/workflow';
export {
  fanOut,
  fanOutElementInput,
  fanOutElementOf,
  handleFanOutProgress,
  runFanOutWorkflow,
} from './fan-out/workflow';
export { runInlineFanOut } from './fan-out/engine-1-4';
export { runContracts } from './contract/stage';
export { applyDecision } from './approval/stage';
export { APPROVALS_MEMO_KEY, checkApprovalDecision, type ApprovalsMemo } from './approval/shapes';
export * from './approval/messages';
export * from './tdd/messages';
export * from './loop/messages';
