/**
 * What a model call's activity says while it waits for capacity: it heartbeats {@link CapacityWaitDetails}, and
 * `treadle status`, the SDK and the inbox read them from the pending activity (`capacityWaitOf`) to show
 * "waiting for claude-sonnet-4-6: 8/8 calls in flight, 41k/60k tokens this minute". Types and a reader only
 * (no zod, no I/O): the worker writes it, the client reads it.
 */
import { isRecord } from '../model/pipeline-checks';

/** A call waiting for capacity, as its activity heartbeats it. */
export interface CapacityWait {
  /** `provider/model` of the limit (never the key). */
  scope: string;
  /** What holds it back, as `describeUsage` (shapes.ts) words it. */
  waitingFor: string;
  /** When the call began to wait (ISO 8601). */
  since: string;
}

/** The heartbeat details of a model call while it waits for capacity. */
export interface CapacityWaitDetails {
  capacity: CapacityWait;
}

/** The wait in an activity's heartbeat details, or undefined when they are not a capacity wait. */
export function capacityWaitOf(details: unknown): CapacityWait | undefined {
  const capacity = isRecord(details) ? details.capacity : undefined;
  if (!isRecord(capacity)) return undefined;
  const { scope, waitingFor, since } = capacity;
  if (typeof scope !== 'string' || typeof waitingFor !== 'string' || typeof since !== 'string') return undefined;
  return { scope, waitingFor, since };
}

/** "waiting for claude-sonnet-4-6: 8/8 calls in flight, …" for one-line displays. */
export function describeWait(wait: CapacityWait): string {
  const model = wait.scope.includes('/') ? wait.scope.slice(wait.scope.indexOf('/') + 1) : wait.scope;
  return `waiting for ${model}: ${wait.waitingFor}`;
}
