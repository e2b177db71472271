/**
 * How many open work items each engine version has (`treadle engines`, TreadleClient.openItemsByEngine), so
 * an operator knows when an old version's code (src/workflows/legacy/) may go (docs/versioning.md). Open
 * items come from visibility; an item's version is where its history keeps it, in the prepare step's result
 * (the first local-activity marker), as the workflow itself reads it. No search attribute carries it: adding
 * one would be a new upsert, a command that histories recorded without it would not replay, and items
 * already open would lack it.
 */
import type { Client } from '@temporalio/client';
import { listExecutions } from './visibility';

/** Histories read at once: one short call each, so the server is not flooded by a wide listing. */
const CONCURRENT_READS = 16;
/** Events per history page; the prepare marker is among an item's first few. */
const HISTORY_PAGE = 50;
/** Pages read before giving up on finding the marker (an item whose prepare step has not answered yet). */
const HISTORY_PAGES = 4;
/** The marker the SDK records for a local activity's result. */
const LOCAL_ACTIVITY_MARKER = 'core_local_activity';

/** Open work items of one engine version; `version` null: not known yet (prepare not answered, or unreadable). */
export interface EngineCount {
  version: number | null;
  openItems: number;
  /** When the oldest of them started (ISO 8601). */
  oldestStart: string;
  /** Up to three of their ids, to look at. */
  examples: string[];
}

/** A raw payload as the service returns it. */
interface RawPayload {
  metadata?: Record<string, Uint8Array> | null;
  data?: Uint8Array | null;
}

/** The fields of a raw history event this reads. */
interface RawEvent {
  markerRecordedEventAttributes?: {
    markerName?: string | null;
    details?: Record<string, { payloads?: RawPayload[] | null }> | null;
  } | null;
}

const utf8 = new TextDecoder();

/**
 * Counts the open work items per engine version, newest version first, from a visibility listing
 * (`ExecutionStatus = 'Running' AND WorkflowType = 'workItem'`, narrowed by `taskQueue`) and the first page
 * of each item's history. Eventually consistent, like every visibility listing.
 */
export async function openItemsByEngine(client: Client, options: { taskQueue?: string } = {}): Promise<EngineCount[]> {
  const narrow = options.taskQueue ? ` AND TaskQueue = '${options.taskQueue.replace(/'/g, "''")}'` : '';
  const query = `ExecutionStatus = 'Running' AND WorkflowType = 'workItem'${narrow}`;
  const counts = new Map<number | null, EngineCount>();
  const pending = new Set<Promise<void>>();
  let failure: { error: unknown } | undefined;
  const add = (version: number | null, workflowId: string, started: string): void => {
    const count = counts.get(version) ?? { version, openItems: 0, oldestStart: started, examples: [] };
    count.openItems += 1;
    if (started < count.oldestStart) count.oldestStart = started;
    if (count.examples.length < 3) count.examples.push(workflowId);
    counts.set(version, count);
  };
  for await (const execution of listExecutions(client, query)) {
    if (failure) break;
    const { workflowId } = execution;
    const started = execution.startTime.toISOString();
    // Every read settles into `add` or `failure`, so none is left rejecting unhandled.
    const read: Promise<void> = engineOf(client, workflowId)
      .then(
        (version) => add(version, workflowId, started),
        (error: unknown) => void (failure ??= { error }),
      )
      .then(() => void pending.delete(read));
    pending.add(read);
    if (pending.size >= CONCURRENT_READS) await Promise.race(pending);
  }
  await Promise.all(pending);
  if (failure) throw failure.error;
  return [...counts.values()].sort((a, b) => (b.version ?? Infinity) - (a.version ?? Infinity));
}

/** The engine version an item's history records (1 when the prepare result has none), or null if not found. */
async function engineOf(client: Client, workflowId: string): Promise<number | null> {
  let nextPageToken: Uint8Array | undefined;
  for (let page = 0; page < HISTORY_PAGES; page++) {
    const response = await client.workflowService.getWorkflowExecutionHistory({
      namespace: client.options.namespace,
      execution: { workflowId },
      maximumPageSize: HISTORY_PAGE,
      ...(nextPageToken ? { nextPageToken } : {}),
    });
    for (const event of (response.history?.events ?? []) as RawEvent[]) {
      const marker = event.markerRecordedEventAttributes;
      if (marker?.markerName !== LOCAL_ACTIVITY_MARKER) continue;
      return versionIn(marker.details?.result?.payloads?.[0]);
    }
    nextPageToken = response.nextPageToken?.length ? response.nextPageToken : undefined;
    if (!nextPageToken) break;
  }
  return null;
}

/** The `engine` of a prepare result payload; null when it is not plain JSON (stored externally, say). */
function versionIn(payload: RawPayload | undefined): number | null {
  const encoding = payload?.metadata?.encoding;
  if (!payload?.data || !encoding || utf8.decode(encoding) !== 'json/plain') return null;
  const result = JSON.parse(utf8.decode(payload.data)) as { engine?: unknown };
  return typeof result.engine === 'number' ? result.engine : 1;
}
