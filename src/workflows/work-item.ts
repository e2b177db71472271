/**
 * The `workItem` workflow: one execution per work item. It validates the pipeline spec, runs the DAG
 * (independent stages in parallel), runs every stage through the stage runner (execute → gate → policy,
 * DESIGN.md "The stage runner"), waits for human reviews, and keeps the `state` query, the search
 * attributes and the Web UI details current. Its state and handlers are a {@link WorkItemRun}; decisions
 * come from the pure functions in `src/engine`.
 *
 * Items run on the engine version they started on (README "Versioning", docs/versioning.md): the live
 * engine is work-item-run.ts, stage-runner.ts and stage-attempt.ts; what older versions did differently is
 * in legacy/, chosen once per item (legacy/index.ts).
 */
import type { WorkItemInput, WorkItemResult } from '../model/state';
import { WorkItemRun } from './work-item-run';

/** Runs one work item through its pipeline. */
export async function workItem(args: WorkItemInput): Promise<WorkItemResult> {
  const run = new WorkItemRun(args);
  // Before the first await, so no message is ever dropped.
  run.registerHandlers();
  return run.run();
}
