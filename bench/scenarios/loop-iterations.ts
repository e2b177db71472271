/**
 * A loop stage (seed 004) over N iterations against a hand-written Temporal loop in the same run: the
 * Treadle side is a work item with one `loop` stage (fixed N, the scripted agent writing a 2 KB output and a
 * status file each iteration; the engine writes context.json, snapshots, progress), the baseline a workflow
 * calling one activity per iteration that writes the same files. Both continue as new every 100 iterations.
 * Measured: wall time (start → result, all N iterations checked), time per iteration, and the history of
 * every run of the looping workflow (the Treadle loop stage's child, the baseline workflow), summed.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ratio, round } from '../statistics';
import { fmt, fmtRatio, nowMs, sidesInOrder, type ScenarioContext, type ScenarioResult } from '../scenario';
import type { SideName } from '../sides';

/** What each iteration's agent writes as the output. */
const OUTPUT_BYTES = 2_000;

export interface LoopIterationsSide {
  wallMs: number;
  msPerIteration: number;
  runs: number;
  historyBytes: number;
  historyEvents: number;
  historyBytesPerIteration: number;
}

export interface LoopIterationsResult {
  iterations: number;
  scenarioMs: number;
  treadle: LoopIterationsSide;
  baseline: LoopIterationsSide;
  wallRatio: number | null;
  bytesRatio: number | null;
}

export async function loopIterations(ctx: ScenarioContext): Promise<ScenarioResult<LoopIterationsResult>> {
  const iterations = ctx.sizes.loopIterations;
  ctx.progress(`loop stage: ${iterations} iterations, one run per side`);
  const scenarioStarted = nowMs();
  const workspace = mkdtempSync(path.join(os.tmpdir(), 'treadle-bench-loops-'));
  // The Treadle worker runs in this process and reads its loop workspace when an iteration runs.
  const saved = process.env.TREADLE_LOOP_WORKSPACE;
  process.env.TREADLE_LOOP_WORKSPACE = workspace;
  const output = `${'x'.repeat(OUTPUT_BYTES - 1)}\n`;
  const sides = {} as Record<SideName, LoopIterationsSide>;
  try {
    for (const side of sidesInOrder(ctx, 0)) {
      const id = `${ctx.tag}-loop-${iterations}-${side.name}`;
      const started = nowMs();
      await side.startLoop(id, iterations, output, path.join(workspace, 'baseline', id));
      await side.loopResult(id, iterations);
      const wallMs = round(nowMs() - started);
      let bytes = 0;
      let events = 0;
      let runs = 0;
      const looping = side.loopWorkflowId(id);
      for await (const run of ctx.treadleClient.client.workflow.list({ query: `WorkflowId = "${looping}"` })) {
        runs++;
        bytes += run.historySize ?? 0;
        events += run.historyLength ?? 0;
      }
      sides[side.name] = { wallMs, msPerIteration: round(wallMs / iterations), runs, historyBytes: bytes, historyEvents: events, historyBytesPerIteration: round(bytes / iterations) };
    }
  } finally {
    if (saved === undefined) delete process.env.TREADLE_LOOP_WORKSPACE;
    else process.env.TREADLE_LOOP_WORKSPACE = saved;
    rmSync(workspace, { recursive: true, force: true });
  }
  const { treadle, baseline } = sides;
  const result: LoopIterationsResult = {
    iterations,
    scenarioMs: round(nowMs() - scenarioStarted, 0),
    treadle,
    baseline,
    wallRatio: ratio(treadle.wallMs, baseline.wallMs),
    bytesRatio: ratio(treadle.historyBytesPerIteration, baseline.historyBytesPerIteration),
  };
  const name = `loop stage (${iterations} iterations)`;
  return {
    result,
    rows: [
      { scenario: name, metric: 'wall time', treadle: fmt(treadle.wallMs, ' ms'), baseline: fmt(baseline.wallMs, ' ms'), ratio: fmtRatio(result.wallRatio) },
      { scenario: name, metric: 'time per iteration', treadle: fmt(treadle.msPerIteration, ' ms'), baseline: fmt(baseline.msPerIteration, ' ms'), ratio: fmtRatio(ratio(treadle.msPerIteration, baseline.msPerIteration)) },
      { scenario: name, metric: 'history bytes per iteration', treadle: fmt(treadle.historyBytesPerIteration, ' B'), baseline: fmt(baseline.historyBytesPerIteration, ' B'), ratio: fmtRatio(result.bytesRatio) },
      { scenario: name, metric: 'runs (continue-as-new) / history events', treadle: `${treadle.runs} / ${treadle.historyEvents}`, baseline: `${baseline.runs} / ${baseline.historyEvents}`, ratio: '' },
    ],
  };
}
