/**
 * Fan-out over items (issues 9 and 24): a `fan_out` stage over N elements, each a child work item running one
 * no-op stage, at most `fanOutConcurrency` at once — against the samples' child-workflow fan-out (one activity
 * makes the list, then one child workflow per element running one no-op activity, the same concurrency) in
 * the same run, at each size of `fanOutItems` (1,000 and 10,000 in the full run). Wall time (client start →
 * result, every element checked completed and in order); the histories on the parent side, per element:
 * Treadle's work item plus every run of its fan-out workflow (which continues as new), the baseline's one
 * parent; the largest single run (Temporal limits each run); and one element's history.
 */
import { eventCounts, payloadBytesByType, readHistory, workflowTaskTime } from '../history';
import { ratio, round } from '../statistics';
import { fmt, fmtRatio, nowMs, sidesInOrder, type ScenarioContext, type ScenarioResult } from '../scenario';
import type { Side, SideName } from '../sides';

export interface FanOutItemsSide {
  wallMs: number;
  /** Every run of every workflow on the parent side (Treadle: the work item and the fan-out workflow's runs). */
  parentRuns: number;
  parentHistoryBytes: number;
  parentHistoryEvents: number;
  /** The parent side's history bytes divided by the number of elements. */
  parentBytesPerElement: number;
  /** The largest single run's history: what Temporal's per-run limits see. */
  largestRunBytes: number;
  largestRunEvents: number;
  /** The parent side's payload bytes by event type: where its history bytes go. */
  parentPayloadBytesByType: Record<string, number>;
  /** The parent side's workflow tasks and their summed duration (started → completed). */
  parentWorkflowTasks: { count: number; totalMs: number };
  /** The history of the first element's child workflow. */
  elementHistoryBytes: number;
  elementHistoryEvents: number;
  /** That child's events by type: what an element's own history holds. */
  elementEventCounts: Record<string, number>;
}

/** One size's comparison. */
export interface FanOutItemsSize {
  items: number;
  treadle: FanOutItemsSide;
  /** Null above {@link BASELINE_MAX_ITEMS}: one raw parent would pass Temporal's per-run limits. */
  baseline: FanOutItemsSide | null;
  wallRatio: number | null;
  parentBytesRatio: number | null;
}

export interface FanOutItemsResult {
  concurrency: number;
  /** How long the whole scenario took, both sides and the history reads: what it adds to a run. */
  scenarioMs: number;
  sizes: FanOutItemsSize[];
}

/**
 * The baseline's one parent writes three events per child and a workflow task per few: about 4 events and
 * 750 B an element, so past ~12,000 elements it would pass Temporal's 51,200 events per run and be
 * terminated. Larger sizes run Treadle's side only (`TREADLE_BENCH_FAN_OUT_ITEMS=100000`).
 */
export const BASELINE_MAX_ITEMS = 10_000;

/** Reads every run of the side's parent workflows, following continue-as-new from each first run. */
async function parentHistories(side: Side, id: string) {
  const totals = {
    runs: 0,
    bytes: 0,
    events: 0,
    largestBytes: 0,
    largestEvents: 0,
    tasks: { count: 0, totalMs: 0 },
    payloads: {} as Record<string, number>,
  };
  for (const workflowId of side.fanOutParents(id)) {
    let runId: string | undefined =
      (await side.handle(workflowId).describe()).raw.workflowExecutionInfo?.firstRunId ?? undefined;
    while (runId) {
      const { history, size } = await readHistory(side.handle(workflowId, runId));
      totals.runs++;
      totals.bytes += size.bytes;
      totals.events += size.events;
      totals.largestBytes = Math.max(totals.largestBytes, size.bytes);
      totals.largestEvents = Math.max(totals.largestEvents, size.events);
      const tasks = workflowTaskTime(history);
      totals.tasks.count += tasks.count;
      totals.tasks.totalMs += tasks.totalMs;
      for (const [type, bytes] of Object.entries(payloadBytesByType(history)))
        totals.payloads[type] = (totals.payloads[type] ?? 0) + bytes;
      runId = history.events?.at(-1)?.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId ?? undefined;
    }
  }
  return totals;
}

