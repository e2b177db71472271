/**
 * Worker start (issue 26 §5): wall time from spawning `treadle worker` to its `treadle worker: ready` line (polling),
 * with the workflow bundle `npm run build` prebuilt ("prebuilt"), and bundling the workflow code at start as
 * before ("rebundled", bench/worker-start-process.ts: the same worker, the sources in place of the bundle). Each
 * worker polls a task queue of its own, so it never takes the other scenarios' tasks, and is stopped (SIGTERM)
 * once ready. Runs alternate, so a burst of load on the machine weighs on both alike. Needs `npm run build`.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Connection } from '@temporalio/client';
import { distribution, ratio, type Distribution } from '../statistics';
import { fmt, fmtRatio, nowMs, type ScenarioContext, type ScenarioResult } from '../scenario';

/** The goal: `treadle worker` polls within this on the machine the benchmark runs on. */
export const WORKER_START_GOAL_MS = 3000;
/** Starts of each kind. */
const RUNS = { quick: 3, medium: 5, full: 7 } as const;
/** A start slower than this is a failure, not a measurement. */
const START_TIMEOUT_MS = 120_000;
/** Printed by runWorker once polling (src/worker/index.ts WORKER_READY_LINE). */
const READY_LINE = 'treadle worker: ready';

/** The repository (this file runs from `.bench-build/bench/scenarios`). */
const ROOT = path.resolve(__dirname, '..', '..', '..');

export interface WorkerStartResult {
  runs: number;
  prebuiltMs: Distribution;
  rebundledMs: Distribution;
  /** Rebundled ÷ prebuilt medians: what the prebuilt bundle saves. */
  rebundledRatio: number | null;
  underGoal: boolean;
}

/** Spawns a worker, resolves with the milliseconds to its ready line, then stops it and waits for its exit. */
function timeToReady(args: string[], env: NodeJS.ProcessEnv): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = nowMs();
    const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    let readyMs: number | undefined;
    const timer = setTimeout(() => child.kill('SIGKILL'), START_TIMEOUT_MS);
    child.stderr!.on('data', (chunk: Buffer) => {
      log += chunk.toString();
      if (readyMs === undefined && log.includes(READY_LINE)) {
        readyMs = nowMs() - started;
        child.kill('SIGTERM');
      }
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (readyMs !== undefined) resolve(readyMs);
      else reject(new Error(`worker ${args.join(' ')} exited ${code ?? signal} before it was ready:\n${log}`));
    });
  });
}

/** Runs the worker-start scenario. */
export async function workerStart(ctx: ScenarioContext): Promise<ScenarioResult<WorkerStartResult>> {
  const bin = path.join(ROOT, 'bin', 'treadle.js');
  if (!existsSync(path.join(ROOT, 'lib', 'workflow-bundle', 'manifest.json')))
    throw new Error('worker start needs the prebuilt workflow bundle; run "npm run build" first');
  const address = (ctx.treadleClient.client.connection as Connection).options.address;
  const runs = RUNS[ctx.sizes.mode];
  ctx.progress(`worker start: ${runs} starts each, prebuilt bundle and rebundled at start`);
  const samples = { prebuilt: [] as number[], rebundled: [] as number[] };
  for (let round = 0; round < runs; round++) {
    const env = (side: string) => ({
      ...process.env,
      TEMPORAL_ADDRESS: address,
      TREADLE_TASK_QUEUE: `${ctx.tag}-worker-start-${side}-${round}`,
    });
    samples.prebuilt.push(await timeToReady([bin, 'worker'], env('prebuilt')));
    const rebundled = path.join(__dirname, '..', 'worker-start-process.js');
    samples.rebundled.push(await timeToReady([rebundled], env('rebundled')));
  }
  const prebuiltMs = distribution(samples.prebuilt);
  const rebundledMs = distribution(samples.rebundled);
  const result: WorkerStartResult = {
    runs,
    prebuiltMs,
    rebundledMs,
    rebundledRatio: ratio(rebundledMs.p50, prebuiltMs.p50),
    underGoal: prebuiltMs.p50 < WORKER_START_GOAL_MS,
  };
  const scenario = `worker start (median of ${runs}; spawn → ready line)`;
  return {
    result,
    rows: [
      {
        scenario,
        metric: 'treadle worker: prebuilt bundle (baseline: bundled at start)',
        treadle: fmt(prebuiltMs.p50, ' ms'),
        baseline: fmt(rebundledMs.p50, ' ms'),
        ratio: fmtRatio(ratio(prebuiltMs.p50, rebundledMs.p50)),
      },
    ],
  };
}
