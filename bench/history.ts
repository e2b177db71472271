/**
 * Reading measurements out of workflow histories, identically for Treadle and the baseline: activity spans,
 * scheduling latency (previous activity completed → next activity started, by server timestamps), event
 * counts by type, and history size as the server counts it.
 */
import type { WorkflowHandle } from '@temporalio/client';

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
  if (value && typeof (value as { toNumber?: unknown }).toNumber === 'function') return (value as { toNumber(): number }).toNumber();
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

/**
 * Scheduling latency of every activity that some earlier activity's completion led to: the time from the
 * latest activity completion recorded before it was scheduled to its own start. The first activity of a
 * run (caused by the start, not by a completion) has none. With `only`, only activities of those types
 * count as the "next" activity.
 */
export function schedulingLatencies(history: History, only?: (span: ActivitySpan) => boolean): number[] {
  const spans = activitySpans(history);
  const closed = spans.filter((s) => s.closedId !== undefined && s.outcome === 'completed').sort((a, b) => a.closedId! - b.closedId!);
  const out: number[] = [];
  for (const span of spans) {
    if (span.startedAt === undefined || (only && !only(span))) continue;
    let previous: ActivitySpan | undefined;
    for (const c of closed) {
      if (c.closedId! < span.scheduledId) previous = c;
      else break;
    }
    if (previous) out.push(span.startedAt - previous.closedAt!);
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
