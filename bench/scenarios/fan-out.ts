/**
 * Fan-out: one stage, then 50 or 200 stages in parallel, then one stage joining them. Wall time (client:
 * start call → result) and history size.
 */
import { payloadBytesByType, readHistory, workflowTaskTime } from '../history';
import { median, ratio, round } from '../statistics';
import { fmt, fmtRatio, nowMs, sidesInOrder, type ScenarioContext, type ScenarioResult } from '../scenario';
import type { SideName } from '../sides';

export interface FanOutSide {
  wallMs: number[];
  medianWallMs: number;
  historyEvents: number;
  historyBytes: number;
  /** Payload bytes by event type of the last run: where the history bytes go. */
  payloadBytesByType: Record<string, number>;
  /** Workflow tasks of the last run and their summed duration (started → completed). */
  workflowTasks: { count: number; totalMs: number };
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
    const payloads: Record<SideName, Record<string, number>> = { treadle: {}, baseline: {} };
    const tasks: Record<SideName, { count: number; totalMs: number }> = {
      treadle: { count: 0, totalMs: 0 },
      baseline: { count: 0, totalMs: 0 },
    };
    ctx.progress(`fan-out: width ${width}, ${ctx.sizes.fanOutRuns} run(s) per side`);
    for (let run = 0; run < ctx.sizes.fanOutRuns; run++) {
      for (const side of sidesInOrder(ctx, run)) {
        const id = `${ctx.tag}-fanout-${width}-${side.name}-${run}`;
        const started = nowMs();
        await side.startFanOut(id, width);
        await side.result(id);
        walls[side.name].push(round(nowMs() - started));
        const { history, size } = await readHistory(side.handle(id));
        sizes[side.name].push(size);
        payloads[side.name] = payloadBytesByType(history);
        tasks[side.name] = workflowTaskTime(history);
      }
    }
    const summarize = (name: SideName): FanOutSide => ({
      wallMs: walls[name],
      medianWallMs: median(walls[name]),
      historyEvents: median(sizes[name].map((s) => s.events)),
      historyBytes: median(sizes[name].map((s) => s.bytes)),
      payloadBytesByType: payloads[name],
      workflowTasks: tasks[name],
    });
    const treadle = summarize('treadle');
    const baseline = summarize('baseline');
    results.push({
      width,
      treadle,
      baseline,
      wallRatio: ratio(treadle.medianWallMs, baseline.medianWallMs),
      bytesRatio: ratio(treadle.historyBytes, baseline.historyBytes),
    });
  }
  return {
    result: results,
    rows: results.flatMap((r) => {
      const name = `fan-out (${r.width} parallel stages)`;
      return [
        {
          scenario: name,
          metric: 'wall time',
          treadle: fmt(r.treadle.medianWallMs, ' ms'),
          baseline: fmt(r.baseline.medianWallMs, ' ms'),
          ratio: fmtRatio(r.wallRatio),
        },
        {
          scenario: name,
          metric: 'workflow tasks: count / summed time',
          treadle: `${r.treadle.workflowTasks.count} / ${fmt(r.treadle.workflowTasks.totalMs, ' ms')}`,
          baseline: `${r.baseline.workflowTasks.count} / ${fmt(r.baseline.workflowTasks.totalMs, ' ms')}`,
          ratio: fmtRatio(ratio(r.treadle.workflowTasks.totalMs, r.baseline.workflowTasks.totalMs)),
        },
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
