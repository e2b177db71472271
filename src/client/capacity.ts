/**
 * Model capacity as a client sees it (issue 39, docs/cli.md `treadle limits`): the limiters running now with each
 * one's use, and the calls of an item waiting for capacity, read from its pending activities' heartbeats.
 *
 * - A limiter is a `treadleLimiter` workflow, one per scope (shapes.ts `limiterWorkflowId`): they are listed by
 *   workflow type and status (built-in search attributes, nothing to register) and asked their `usage` query, each
 *   within the client's `answerWaitMs`, so a limiter no worker runs is reported as such instead of hanging.
 * - A waiting call heartbeats {@link CapacityWaitDetails} (src/capacity/waiting.ts); the describe Treadle already
 *   makes of an item carries its pending activities' last heartbeat, decoded with the client's data converter.
 */
import type { Client, WorkflowExecutionDescription } from '@temporalio/client';
import { decodeArrayFromPayloads } from '@temporalio/common/lib/internal-non-workflow';
import { usageQuery } from '../capacity/messages';
import type { UsageSnapshot } from '../capacity/shapes';
import { capacityWaitOf, describeWait, type CapacityWait } from '../capacity/waiting';
import type { ActivityCapacityWait } from './capacity-waits';
import { listExecutions } from './visibility';
import { answeredByWorker } from './worker-presence';

/** The visibility query of the limiters running now (built-in search attributes only). */
export const RUNNING_LIMITERS_QUERY = `WorkflowType = 'treadleLimiter' AND ExecutionStatus = 'Running'`;

/** One running limiter: its scope, read from its workflow id, and its use now or why it could not be read. */
export interface LimiterUsage {
  workflowId: string;
  provider: string;
  model: string;
  /** A short hash of the API key (never the key). */
  keyId: string;
  /** The limiter's answer to its `usage` query; absent when it gave none (see `error`). */
  usage?: UsageSnapshot;
  /** Why `usage` is absent: no worker answered within the wait, or the query failed. */
  error?: string;
}

/** `treadle-limiter:<provider>:<model>:<key id>` split into its scope (a model name may hold colons). */
export function limiterScopeOf(workflowId: string): { provider: string; model: string; keyId: string } {
  const parts = workflowId.split(':');
  if (parts.length < 4) return { provider: '?', model: workflowId, keyId: '?' };
  return { provider: parts[1]!, model: parts.slice(2, -1).join(':'), keyId: parts[parts.length - 1]! };
}

/**
 * Every running limiter with its use now, sorted by provider, model and key id. Each is asked at once and within
 * `answerWaitMs`: a limiter no worker answers for in time gets an `error` instead of holding up the others.
 */
export async function runningLimiters(client: Client, answerWaitMs: number): Promise<LimiterUsage[]> {
  const ids: string[] = [];
  for await (const execution of listExecutions(client, RUNNING_LIMITERS_QUERY)) ids.push(execution.workflowId);
  const limiters = await Promise.all(
    ids.map(async (workflowId): Promise<LimiterUsage> => {
      const scope = { workflowId, ...limiterScopeOf(workflowId) };
      try {
        const handle = client.workflow.getHandle(workflowId);
        const usage = await answeredByWorker(client, workflowId, () => handle.query(usageQuery), answerWaitMs);
        return { ...scope, usage };
      } catch (error) {
        return { ...scope, error: error instanceof Error ? error.message : String(error) };
      }
    }),
  );
  const order = (l: LimiterUsage) => `${l.provider}\u0000${l.model}\u0000${l.keyId}`;
  return limiters.sort((a, b) => order(a).localeCompare(order(b)));
}

/** `(since 14:02:10)`: the wait's start as UTC time of day (a date too when it is not today's). */
function sinceText(since: string, now = new Date()): string {
  const at = new Date(since);
  if (Number.isNaN(at.getTime())) return `(since ${since})`;
  const iso = at.toISOString();
  const sameDay = iso.slice(0, 10) === now.toISOString().slice(0, 10);
  return `(since ${sameDay ? iso.slice(11, 19) : `${iso.slice(0, 10)} ${iso.slice(11, 19)}`} UTC)`;
}

/** The one-line description of a wait, with when it began. */
export function capacityWaitLine(wait: CapacityWait, now = new Date()): string {
  return `${describeWait(wait)} ${sinceText(wait.since, now)}`;
}

const utf8 = new TextDecoder();

/**
 * Whether a heartbeat payload may hold a capacity wait: plain JSON without the word `"capacity"` cannot, and is
 * not decoded (every supervised activity heartbeats its calls, and `status` reads them all); any other encoding
 * (a codec's, an external-storage reference) may, and is decoded.
 */
function mayHoldCapacityWait(payload: {
  metadata?: Record<string, Uint8Array> | null;
  data?: Uint8Array | null;
}): boolean {
  const encoding = payload.metadata?.encoding;
  if (!encoding || utf8.decode(encoding) !== 'json/plain') return true;
  return payload.data ? utf8.decode(payload.data).includes('"capacity"') : false;
}

/**
 * The pending activities of a described execution whose last heartbeat is a capacity wait. Only heartbeats that may
 * hold one are decoded, so an item with nothing waiting costs no more than the describe already made.
 */
export async function capacityWaitsOf(
  client: Client,
  description: WorkflowExecutionDescription,
): Promise<ActivityCapacityWait[]> {
  const waits: ActivityCapacityWait[] = [];
  for (const activity of description.raw.pendingActivities ?? []) {
    const payloads = activity.heartbeatDetails?.payloads;
    if (!payloads?.length || !mayHoldCapacityWait(payloads[0]!)) continue;
    let details: unknown[];
    try {
      details = await decodeArrayFromPayloads(client.options.loadedDataConverter, payloads);
    } catch {
      continue; // Details in a shape this client cannot decode are not a capacity wait it could show.
    }
    const wait = capacityWaitOf(details[0]);
    if (!wait) continue;
    waits.push({
      ...wait,
      activityType: activity.activityType?.name ?? '?',
      activityId: activity.activityId ?? '?',
      line: capacityWaitLine(wait),
    });
  }
  return waits;
}

export { withStages, type ActivityCapacityWait } from './capacity-waits';
