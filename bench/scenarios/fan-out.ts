/**
 * Fan-out: one stage, then 50 or 200 stages in parallel, then one stage joining them. Wall time (client:
 * start call → result) and history size.
 */
import { readHistory } from '../history';
import { median, ratio, round } from '../statistics';
import { fmt, fmtRatio, nowMs, sidesInOrder, type ScenarioContext, type ScenarioResult } from '../scenario';
import type { SideName } from '../sides';

export interface FanOutSide {
  wallMs: number[];
  medianWallMs: number;
  historyEvents: number;
  historyBytes: number;
}

export interface FanOutWidthResult {
  width: number;
  treadle: FanOutSide;
  baseline: FanOutSide;
  wallRatio: number | null;
  bytesRatio: number | null;
}

/** Runs the fan-out scenario at every configured width. */
export async function fanOut(ctx: ScenarioContext): Promise<ScenarioResult<FanOutWidthResult[]>> {
  const results: FanOutWidthResult[] = [];
  for (const width of ctx.sizes.fanOutWidths) {
    const walls: Record<SideName, number[]> = { treadle: [], baseline: [] };
    const sizes: Record<SideName, { events: number; bytes: number }[]> = { treadle: [], baseline: [] };
    ctx.progress(`fan-out: width ${width}, ${ctx.sizes.fanOutRuns} run(s) per side`);
    for (let run = 0; run < ctx.sizes.fanOutRuns; run++) {
      for (const side of sidesInOrder(ctx, run)) {
        const id = `${ctx.tag}-fanout-${width}-${side.name}-${run}`;
        const started = nowMs();
        await side.startFanOut(id, width);
        await side.result(id);
        walls[side.name].push(round(nowMs() - started));
        sizes[side.name].push((await readHistory(side.handle(id))).size);
      }
    }
    const summarize = (name: SideName): FanOutSide => ({
      wallMs: walls[name],
      medianWallMs: median(walls[name]),
      historyEvents: median(sizes[name].map((s) => s.events)),
      historyBytes: median(sizes[name].map((s) => s.bytes)),
    });
    const treadle = summarize('treadle');
    const baseline = summarize('baseline');
    results.push({ width, treadle, baseline, wallRatio: ratio(treadle.medianWallMs, baseline.medianWallMs), bytesRatio: ratio(treadle.historyBytes, baseline.historyBytes) });
  }
  return {
    result: results,
    rows: results.flatMap((r) => {
      const name = `fan-out (${r.width} parallel stages)`;
      return [
        { scenario: name, metric: 'wall time', treadle: fmt(r.treadle.medianWallMs, ' ms'), baseline: fmt(r.baseline.medianWallMs, ' ms'), ratio: fmtRatio(r.wallRatio) },
        {
          scenario: name,
          metric: 'history events / bytes',
          treadle: `${r.treadle.historyEvents} / ${fmt(r.treadle.historyBytes / 1024, ' KiB')}`,
          baseline: `${r.baseline.historyEvents} / ${fmt(r.baseline.historyBytes / 1024, ' KiB')}`,
          ratio: fmtRatio(r.bytesRatio),
        },
      ];
    }),
  };
}
