/**
 * A work item's calls waiting for model capacity, as `treadle status` and the inbox show them (read by
 * src/client/capacity.ts). Types and pure code only, so the CLI can load it without the Temporal client.
 */
import type { CapacityWait } from '../capacity/waiting';
import type { WorkItemState } from '../model/state';

/** A call of an item waiting for capacity: the wait its activity heartbeats, and which activity and stage. */
export interface ActivityCapacityWait extends CapacityWait {
  /** The activity type (the stage's implementation, `anthropic`). */
  activityType: string;
  activityId: string;
  /** The stage it belongs to, when the item's state tells (one running stage); see {@link withStages}. */
  stage?: string;
  /** The whole line: "waiting for claude-sonnet-4-6: 8/8 calls in flight, … (since 14:02:10)". */
  line: string;
}

/**
 * The waits with the stage each belongs to: a pending activity does not name its stage, so when the item runs
 * exactly one stage, that one; with several running, the wait is shown under its activity type alone.
 */
export function withStages(
  waits: ActivityCapacityWait[],
  state: Pick<WorkItemState, 'stages'>,
): ActivityCapacityWait[] {
  const running = Object.entries(state.stages).filter(([, s]) => s.status === 'running');
  if (running.length !== 1) return waits;
  return waits.map((w) => ({ ...w, stage: running[0]![0] }));
}
