/**
 * Throughput: N work items × a linear pipeline of no-op stages, all started at once; work items per second
 * and stage transitions per second from the first start to the last completion. The histories also give
 * the per-stage scheduling latency under that load, and the event counts per item that explain a gap.
 */
import { cpuSnapshot, cpuSpent, otherCpuMs, type CpuSnapshot } from '../cpu';
import {
  activitySpans,
  eventCounts,
  medianParts,
  payloadBytesByType,
  schedulingLatencies,
  runDurationMs,
  transitionBreakdown,
  type TransitionParts,
} from '../history';
import { distribution, meanWithStandardError, median, quartiles, ratio, round, type Distribution } from '../statistics';
import {
  fmt,
  fmtRatio,
  nowMs,
  partsText,
  readHistories,
  sidesInOrder,
  type Row,
  type ScenarioContext,
  type ScenarioResult,
} from '../scenario';
import type { Side, SideName } from '../sides';

/** One side's throughput over all rounds. */
export interface ThroughputSide {
  items: number;
  stages: number;
  /**
   * Each round: wall time, items/s, and the cores other jobs on the machine kept busy meanwhile (machine
   * busy time minus this process and the server, ÷ wall time), which skews wall-clock numbers.
   */
  rounds: { wallMs: number; itemsPerSecond: number; otherCores: number | null }[];
  /** Items over the summed wall time of all rounds. */
  itemsPerSecond: number;
  transitionsPerSecond: number;
  /** Start → close of each item, by server timestamps. */
  itemDurationMs: Distribution;
  /** Previous activity completed → next activity started, under this load. */
  schedulingLatencyUnderLoadMs: Distribution;
  /** Median of each part of a transition under load (workflow task queue wait, workflow task, activity queue wait). */
  transitionPartsMs: TransitionParts;
  /** CPU milliseconds per work item: this process (workers, clients) and the dev server. */
  cpuPerItemMs: { process: number; server: number | null };
  historyEventsPerItem: number;
  historyBytesPerItem: number;
  workflowTasksPerItem: number;
  activitiesPerItem: number;
  /** Event counts by type of one item (all items of a side have the same shape). */
  eventsByType: Record<string, number>;
  /** Payload bytes by event type of the same item: where the history bytes go. */
  payloadBytesByType: Record<string, number>;
}

export interface ThroughputResult {
  treadle: ThroughputSide;
  baseline: ThroughputSide;
  /** Treadle ÷ baseline items per second over all rounds (goal ≥ 0.9). */
  throughputRatio: number | null;
  /** Treadle ÷ baseline items per second of each round (the two sides ran back to back), and their median. */
  roundRatios: (number | null)[];
  medianRoundRatio: number | null;
  /** The first and third quartiles of the round ratios: half the rounds lie between them. */
  roundRatioQuartiles: [number, number] | null;
  /**
   * The mean of the round ratios and its standard error: a run's ratio is as uncertain as this says (rounds
   * on this machine stray by ±15%, so ten rounds leave about ±0.04). Null with fewer than five rounds.
   */
  roundRatioMean: { mean: number; standardError: number } | null;
  /** Baseline ÷ Treadle CPU per item (worker process + server): the throughput ratio a CPU-bound, otherwise idle machine would give. */
  cpuBoundRatio: number | null;
  /** Treadle ÷ baseline scheduling latency p50 under load. */
  latencyUnderLoadP50Ratio: number | null;
}

/** Fewer rounds than this give no standard error. */
const MIN_ROUNDS_FOR_STANDARD_ERROR = 5;

/** What the per-round ratios come to; both throughput scenarios report it. */
export type RoundRatioSummary = Pick<ThroughputResult, 'medianRoundRatio' | 'roundRatioQuartiles' | 'roundRatioMean'>;

/** Per-round ratios summarised: their median, middle half, mean and its standard error; null when some round has no ratio. */
export function summarizeRoundRatios(roundRatios: readonly (number | null)[]): RoundRatioSummary {
  if (!roundRatios.every((r) => r !== null))
    return { medianRoundRatio: null, roundRatioQuartiles: null, roundRatioMean: null };
  const ratios = roundRatios as number[];
  // With a handful of rounds the standard error itself is too uncertain to print (quick mode has two).
  const mean = ratios.length >= MIN_ROUNDS_FOR_STANDARD_ERROR ? meanWithStandardError(ratios) : null;
  return {
    medianRoundRatio: round(median(ratios), 3),
    roundRatioQuartiles: quartiles(ratios).map((q) => round(q, 3)) as [number, number],
    roundRatioMean: mean ? { mean: round(mean.mean, 3), standardError: round(mean.standardError, 3) } : null,
  };
}

/** "rounds' mean 0.914 ± 0.026 (standard error)" for the goal lines, or '' when there is none. */
export function roundRatioMeanText(summary: RoundRatioSummary): string {
  const m = summary.roundRatioMean;
  return m ? `rounds' mean ${m.mean.toFixed(3)} ± ${m.standardError.toFixed(3)} (standard error)` : '';
}

