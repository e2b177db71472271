/**
 * Throughput: N work items × a linear pipeline of no-op stages, all started at once; work items per second
 * and stage transitions per second from the first start to the last completion. The histories also give
 * the per-stage scheduling latency under that load, and the event counts per item that explain a gap.
 */
import { activitySpans, eventCounts, schedulingLatencies, runDurationMs } from '../history';
import { distribution, median, ratio, round, type Distribution } from '../statistics';
import { fmt, fmtRatio, nowMs, readHistories, sidesInOrder, type ScenarioContext, type ScenarioResult } from '../scenario';
import type { Side, SideName } from '../sides';

/** One side's throughput over all rounds. */
export interface ThroughputSide {
  items: number;
  stages: number;
  rounds: { wallMs: number; itemsPerSecond: number }[];
  /** Items over the summed wall time of all rounds. */
  itemsPerSecond: number;
  transitionsPerSecond: number;
  /** Start → close of each item, by server timestamps. */
  itemDurationMs: Distribution;
  /** Previous activity completed → next activity started, under this load. */
  schedulingLatencyUnderLoadMs: Distribution;
  historyEventsPerItem: number;
  historyBytesPerItem: number;
  workflowTasksPerItem: number;
  activitiesPerItem: number;
  /** Event counts by type of one item (all items of a side have the same shape). */
  eventsByType: Record<string, number>;
}

export interface ThroughputResult {
  treadle: ThroughputSide;
  baseline: ThroughputSide;
  /** Treadle ÷ baseline items per second (goal ≥ 0.9). */
  throughputRatio: number | null;
  /** Treadle ÷ baseline scheduling latency p50 under load. */
  latencyUnderLoadP50Ratio: number | null;
}

async function runRound(side: Side, ids: string[], stages: number): Promise<number> {
  const started = nowMs();
  await Promise.all(
    ids.map(async (id) => {
      await side.startLinear(id, stages);
      await side.result(id);
    }),
  );
  return nowMs() - started;
}

/** Runs the throughput scenario. */
export async function throughput(ctx: ScenarioContext): Promise<ScenarioResult<ThroughputResult>> {
  const { throughputItems: items, throughputRounds: rounds, stages } = ctx.sizes;
  const ids: Record<SideName, string[]> = { treadle: [], baseline: [] };
  const walls: Record<SideName, number[]> = { treadle: [], baseline: [] };
  for (let round = 0; round < rounds; round++) {
    for (const side of sidesInOrder(ctx, round)) {
      const roundIds = Array.from({ length: items }, (_, i) => `${ctx.tag}-throughput-${side.name}-r${round}-${i}`);
      ctx.progress(`throughput: ${side.name} round ${round + 1}/${rounds}, ${items} items × ${stages} stages`);
      walls[side.name].push(await runRound(side, roundIds, stages));
      ids[side.name].push(...roundIds);
    }
  }

  const summarize = async (side: Side): Promise<ThroughputSide> => {
    const read = await readHistories(ids[side.name].map((id) => side.handle(id)));
    const totalWall = walls[side.name].reduce((a, b) => a + b, 0);
    const totalItems = items * rounds;
    const first = read[0]!;
    const counts = eventCounts(first.history);
    return {
      items,
      stages,
      rounds: walls[side.name].map((wallMs) => ({ wallMs: round(wallMs), itemsPerSecond: round((items / wallMs) * 1000) })),
      itemsPerSecond: round((totalItems / totalWall) * 1000),
      transitionsPerSecond: round(((totalItems * stages) / totalWall) * 1000),
      itemDurationMs: distribution(read.map((r) => runDurationMs(r.history))),
      schedulingLatencyUnderLoadMs: distribution(read.flatMap((r) => schedulingLatencies(r.history))),
      historyEventsPerItem: median(read.map((r) => r.size.events)),
      historyBytesPerItem: median(read.map((r) => r.size.bytes)),
      workflowTasksPerItem: median(read.map((r) => eventCounts(r.history).WorkflowTaskCompleted ?? 0)),
      activitiesPerItem: activitySpans(first.history).length,
      eventsByType: counts,
    };
  };
  const treadle = await summarize(ctx.treadle);
  const baseline = await summarize(ctx.baseline);
  const result: ThroughputResult = {
    treadle,
    baseline,
    throughputRatio: ratio(treadle.itemsPerSecond, baseline.itemsPerSecond),
    latencyUnderLoadP50Ratio: ratio(treadle.schedulingLatencyUnderLoadMs.p50, baseline.schedulingLatencyUnderLoadMs.p50),
  };
  const name = `throughput (${items}×${rounds} items × ${stages} stages)`;
  return {
    result,
    rows: [
      { scenario: name, metric: 'work items/s', treadle: fmt(treadle.itemsPerSecond), baseline: fmt(baseline.itemsPerSecond), ratio: fmtRatio(result.throughputRatio) },
      {
        scenario: name,
        metric: 'stage transitions/s',
        treadle: fmt(treadle.transitionsPerSecond),
        baseline: fmt(baseline.transitionsPerSecond),
        ratio: fmtRatio(ratio(treadle.transitionsPerSecond, baseline.transitionsPerSecond)),
      },
      {
        scenario: name,
        metric: 'sched. latency p50 / p99 under load',
        treadle: `${fmt(treadle.schedulingLatencyUnderLoadMs.p50, ' ms')} / ${fmt(treadle.schedulingLatencyUnderLoadMs.p99, ' ms')}`,
        baseline: `${fmt(baseline.schedulingLatencyUnderLoadMs.p50, ' ms')} / ${fmt(baseline.schedulingLatencyUnderLoadMs.p99, ' ms')}`,
        ratio: fmtRatio(result.latencyUnderLoadP50Ratio),
      },
      {
        scenario: name,
        metric: 'history events / bytes per item',
        treadle: `${treadle.historyEventsPerItem} / ${fmt(treadle.historyBytesPerItem / 1024, ' KiB')}`,
        baseline: `${baseline.historyEventsPerItem} / ${fmt(baseline.historyBytesPerItem / 1024, ' KiB')}`,
        ratio: fmtRatio(ratio(treadle.historyBytesPerItem, baseline.historyBytesPerItem)),
      },
    ],
  };
}
