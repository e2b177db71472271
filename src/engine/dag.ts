/**
 * DAG readiness and the work item's overall status, as pure functions over stage statuses.
 * A stage runs when every dependency completed (or skipped itself); it is skipped when a dependency failed
 * or was skipped because of a failure; a stage waiting for review blocks only its dependents.
 */
import type { PipelineSpec } from '../model/pipeline';
import type { ItemStatus, StageState } from '../model/state';

type Stages = Record<string, Pick<StageState, 'status' | 'skipReason'>>;

function satisfied(stage: Pick<StageState, 'status' | 'skipReason'> | undefined): boolean {
  return stage?.status === 'completed' || (stage?.status === 'skipped' && stage.skipReason === 'outcome');
}

function blocked(stage: Pick<StageState, 'status' | 'skipReason'> | undefined): boolean {
  return stage?.status === 'failed' || (stage?.status === 'skipped' && stage.skipReason === 'upstream_failed');
}

/** Pending stages whose dependencies are all satisfied, in spec order. */
export function readyStages(spec: PipelineSpec, stages: Stages): string[] {
  return spec.stages
    .filter((s) => stages[s.name]?.status === 'pending' && s.dependsOn.every((d) => satisfied(stages[d])))
    .map((s) => s.name);
}

/**
 * Pending stages that can never run because a dependency failed (directly or transitively), each with the
 * dependency that blocked it. Applying the result and calling again reaches the transitive closure.
 */
export function stagesToSkip(spec: PipelineSpec, stages: Stages): { stage: string; because: string }[] {
  const out: { stage: string; because: string }[] = [];
  for (const s of spec.stages) {
    if (stages[s.name]?.status !== 'pending') continue;
    const because = s.dependsOn.find((d) => blocked(stages[d]));
    if (because !== undefined) out.push({ stage: s.name, because });
  }
  return out;
}

/** True when no stage is pending, running or waiting for review. */
export function allSettled(stages: Stages): boolean {
  return Object.values(stages).every(
    (s) => s.status === 'completed' || s.status === 'failed' || s.status === 'skipped',
  );
}

/** The item's status: failed/completed once settled, waiting_review when reviews are all that is left. */
export function itemStatus(stages: Stages): ItemStatus {
  const all = Object.values(stages);
  if (allSettled(stages)) return all.some((s) => s.status === 'failed') ? 'failed' : 'completed';
  if (all.some((s) => s.status === 'running')) return 'running';
  if (all.some((s) => s.status === 'waiting_review')) return 'waiting_review';
  return all.some((s) => s.status === 'waiting_approval') ? 'waiting_approval' : 'running';
}
