/**
 * A loop stage (seed 004) over N iterations against a hand-written Temporal loop in the same run: the
 * Treadle side is a work item with one `loop` stage (fixed N, the scripted agent writing a 2 KB output and a
 * status file each iteration; the engine writes context.json, snapshots, progress), the baseline a workflow
 * calling one activity per iteration that writes the same files. Both continue as new every 100 iterations.
 * Measured: wall time (start → result, all N iterations checked), time per iteration, and the history of
 * every run of the looping workflow (the Treadle loop stage's child, the baseline workflow), summed. The runs
 * are found by following the continue-as-new chain back from the latest run (each run's first event names
 * the run it continues), and each run's size is the server's own count (`describe`), so nothing depends on
 * visibility having caught up with the last run.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { readHistory } from '../history';
import { ratio, round } from '../statistics';
import { fmt, fmtRatio, nowMs, sidesInOrder, type ScenarioContext, type ScenarioResult } from '../scenario';
import type { Side, SideName } from '../sides';

/** What each iteration's agent writes as the output. */
const OUTPUT_BYTES = 2_000;
/** More runs than any size makes (continue-as-new every 100 iterations): a chain this long is broken. */
const MAX_RUNS = 1_000;

export interface LoopIterationsSide {
  wallMs: number;
  msPerIteration: number;
  /** Runs of the looping workflow (1 + the times it continued as new). */
  runs: number;
  /** History bytes (as the server counts them toward its limits) and events, summed over every run. */
  historyBytes: number;
  historyEvents: number;
  historyBytesPerIteration: number;
  /** The largest single run's history bytes: what Temporal's per-execution limits apply to. */
  largestRunBytes: number;
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
      const runs = await everyRun(side, side.loopWorkflowId(id));
      const bytes = runs.reduce((sum, r) => sum + r.bytes, 0);
      sides[side.name] = {
        wallMs,
        msPerIteration: round(wallMs / iterations),
        runs: runs.length,
        historyBytes: bytes,
        historyEvents: runs.reduce((sum, r) => sum + r.events, 0),
        historyBytesPerIteration: round(bytes / iterations),
        largestRunBytes: Math.max(...runs.map((r) => r.bytes)),
      };
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
      {
        scenario: name,
        metric: 'wall time',
        treadle: fmt(treadle.wallMs, ' ms'),
        baseline: fmt(baseline.wallMs, ' ms'),
        ratio: fmtRatio(result.wallRatio),
      },
      {
        scenario: name,
        metric: 'time per iteration',
        treadle: fmt(treadle.msPerIteration, ' ms'),
        baseline: fmt(baseline.msPerIteration, ' ms'),
        ratio: fmtRatio(ratio(treadle.msPerIteration, baseline.msPerIteration)),
      },
      {
        scenario: name,
        metric: 'history bytes per iteration',
        treadle: fmt(treadle.historyBytesPerIteration, ' B'),
        baseline: fmt(baseline.historyBytesPerIteration, ' B'),
        ratio: fmtRatio(result.bytesRatio),
      },
      {
        scenario: name,
        metric: 'runs (continue-as-new) / history events',
        treadle: `${treadle.runs} / ${treadle.historyEvents}`,
        baseline: `${baseline.runs} / ${baseline.historyEvents}`,
        ratio: '',
      },
    ],
  };
}

/** Every run of workflow `workflowId`, latest first: the chain of continue-as-new followed backwards. */
async function everyRun(side: Side, workflowId: string): Promise<{ runId: string; bytes: number; events: number }[]> {
  const runs: { runId: string; bytes: number; events: number }[] = [];
  let runId: string | undefined = (await side.handle(workflowId).describe()).runId;
  while (runId) {
    if (runs.length >= MAX_RUNS || runs.some((r) => r.runId === runId))
      throw new Error(`${workflowId}: the continue-as-new chain does not end (at run ${runId})`);
    const { history, size } = await readHistory(side.handle(workflowId, runId));
    runs.push({ runId, bytes: size.bytes, events: size.events });
    runId = history.events?.[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId || undefined;
  }
  return runs;
}