export async function fanOutItems(ctx: ScenarioContext): Promise<ScenarioResult<FanOutItemsResult>> {
  const { fanOutItems: counts, fanOutConcurrency: concurrency } = ctx.sizes;
  const scenarioStarted = nowMs();
  const sizes: FanOutItemsSize[] = [];
  for (const [n, items] of counts.entries()) {
    ctx.progress(`fan-out over items: ${items} elements, ${concurrency} at once, one run per side`);
    const sides = {} as Partial<Record<SideName, FanOutItemsSide>>;
    for (const side of sidesInOrder(ctx, n).filter((s) => s.name === 'treadle' || items <= BASELINE_MAX_ITEMS)) {
      const id = `${ctx.tag}-fanout-items-${items}-${side.name}`;
      const started = nowMs();
      await side.startFanOutItems(id, items, concurrency);
      await side.fanOutItemsResult(id, items);
      const wallMs = round(nowMs() - started);
      ctx.progress(`  ${side.name}: ${items} elements in ${wallMs} ms`);
      const parent = await parentHistories(side, id);
      const element = await readHistory(side.handle(side.elementId(id, 0)));
      sides[side.name] = {
        wallMs,
        parentRuns: parent.runs,
        parentHistoryBytes: parent.bytes,
        parentHistoryEvents: parent.events,
        parentBytesPerElement: round(parent.bytes / items),
        largestRunBytes: parent.largestBytes,
        largestRunEvents: parent.largestEvents,
        parentPayloadBytesByType: parent.payloads,
        parentWorkflowTasks: { count: parent.tasks.count, totalMs: round(parent.tasks.totalMs) },
        elementHistoryBytes: element.size.bytes,
        elementHistoryEvents: element.size.events,
        elementEventCounts: eventCounts(element.history),
      };
    }
    const treadle = sides.treadle!;
    const baseline = sides.baseline ?? null;
    const size: FanOutItemsSize = {
      items,
      treadle,
      baseline,
      wallRatio: baseline ? ratio(treadle.wallMs, baseline.wallMs) : null,
      parentBytesRatio: baseline ? ratio(treadle.parentHistoryBytes, baseline.parentHistoryBytes) : null,
    };
    sizes.push(size);
    // A size takes minutes at 10,000: its figures are logged at once, so a run stopped later keeps them.
    for (const row of rowsOf(size, concurrency))
      ctx.progress(`  ${row.metric}: treadle ${row.treadle}, baseline ${row.baseline} (${row.ratio})`);
  }
  const result: FanOutItemsResult = { concurrency, scenarioMs: round(nowMs() - scenarioStarted, 0), sizes };
  return { result, rows: sizes.flatMap((size) => rowsOf(size, concurrency)) };
}

function rowsOf(size: FanOutItemsSize, concurrency: number): ScenarioResult<FanOutItemsResult>['rows'] {
  const { treadle } = size;
  const baseline = size.baseline;
  const scenario = `fan_out stage (${size.items} elements, ${concurrency} at once)`;
  const row = (metric: string, of: (side: FanOutItemsSide) => string, ratioOf: (side: FanOutItemsSide) => number) => ({
    scenario,
    metric,
    treadle: of(treadle),
    baseline: baseline ? of(baseline) : 'not run',
    ratio: fmtRatio(baseline ? ratio(ratioOf(treadle), ratioOf(baseline)) : null),
  });
  return [
    row(
      'wall time',
      (s) => fmt(s.wallMs, ' ms'),
      (s) => s.wallMs,
    ),
    row(
      'parent side: runs / history events / bytes',
      (s) => `${s.parentRuns} / ${s.parentHistoryEvents} / ${fmt(s.parentHistoryBytes / 1024, ' KiB')}`,
      (s) => s.parentHistoryBytes,
    ),
    row(
      'parent side history bytes per element',
      (s) => fmt(s.parentBytesPerElement, ' B'),
      (s) => s.parentBytesPerElement,
    ),
    row(
      'largest run: history events / bytes',
      (s) => `${s.largestRunEvents} / ${fmt(s.largestRunBytes / 1024, ' KiB')}`,
      (s) => s.largestRunBytes,
    ),
    row(
      'parent side workflow tasks: count / summed time',
      (s) => `${s.parentWorkflowTasks.count} / ${fmt(s.parentWorkflowTasks.totalMs, ' ms')}`,
      (s) => s.parentWorkflowTasks.totalMs,
    ),
    row(
      "one element's history events / bytes",
      (s) => `${s.elementHistoryEvents} / ${fmt(s.elementHistoryBytes / 1024, ' KiB')}`,
      (s) => s.elementHistoryBytes,
    ),
  ];
}