/** The table row of per-round ratios, their median, middle half, and mean with its standard error. */
export function roundRatiosRow(
  scenario: string,
  result: Pick<ThroughputResult, 'roundRatios'> & RoundRatioSummary,
): Row {
  const quartileText = result.roundRatioQuartiles
    ? `middle half ${result.roundRatioQuartiles.map((q) => fmtRatio(q)).join('–')}`
    : '';
  const mean = result.roundRatioMean;
  return {
    scenario,
    metric: 'items/s ratio per round (median; middle half; mean ± standard error)',
    treadle: result.roundRatios.map((r) => fmtRatio(r)).join(' '),
    baseline: mean ? `${quartileText}; ${mean.mean.toFixed(2)} ± ${mean.standardError.toFixed(2)}` : quartileText,
    ratio: fmtRatio(result.medianRoundRatio),
  };
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
  const cpu: Record<SideName, CpuSnapshot[]> = { treadle: [], baseline: [] };
  for (let round = 0; round < rounds; round++) {
    for (const side of sidesInOrder(ctx, round)) {
      const roundIds = Array.from({ length: items }, (_, i) => `${ctx.tag}-throughput-${side.name}-r${round}-${i}`);
      ctx.progress(`throughput: ${side.name} round ${round + 1}/${rounds}, ${items} items × ${stages} stages`);
      const cpuBefore = cpuSnapshot(ctx.serverPids?.());
      walls[side.name].push(await runRound(side, roundIds, stages));
      cpu[side.name].push(cpuSpent(cpuBefore, cpuSnapshot(ctx.serverPids?.())));
      ids[side.name].push(...roundIds);
    }
  }

  const summarize = async (side: Side): Promise<ThroughputSide> => {
    const read = await readHistories(ids[side.name].map((id) => side.handle(id)));
    const totalWall = walls[side.name].reduce((a, b) => a + b, 0);
    const totalItems = items * rounds;
    const first = read[0]!;
    const counts = eventCounts(first.history);
    const serverCpu = cpu[side.name].map((c) => c.serverMs);
    const sumServer = serverCpu.every((ms) => ms !== null) ? serverCpu.reduce((a, b) => a! + b!, 0)! : null;
    return {
      items,
      stages,
      rounds: walls[side.name].map((wallMs, r) => {
        const other = otherCpuMs(cpu[side.name][r]!);
        return {
          wallMs: round(wallMs),
          itemsPerSecond: round((items / wallMs) * 1000),
          otherCores: other === null ? null : round(other / wallMs),
        };
      }),
      itemsPerSecond: round((totalItems / totalWall) * 1000),
      transitionsPerSecond: round(((totalItems * stages) / totalWall) * 1000),
      itemDurationMs: distribution(read.map((r) => runDurationMs(r.history))),
      schedulingLatencyUnderLoadMs: distribution(read.flatMap((r) => schedulingLatencies(r.history))),
      transitionPartsMs: medianParts(read.flatMap((r) => transitionBreakdown(r.history))),
      cpuPerItemMs: {
        process: round(cpu[side.name].reduce((a, c) => a + c.processMs, 0) / totalItems),
        server: sumServer === null ? null : round(sumServer / totalItems),
      },
      historyEventsPerItem: median(read.map((r) => r.size.events)),
      historyBytesPerItem: median(read.map((r) => r.size.bytes)),
      workflowTasksPerItem: median(read.map((r) => eventCounts(r.history).WorkflowTaskCompleted ?? 0)),
      activitiesPerItem: activitySpans(first.history).length,
      eventsByType: counts,
      payloadBytesByType: payloadBytesByType(first.history),
    };
  };
  const treadle = await summarize(ctx.treadle);
  const baseline = await summarize(ctx.baseline);
  const roundRatios = treadle.rounds.map((t, r) => ratio(t.itemsPerSecond, baseline.rounds[r]!.itemsPerSecond));
  const cpuPerItem = (s: ThroughputSide) =>
    s.cpuPerItemMs.server === null ? null : s.cpuPerItemMs.process + s.cpuPerItemMs.server;
  const [treadleCpu, baselineCpu] = [cpuPerItem(treadle), cpuPerItem(baseline)];
  const result: ThroughputResult = {
    treadle,
    baseline,
    throughputRatio: ratio(treadle.itemsPerSecond, baseline.itemsPerSecond),
    roundRatios,
    ...summarizeRoundRatios(roundRatios),
    cpuBoundRatio: treadleCpu === null || baselineCpu === null ? null : ratio(baselineCpu, treadleCpu),
    latencyUnderLoadP50Ratio: ratio(
      treadle.schedulingLatencyUnderLoadMs.p50,
      baseline.schedulingLatencyUnderLoadMs.p50,
    ),
  };
  const name = `throughput (${items}×${rounds} items × ${stages} stages)`;
  return {
    result,
    rows: [
      {
        scenario: name,
        metric: 'work items/s',
        treadle: fmt(treadle.itemsPerSecond),
        baseline: fmt(baseline.itemsPerSecond),
        ratio: fmtRatio(result.throughputRatio),
      },
      roundRatiosRow(name, result),
      {
        scenario: name,
        metric: 'cores used by other jobs during rounds',
        treadle: treadle.rounds.map((r) => fmt(r.otherCores)).join(' '),
        baseline: baseline.rounds.map((r) => fmt(r.otherCores)).join(' '),
        ratio: '',
      },
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
        metric: 'wf task queue / wf task / activity queue p50',
        treadle: partsText(treadle.transitionPartsMs),
        baseline: partsText(baseline.transitionPartsMs),
        ratio: fmtRatio(ratio(treadle.transitionPartsMs.wftRun, baseline.transitionPartsMs.wftRun)),
      },
      {
        scenario: name,
        metric: 'CPU ms per item: worker process / server',
        treadle: `${fmt(treadle.cpuPerItemMs.process)} / ${fmt(treadle.cpuPerItemMs.server)}`,
        baseline: `${fmt(baseline.cpuPerItemMs.process)} / ${fmt(baseline.cpuPerItemMs.server)}`,
        ratio: fmtRatio(treadleCpu === null || baselineCpu === null ? null : ratio(treadleCpu, baselineCpu)),
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
