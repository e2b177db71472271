/**
 * Fan-out over items (issue 9): a `fan_out` stage over N elements, each a child work item running one no-op
 * stage, at most `fanOutConcurrency` at once — against the samples' child-workflow fan-out (one activity
 * makes the list, then one child workflow per element running one no-op activity, the same concurrency) in
 * the same run. Wall time (client start → result, every element checked completed and in order), the
 * parent's history (bytes and events, per element, and its workflow tasks), and one element's history.
 */
import { eventCounts, payloadBytesByType, readHistory, workflowTaskTime } from '../history';
import { ratio, round } from '../statistics';
import { fmt, fmtRatio, nowMs, sidesInOrder, type ScenarioContext, type ScenarioResult } from '../scenario';
import type { SideName } from '../sides';

export interface FanOutItemsSide {
  wallMs: number;
  parentHistoryBytes: number;
  parentHistoryEvents: number;
  /** The parent's history bytes divided by the number of elements. */
  parentBytesPerElement: number;
  /** The parent's payload bytes by event type: where its history bytes go. */
  parentPayloadBytesByType: Record<string, number>;
  /** The parent's workflow tasks and their summed duration (started → completed). */
  parentWorkflowTasks: { count: number; totalMs: number };
  /** The history of the first element's child workflow. */
  elementHistoryBytes: number;
  elementHistoryEvents: number;
  /** That child's events by type: what an element's own history holds. */
  elementEventCounts: Record<string, number>;
}

export interface FanOutItemsResult {
  items: number;
  concurrency: number;
  /** How long the whole scenario took, both sides and the history reads: what it adds to a run. */
  scenarioMs: number;
  treadle: FanOutItemsSide;
  baseline: FanOutItemsSide;
  wallRatio: number | null;
  parentBytesRatio: number | null;
}

export async function fanOutItems(ctx: ScenarioContext): Promise<ScenarioResult<FanOutItemsResult>> {
  const { fanOutItems: items, fanOutConcurrency: concurrency } = ctx.sizes;
  ctx.progress(`fan-out over items: ${items} elements, ${concurrency} at once, one run per side`);
  const scenarioStarted = nowMs();
  const sides = {} as Record<SideName, FanOutItemsSide>;
  for (const side of sidesInOrder(ctx, 0)) {
    const id = `${ctx.tag}-fanout-items-${items}-${side.name}`;
    const started = nowMs();
    await side.startFanOutItems(id, items, concurrency);
    await side.fanOutItemsResult(id, items);
    const wallMs = round(nowMs() - started);
    const parent = await readHistory(side.handle(id));
    const element = await readHistory(side.handle(side.elementId(id, 0)));
    sides[side.name] = {
      wallMs,
      parentHistoryBytes: parent.size.bytes,
      parentHistoryEvents: parent.size.events,
      parentBytesPerElement: round(parent.size.bytes / items),
      parentPayloadBytesByType: payloadBytesByType(parent.history),
      parentWorkflowTasks: workflowTaskTime(parent.history),
      elementHistoryBytes: element.size.bytes,
      elementHistoryEvents: element.size.events,
      elementEventCounts: eventCounts(element.history),
    };
  }
  const { treadle, baseline } = sides;
  const result: FanOutItemsResult = {
    items,
    concurrency,
    scenarioMs: round(nowMs() - scenarioStarted, 0),
    treadle,
    baseline,
    wallRatio: ratio(treadle.wallMs, baseline.wallMs),
    parentBytesRatio: ratio(treadle.parentHistoryBytes, baseline.parentHistoryBytes),
  };
  const name = `fan_out stage (${items} elements, ${concurrency} at once)`;
  return {
    result,
    rows: [
      { scenario: name, metric: 'wall time', treadle: fmt(treadle.wallMs, ' ms'), baseline: fmt(baseline.wallMs, ' ms'), ratio: fmtRatio(result.wallRatio) },
      {
        scenario: name,
        metric: 'parent history events / bytes',
        treadle: `${treadle.parentHistoryEvents} / ${fmt(treadle.parentHistoryBytes / 1024, ' KiB')}`,
        baseline: `${baseline.parentHistoryEvents} / ${fmt(baseline.parentHistoryBytes / 1024, ' KiB')}`,
        ratio: fmtRatio(result.parentBytesRatio),
      },
      { scenario: name, metric: 'parent history bytes per element', treadle: fmt(treadle.parentBytesPerElement, ' B'), baseline: fmt(baseline.parentBytesPerElement, ' B'), ratio: fmtRatio(ratio(treadle.parentBytesPerElement, baseline.parentBytesPerElement)) },
      {
        scenario: name,
        metric: 'parent workflow tasks: count / summed time',
        treadle: `${treadle.parentWorkflowTasks.count} / ${fmt(treadle.parentWorkflowTasks.totalMs, ' ms')}`,
        baseline: `${baseline.parentWorkflowTasks.count} / ${fmt(baseline.parentWorkflowTasks.totalMs, ' ms')}`,
        ratio: fmtRatio(ratio(treadle.parentWorkflowTasks.totalMs, baseline.parentWorkflowTasks.totalMs)),
      },
      {
        scenario: name,
        metric: "one element's history events / bytes",
        treadle: `${treadle.elementHistoryEvents} / ${fmt(treadle.elementHistoryBytes / 1024, ' KiB')}`,
        baseline: `${baseline.elementHistoryEvents} / ${fmt(baseline.elementHistoryBytes / 1024, ' KiB')}`,
        ratio: fmtRatio(ratio(treadle.elementHistoryBytes, baseline.elementHistoryBytes)),
      },
    ],
  };
}
