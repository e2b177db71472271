/**
 * Latency: per-stage scheduling latency (previous stage's activity completed → next stage's activity
 * started, by the server's history timestamps) of linear no-op pipelines run one item at a time, the two
 * sides interleaved item by item so drift in the machine or the database hits both alike.
 */
import { medianParts, readHistory, schedulingLatencies, transitionBreakdown, type TransitionParts } from '../history';
import { distribution, ratio, type Distribution } from '../statistics';
import { fmt, fmtRatio, partsText, sidesInOrder, type ScenarioContext, type ScenarioResult } from '../scenario';
import type { SideName } from '../sides';

export interface LatencyResult {
  items: number;
  stages: number;
  treadle: Distribution;
  baseline: Distribution;
  /** Median of each part of a transition: where the time goes. */
  parts: { treadle: TransitionParts; baseline: TransitionParts };
  /** Treadle ÷ baseline p50 (goal ≤ 1.2). */
  p50Ratio: number | null;
  p95Ratio: number | null;
  p99Ratio: number | null;
}

/** Runs the latency scenario. */
export async function latency(ctx: ScenarioContext): Promise<ScenarioResult<LatencyResult>> {
  const { latencyItems: items, stages } = ctx.sizes;
  const samples: Record<SideName, number[]> = { treadle: [], baseline: [] };
  const parts: Record<SideName, TransitionParts[]> = { treadle: [], baseline: [] };
  ctx.progress(`latency: ${items} items per side, one at a time`);
  for (let i = 0; i < items; i++) {
    for (const side of sidesInOrder(ctx, i)) {
      const id = `${ctx.tag}-latency-${side.name}-${i}`;
      await side.startLinear(id, stages);
      await side.result(id);
      const { history } = await readHistory(side.handle(id));
      samples[side.name].push(...schedulingLatencies(history));
      parts[side.name].push(...transitionBreakdown(history));
    }
  }
  const treadle = distribution(samples.treadle);
  const baseline = distribution(samples.baseline);
  const result: LatencyResult = {
    items,
    stages,
    treadle,
    baseline,
    parts: { treadle: medianParts(parts.treadle), baseline: medianParts(parts.baseline) },
    p50Ratio: ratio(treadle.p50, baseline.p50),
    p95Ratio: ratio(treadle.p95, baseline.p95),
    p99Ratio: ratio(treadle.p99, baseline.p99),
  };
  const name = `latency (${items} items × ${stages} stages, sequential)`;
  return {
    result,
    rows: [
      ...(['p50', 'p95', 'p99'] as const).map((p) => ({
        scenario: name,
        metric: `sched. latency ${p}`,
        treadle: fmt(treadle[p], ' ms'),
        baseline: fmt(baseline[p], ' ms'),
        ratio: fmtRatio(ratio(treadle[p], baseline[p])),
      })),
      {
        scenario: name,
        metric: 'wf task queue / wf task / activity queue p50',
        treadle: partsText(result.parts.treadle),
        baseline: partsText(result.parts.baseline),
        ratio: fmtRatio(ratio(result.parts.treadle.wftRun, result.parts.baseline.wftRun)),
      },
    ],
  };
}
