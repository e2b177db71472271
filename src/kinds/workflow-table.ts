/**
 * The workflow side of the table of stage kinds: the one module src/workflows/ imports from src/kinds/.
 *
 * Why two tables: this one is bundled into the workflow bundle (deterministic code only), while the worker
 * side (src/kinds/index.ts: config checks, activities) loads Node built-ins and SDK clients, which the
 * bundle must not contain. Both list the same kinds (test/unit/stage-kind-table.test.ts checks it); a new
 * kind is one line in each (docs/stage-kinds.md).
 *
 * Besides the table, this module hands src/workflows/ the few pieces that are not a stage of a kind (the
 * kinds' workflows for the worker's bundle, a plain stage's own fan-out outcome and the fan-out of engines
 * 1 to 4, the item's input when it is a fan-out's element, the contracts on its edges), so that these too
 * reach src/workflows/ only through here.
 */
import type { setHandler } from '@temporalio/workflow';
import type { WorkItemState } from '../model/state';
import type { KindItemContext, KindPublication, WorkflowStageKind } from '../workflow-kit/stage-kind';
import { approvalKind } from './approval/kind';
import { fanOutKind } from './fan-out/kind';
import { humanKind } from './human/kind';
import { loopKind } from './loop/kind';
import { tddKind } from './tdd/kind';

const TABLE = new Map<string, WorkflowStageKind>();
/** The kinds with a `publish` hook, in table order: the work item asks them on every publish. */
const PUBLISHING: WorkflowStageKind[] = [];

/**
 * Adds a stage kind's workflow side. Call it at module load in a module the workflow bundle imports (the
 * registration then runs identically in every workflow, so replay sees the same table). A kind whose
 * decisions the work item holds (`decisions: 'item'`) must say what the item publishes for them (`publish`).
 */
export function registerWorkflowKind(kind: WorkflowStageKind): void {
  if (TABLE.has(kind.name)) throw new Error(`stage kind "${kind.name}" is already registered`);
  // The work item publishes the decisions it holds through the hook: one without the other hides them.
  if ((kind.publish !== undefined) !== (kind.decisions === 'item'))
    throw new Error(
      `stage kind "${kind.name}" ${kind.decisions === 'item' ? "has decisions: 'item' but no publish hook" : `has a publish hook but decisions: '${kind.decisions}'`}: the work item publishes the decisions it holds through publish`,
    );
  TABLE.set(kind.name, kind);
  if (kind.publish !== undefined) PUBLISHING.push(kind);
}

/** The kind a stage's `run:` names, or undefined for a plain stage (one activity per attempt). */
export function workflowKind(run: string): WorkflowStageKind | undefined {
  return TABLE.get(run);
}

/** The names of every registered kind, sorted. */
export function workflowKindNames(): string[] {
  return [...TABLE.keys()].sort();
}

/**
 * Sets every kind's handlers on the work item (its `installHandlers` hooks, in table order), each kind
 * through a `setHandler` that refuses a name the kind does not declare in its `messages`. The work item
 * passes Temporal's `setHandler`; called before its first await, so no message is ever dropped.
 */
export function installKindHandlers(item: Omit<KindItemContext, 'setHandler'>, setHandlerOf: typeof setHandler): void {
  for (const kind of TABLE.values())
    kind.installHandlers?.({ ...item, setHandler: declaredHandlers(kind, setHandlerOf) });
}

/** `set`, for the messages `kind` declares only: a handler of any other name is an error in the kind. */
export function declaredHandlers(kind: WorkflowStageKind, set: typeof setHandler): typeof setHandler {
  const checked = (...args: Parameters<typeof setHandler>): void => {
    const [definition] = args;
    if (!kind.messages.includes(definition.name))
      throw new Error(
        `stage kind "${kind.name}" sets a handler of "${definition.name}", which is not in its messages (${kind.messages.join(', ') || 'none'}): declare it there`,
      );
    set(...args);
  };
  return checked as typeof setHandler;
}

/** What the work item publishes for each kind that has a `publish` hook and something to publish, in table order. */
export function kindPublications(state: WorkItemState): KindPublication[] {
  const out: KindPublication[] = [];
  for (const kind of PUBLISHING) {
    const publication = kind.publish!(state);
    if (publication !== undefined) out.push(publication);
  }
  return out;
}

// The table: one line per kind.
registerWorkflowKind(tddKind);
registerWorkflowKind(approvalKind);
registerWorkflowKind(fanOutKind);
registerWorkflowKind(loopKind);
registerWorkflowKind(humanKind);

export { tddNode } from './tdd/workflow';
export { loopStage } from './loop/workflow';
export { fanOut, fanOutElementInput, fanOutElementOf, runFanOutWorkflow } from './fan-out/workflow';
export { runInlineFanOut } from './fan-out/engine-1-4';
export { runContracts } from './contract/stage';
