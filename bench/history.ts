/**
 * Reading measurements out of workflow histories, identically for Treadle and the baseline: activity spans,
 * scheduling latency (previous activity completed → next activity started, by server timestamps), event
 * counts by type, and history size as the server counts it.
 */
import type { WorkflowHandle } from '@temporalio/client';
import { median, round } from './statistics';

/** A workflow history as the client returns it. */
export type History = Awaited<ReturnType<WorkflowHandle['fetchHistory']>>;
type HistoryEvent = NonNullable<History['events']>[number];
type Timestamp = NonNullable<HistoryEvent['eventTime']>;

/** One activity execution as the history records it. */
export interface ActivitySpan {
  type: string;
  scheduledId: number;
  scheduledAt: number;
  startedAt?: number;
  closedId?: number;
  closedAt?: number;
  outcome?: 'completed' | 'failed' | 'timed_out' | 'canceled';
}

/** Numbers in histories are Long objects or plain numbers depending on the field and decoder. */
function toNumber(value: unknown): number {
  if (typeof value === 'number') return value;
  if (value && typeof (value as { toNumber?: unknown }).toNumber === 'function')
    return (value as { toNumber(): number }).toNumber();
  return Number(value ?? 0);
}

/** Milliseconds since the epoch of a protobuf timestamp. */
export function timestampMs(ts: Timestamp | null | undefined): number {
  if (!ts) return Number.NaN;
  return toNumber(ts.seconds) * 1000 + (ts.nanos ?? 0) / 1e6;
}

/** The event's type name, e.g. `ActivityTaskScheduled`, read from which attributes field it carries. */
export function eventTypeName(event: HistoryEvent): string {
  for (const [key, value] of Object.entries(event)) {
    if (value && key.endsWith('EventAttributes')) {
      const stem = key.slice(0, -'EventAttributes'.length);
      return stem.charAt(0).toUpperCase() + stem.slice(1);
    }
  }
  return `EventType${String(event.eventType)}`;
}

/** How many events of each type the history holds. */
export function eventCounts(history: History): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const event of history.events ?? []) {
    const name = eventTypeName(event);
    counts[name] = (counts[name] ?? 0) + 1;
  }
  return Object.fromEntries(Object.entries(counts).sort(([a], [b]) => a.localeCompare(b)));
}

/** Bytes of binary data (payloads, their metadata, user metadata) anywhere inside a value. */
function binaryBytes(value: unknown, depth = 0): number {
  if (value instanceof Uint8Array) return value.byteLength;
  if (value === null || typeof value !== 'object' || depth > 12) return 0;
  let total = 0;
  for (const inner of Object.values(value)) total += binaryBytes(inner, depth + 1);
  return total;
}

/**
 * Payload bytes (inputs, results, headers, summaries: every binary field) per event type: where a history's
 * size goes. Framing and plain fields are not counted, so the sum is a little under the history size.
 */
export function payloadBytesByType(history: History): Record<string, number> {
  const bytes: Record<string, number> = {};
  for (const event of history.events ?? []) {
    const name = eventTypeName(event);
    bytes[name] = (bytes[name] ?? 0) + binaryBytes(event);
  }
  return Object.fromEntries(
    Object.entries(bytes)
      .filter(([, b]) => b > 0)
      .sort(([, a], [, b]) => b - a),
  );
}

/** Every activity execution, in the order they were scheduled. */
export function activitySpans(history: History): ActivitySpan[] {
  const byScheduled = new Map<number, ActivitySpan>();
  for (const event of history.events ?? []) {
    const id = toNumber(event.eventId);
    const at = timestampMs(event.eventTime);
    const scheduled = event.activityTaskScheduledEventAttributes;
    if (scheduled) {
      byScheduled.set(id, { type: scheduled.activityType?.name ?? '?', scheduledId: id, scheduledAt: at });
      continue;
    }
    const started = event.activityTaskStartedEventAttributes;
    if (started) {
      const span = byScheduled.get(toNumber(started.scheduledEventId));
      if (span) span.startedAt = at;
      continue;
    }
    const closings: [ActivitySpan['outcome'], { scheduledEventId?: unknown } | null | undefined][] = [
      ['completed', event.activityTaskCompletedEventAttributes],
      ['failed', event.activityTaskFailedEventAttributes],
      ['timed_out', event.activityTaskTimedOutEventAttributes],
      ['canceled', event.activityTaskCanceledEventAttributes],
    ];
    for (const [outcome, attributes] of closings) {
      if (!attributes) continue;
      const span = byScheduled.get(toNumber(attributes.scheduledEventId));
      if (span) Object.assign(span, { closedId: id, closedAt: at, outcome });
    }
  }
  return [...byScheduled.values()].sort((a, b) => a.scheduledId - b.scheduledId);
}

/** One stage transition: an activity's start and the completion that led to it. */
interface Transition {
  previous: ActivitySpan;
  next: ActivitySpan;
}

/**
 * Every activity that some earlier activity's completion led to, paired with the latest activity
 * completion recorded before it was scheduled. The first activity of a run (caused by the start, not by a
 * completion) has none. With `only`, only activities of those types count as the "next" activity.
 */
function transitions(history: History, only?: (span: ActivitySpan) => boolean): Transition[] {
  const spans = activitySpans(history);
  const closed = spans
    .filter((s) => s.closedId !== undefined && s.outcome === 'completed')
    .sort((a, b) => a.closedId! - b.closedId!);
  const out: Transition[] = [];
  for (const span of spans) {
    if (span.startedAt === undefined || (only && !only(span))) continue;
    let previous: ActivitySpan | undefined;
    for (const c of closed) {
      if (c.closedId! < span.scheduledId) previous = c;
      else break;
    }
    if (previous) out.push({ previous, next: span });
  }
  return out;
}

/** Scheduling latency: previous activity completed → next activity started, per transition (ms). */
export function schedulingLatencies(history: History, only?: (span: ActivitySpan) => boolean): number[] {
  return transitions(history, only).map((t) => t.next.startedAt! - t.previous.closedAt!);
}

/**
 * Where a transition's time goes: waiting for a worker to pick up the workflow task (`wftQueue`), the
 * workflow task itself (`wftRun`: worker-side workflow code plus one round trip), waiting for a worker to
 * pick up the activity task (`activityQueue`), and the rest (`other`, e.g. a second workflow task).
 */
export interface TransitionParts {
  total: number;
  wftQueue: number;
  wftRun: number;
  activityQueue: number;
  other: number;
}

/** Splits every transition of the history into its parts (ms). */
export function transitionBreakdown(history: History): TransitionParts[] {
  const events = history.events ?? [];
  const timeOf = new Map<number, number>();
  const completedTasks: { id: number; scheduledId: number; startedId: number }[] = [];
  for (const event of events) {
    const id = toNumber(event.eventId);
    timeOf.set(id, timestampMs(event.eventTime));
    const done = event.workflowTaskCompletedEventAttributes;
    if (done)
      completedTasks.push({
        id,
        scheduledId: toNumber(done.scheduledEventId),
        startedId: toNumber(done.startedEventId),
      });
  }
  const out: TransitionParts[] = [];
  for (const { previous, next } of transitions(history)) {
    const task = completedTasks.filter((t) => t.id < next.scheduledId && t.id > previous.closedId!).pop();
    if (!task) continue;
    const total = next.startedAt! - previous.closedAt!;
    const wftQueue = timeOf.get(task.startedId)! - timeOf.get(task.scheduledId)!;
    const wftRun = timeOf.get(task.id)! - timeOf.get(task.startedId)!;
    const activityQueue = next.startedAt! - next.scheduledAt;
    out.push({ total, wftQueue, wftRun, activityQueue, other: total - wftQueue - wftRun - activityQueue });
  }
  return out;
}

/** Time from the first event (workflow started) to the last (workflow closed), by server timestamps. */
export function runDurationMs(history: History): number {
  const events = history.events ?? [];
  if (events.length === 0) return 0;
  return timestampMs(events[events.length - 1]!.eventTime) - timestampMs(events[0]!.eventTime);
}

/** Size measurements of one execution: bytes as the server counts them toward its limits, and events. */
export interface HistorySize {
  bytes: number;
  events: number;
}

/** Reads the history and its size (`historySizeBytes` from describe: the number Temporal limits). */
export async function readHistory(handle: WorkflowHandle): Promise<{ history: History; size: HistorySize }> {
  const [history, description] = await Promise.all([handle.fetchHistory(), handle.describe()]);
  return { history, size: { bytes: description.historySize ?? Number.NaN, events: history.events?.length ?? 0 } };
}

/** Median of each part over many transitions (ms), so the parts add up roughly to the median total. */
export function medianParts(parts: readonly TransitionParts[]): TransitionParts {
  const med = (pick: (p: TransitionParts) => number) => round(median(parts.map(pick)));
  return {
    total: med((p) => p.total),
    wftQueue: med((p) => p.wftQueue),
    wftRun: med((p) => p.wftRun),
    activityQueue: med((p) => p.activityQueue),
    other: med((p) => p.other),
  };
}

/** Workflow tasks of a run: how many, and their summed time from started to completed (worker-side work plus one round trip each). */
export function workflowTaskTime(history: History): { count: number; totalMs: number } {
  const started = new Map<number, number>();
  let count = 0;
  let totalMs = 0;
  for (const event of history.events ?? []) {
    if (event.workflowTaskStartedEventAttributes) started.set(toNumber(event.eventId), timestampMs(event.eventTime));
    const done = event.workflowTaskCompletedEventAttributes;
    if (done) {
      const from = started.get(toNumber(done.startedEventId));
      if (from !== undefined) {
        count++;
        totalMs += timestampMs(event.eventTime) - from;
      }
    }
  }
  return { count, totalMs: round(totalMs) };
}
