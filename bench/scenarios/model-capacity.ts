/**
 * Model capacity (issue 39): three `treadle worker` processes (`node bin/treadle.js worker`, the build in lib/)
 * run one work item, a `fan_out` of N `llm` elements, against the fake Anthropic server
 * (test/support/fake-anthropic.ts), which enforces what a real key would: 8 calls in flight and 60,000 input and
 * output tokens in any 60-s window, 50 ms a reply, 500 tokens a reply, 429 with `retry-after` past a limit.
 *
 * Two sides on a dev server of the scenario's own, each with fresh workers, a fresh fake and its own task queue
 * (one after the other at the issue's size; at once in the scaled run, to fit CI's budget):
 * - **limiter**: every worker is given one limits file (`TREADLE_LIMITS`) with the same two limits;
 * - **no limiter**: no limits file (each worker holds off its own calls after a 429, nothing shared).
 *
 * From the fake's own counts: the most calls in flight, the most tokens in any 60-s window, 429s and
 * violations; from Temporal: the elements' activity attempts that failed or were retried; the wall time; and
 * the utilisation of the binding limit (tokens): tokens the fake counted ÷ (limit × (span / 60 s + 1)), the
 * span from the first call's arrival to the last reply. A 60-s sliding window admits at most that much in a
 * span: a whole window at once at the start, then the limit per minute, so the first minute's burst is not
 * counted as utilisation above 100 % (BENCHMARKS.md "Model capacity"). The limiter side is checked: over a
 * limit, a 429, or an attempt failed or retried is a missed goal.
 *
 * Needs `npm run build` (the workers run lib/). Quick and medium modes run a scaled size and say so; the full
 * mode (and `--only=model-capacity` without `--quick`/`--medium`) the issue's 1,000 elements, about 9 minutes a side.
 */
import { Client, Connection, type WorkflowHandle } from '@temporalio/client';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { limiterWorkflowId } from '../../src/capacity/shapes';
import { capacityKeyId } from '../../src/capacity/worker/key-id';
import { TreadleClient } from '../../src/client';
import type { FanOutArtefact } from '../../src/kinds/fan-out/shapes';
import { FileBlobStore } from '../../src/storage/blob-store';
import {
  startFakeAnthropic,
  type FakeAnthropic,
  type FakeStats,
  type FakeTimelineEvent,
} from '../../test/support/fake-anthropic';
import { TIMELINE_LIMIT } from '../../test/support/fake-anthropic-limits';
import { eventCounts, readHistory } from '../history';
import { fmt, mapLimited, nowMs, type Row, type ScenarioContext, type ScenarioResult, runCleanups } from '../scenario';
import { median, round } from '../statistics';
import { serverOfItsOwn } from './separate-processes';

/** The issue's limits, set alike in the limits file and in the fake. */
export const CAPACITY_LIMITS = { concurrency: 8, tokensPerMinute: 60_000 } as const;
/** The issue's provider: 50 ms a reply, about 500 tokens a call (the fake: 400 in, 100 out). */
const LATENCY_MS = 50;
const TOKENS_PER_REPLY = 500;
/**
 * The elements' `max_tokens`, as docs/deploy.md advises for short replies: a call in flight reserves its
 * `max_tokens` against a token limit until its reply's usage replaces it (as providers' own limiters do), so at
 * the default 4096 only 112 calls of 500 tokens fit a minute of 60,000 (BENCHMARKS.md "Model capacity").
 */
const MAX_TOKENS = 1024;
/** The goal on the limiter side: utilisation of the binding limit (tokens). */
export const UTILISATION_GOAL = 0.9;
/** The issue's size; quick and medium modes run {@link SCALED_ELEMENTS}. */
const FULL_ELEMENTS = 1_000;
/**
 * Quick (CI) size: past one window's worth (120 calls) so the sliding window binds, yet done in a minute a side:
 * the first 120 go at once, the rest when the first minute's tokens leave the window.
 */
const SCALED_ELEMENTS = 150;
const WORKERS = 3;
/** Elements at once: the fan-out's most (1–200), so the workers, not the fan-out, press on the provider. */
const MAX_CONCURRENT = 200;
const MODEL = 'claude-sonnet-4-6';
const API_KEY = 'bench-model-capacity-key';
const STAGE = 'each';
const WINDOW_MS = 60_000;
/** Printed by runWorker once polling (src/worker/index.ts WORKER_READY_LINE). */
const READY_LINE = 'treadle worker: ready';
const READY_TIMEOUT_MS = 120_000;
/** A side that has not finished by then is stuck (the full size needs about 8.5 minutes). */
const SIDE_TIMEOUT_MS = 30 * 60_000;
/** Minutes without a model call after which a side is stuck. */
const STALL_TICKS = 3;
/** Admissions skipped (the limiter's start) and then counted for the first burst's rate. */
const BURST_SKIP = 10;
const BURST_CALLS = 100;

/** The repository (this file runs from `.bench-build/bench/scenarios`). */
const ROOT = path.resolve(__dirname, '..', '..', '..');

/** One side's measurements. */
export interface CapacitySide {
  limiter: boolean;
  /** Client start → the item's result (all elements checked completed). */
  wallMs: number;
  /** The fake's first request arrival → its last reply; null when its timeline was cut off. */
  spanMs: number | null;
  fake: {
    requests: number;
    admitted: number;
    /** 429s answered (requests that arrived over a limit). */
    rateLimited: number;
    violations: FakeStats['violations'];
    maxInFlight: number;
    /** The most input and output tokens in any 60-s window. */
    maxWindowTokens: number;
    /** Input and output tokens of the admitted calls. */
    tokens: number;
  };
  /** Tokens ÷ (limit × (span / 60 s + 1)): see the file's comment. */
  utilisation: number | null;
  /** Tokens ÷ (limit × span / 60 s): what the first minute's burst lifts, for comparison. */
  utilisationPerSpan: number | null;
  /** Admissions per second over {@link BURST_CALLS} calls of the first burst (after the first {@link BURST_SKIP}). */
  burstCallsPerSecond: number | null;
  temporal: {
    /** Activity attempts started in the elements' histories. */
    attempts: number;
    /** Attempts after the first of an activity (Temporal retried it). */
    retried: number;
    /** ActivityTaskFailed / ActivityTaskTimedOut events: attempts that failed for good (a retried one leaves none). */
    failed: number;
    /** Why attempts were retried: the distinct `lastFailure` messages of the retries' started events (at most 5). */
    retryCauses: string[];
  };
  /** When the fake admitted each call, ms after the first request (empty when its timeline was cut off). */
  admittedAtMs: number[];
  /**
   * How late the limit let calls through: for each call after the first window's worth (limit ÷ tokens a call),
   * its admission minus that of the call a window's worth before it, minus 60 s; the median and the largest (ms).
   */
  windowLagMs: { median: number; max: number } | null;
  /** The limiter workflow's history over all its runs (limiter side only). */
  limiterHistory: { runs: number; events: number; eventsPerCall: number; byType: Record<string, number> } | null;
}

export interface ModelCapacityResult {
  elements: number;
  /** True when the mode ran fewer than the issue's 1,000 elements. */
  scaled: boolean;
  workers: number;
  maxConcurrent: number;
  limits: typeof CAPACITY_LIMITS;
  latencyMs: number;
  tokensPerReply: number;
  /** The best utilisation this size allows: the binding limit's windows are whole windows of calls. */
  bestUtilisation: number;
  limiter: CapacitySide;
  noLimiter: CapacitySide;
  scenarioMs: number;
  /** Which of the limiter side's checks failed (empty: none). */
  limiterMisses: string[];
}

/** A running `treadle worker`. */
interface WorkerProcess {
  child: ChildProcess;
  log(): string;
}

/** Spawns `treadle worker` with `env` and resolves once it prints its ready line. */
function startWorker(env: NodeJS.ProcessEnv, cwd: string): Promise<WorkerProcess> {
  const child = spawn(process.execPath, [path.join(ROOT, 'bin', 'treadle.js'), 'worker'], {
    cwd,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`treadle worker was not ready within ${READY_TIMEOUT_MS / 1000} s:\n${log}`));
    }, READY_TIMEOUT_MS);
    const collect = (chunk: Buffer): void => {
      log += chunk.toString();
      if (log.includes(READY_LINE)) {
        clearTimeout(timer);
        resolve({ child, log: () => log });
      }
    };
    child.stdout!.on('data', collect);
    child.stderr!.on('data', collect);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`treadle worker exited (${signal ?? code}) before it was ready:\n${log}`));
    });
  });
}

/** SIGTERM, then waits for the exit. */
function stopWorker(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}

/** The one work item: a fan-out over the input's `elements`, each an `llm` call on the limited model. */
function capacityPipelineSpec(elements: number) {
  return {
    name: `bench-model-capacity-${elements}`,
    stages: [
      {
        name: STAGE,
        type: 'fan_out',
        with: {
          items: 'elements',
          stage: {
            run: 'llm',
            agent: 'anthropic',
            with: {
              model: MODEL,
              max_tokens: MAX_TOKENS,
              prompt: 'Summarize element {{ input }} in one line.',
              output_schema: { type: 'object', properties: { summary: { type: 'string' } }, required: ['summary'] },
            },
          },
          max_concurrent: MAX_CONCURRENT,
        },
      },
    ],
  };
}

/** The limits file every worker of the limiter side reads. */
function limitsFile(): string {
  return [
    'limits:',
    '  - provider: anthropic',
    `    model: ${MODEL}`,
    `    concurrency: ${CAPACITY_LIMITS.concurrency}`,
    `    tokens_per_minute: ${CAPACITY_LIMITS.tokensPerMinute}`,
    '',
  ].join('\n');
}

/** The environment of a user's shell: none of this process's own Treadle, Temporal or Anthropic settings. */
function cleanEnv(): NodeJS.ProcessEnv {
  const settings = /^(TREADLE_|TEMPORAL_|ANTHROPIC_|OTEL_|CLAUDE_)/;
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => !settings.test(name)));
}

/** The fake's span from the first request to the last reply, the first burst's admissions per second, the lag. */
function timelineFigures(
  stats: FakeStats,
): Pick<CapacitySide, 'spanMs' | 'burstCallsPerSecond' | 'admittedAtMs' | 'windowLagMs'> {
  const timeline: FakeTimelineEvent[] = stats.timeline;
  if (timeline.length >= TIMELINE_LIMIT)
    return { spanMs: null, burstCallsPerSecond: null, admittedAtMs: [], windowLagMs: null };
  const first = timeline.find((e) => e.event === 'admitted' || e.event === 'rate_limited');
  const last = [...timeline].reverse().find((e) => e.event === 'replied');
  const admitted = timeline.filter((e) => e.event === 'admitted').slice(BURST_SKIP, BURST_SKIP + BURST_CALLS);
  const burstMs = admitted.length === BURST_CALLS ? admitted.at(-1)!.atMs - admitted[0]!.atMs : 0;
  const origin = first?.atMs ?? 0;
  const admittedAtMs = timeline.filter((e) => e.event === 'admitted').map((e) => Math.round(e.atMs - origin));
  const perWindow = Math.floor(CAPACITY_LIMITS.tokensPerMinute / TOKENS_PER_REPLY);
  const lags = admittedAtMs.slice(perWindow).map((at, i) => at - admittedAtMs[i]! - WINDOW_MS);
  return {
    spanMs: first && last ? last.atMs - first.atMs : null,
    burstCallsPerSecond: burstMs > 0 ? round(((BURST_CALLS - 1) / burstMs) * 1000) : null,
    admittedAtMs,
    windowLagMs: lags.length > 0 ? { median: round(median(lags), 0), max: Math.max(...lags) } : null,
  };
}

/** Every run of a workflow, following continue-as-new from its first. */
async function allRuns(client: Client, workflowId: string) {
  const totals = { runs: 0, events: 0, byType: {} as Record<string, number> };
  let runId: string | undefined =
    (await client.workflow.getHandle(workflowId).describe()).raw.workflowExecutionInfo?.firstRunId ?? undefined;
  while (runId) {
    const { history, size } = await readHistory(client.workflow.getHandle(workflowId, runId) as WorkflowHandle);
    totals.runs++;
    totals.events += size.events;
    for (const [type, n] of Object.entries(eventCounts(history))) totals.byType[type] = (totals.byType[type] ?? 0) + n;
    runId = history.events?.at(-1)?.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId ?? undefined;
  }
  return totals;
}

/** The elements' activity attempts, retries and failures, from their histories. */
async function elementAttempts(client: Client, itemId: string, elements: number): Promise<CapacitySide['temporal']> {
  const counts = { attempts: 0, retried: 0, failed: 0, retryCauses: [] as string[] };
  await mapLimited(
    Array.from({ length: elements }, (_, i) => i),
    16,
    async (i) => {
      const history = await client.workflow.getHandle(`${itemId}.${STAGE}.1.${i}`).fetchHistory();
      for (const event of history.events ?? []) {
        const started = event.activityTaskStartedEventAttributes;
        if (started) {
          counts.attempts++;
          if ((started.attempt ?? 1) > 1) {
            counts.retried++;
            const failure = started.lastFailure;
            const cause = `${failure?.message ?? 'no failure recorded'}${failure?.timeoutFailureInfo ? ` (timeout ${String(failure.timeoutFailureInfo.timeoutType)})` : ''}`;
            if (counts.retryCauses.length < 5 && !counts.retryCauses.includes(cause)) counts.retryCauses.push(cause);
          }
        }
        if (event.activityTaskFailedEventAttributes || event.activityTaskTimedOutEventAttributes) counts.failed++;
      }
    },
  );
  return counts;
}

/** Runs one side: fresh fake, three fresh workers on their own queue, the item, then the counts. */
async function runSide(
  temporal: Client,
  address: string,
  dir: string,
  elements: number,
  limiter: boolean,
  tag: string,
  progress: (message: string) => void,
): Promise<CapacitySide> {
  const name = limiter ? 'limiter' : 'no-limiter';
  const home = path.join(dir, name);
  mkdirSync(home);
  const cleanups: (() => Promise<void> | void)[] = [];
  try {
    const fake: FakeAnthropic = await startFakeAnthropic({
      limits: {
        [MODEL]: { maxConcurrent: CAPACITY_LIMITS.concurrency, tokensPerMinute: CAPACITY_LIMITS.tokensPerMinute },
      },
      latencyMs: LATENCY_MS,
      tokensPerReply: TOKENS_PER_REPLY,
    });
    cleanups.push(() => fake.close());
    fake.setDefault({ kind: 'tool', input: { summary: 'One line.' } });
    const taskQueue = `${tag}-model-capacity-${name}`;
    const env: NodeJS.ProcessEnv = {
      ...cleanEnv(),
      TEMPORAL_ADDRESS: address,
      TREADLE_HOME: home,
      TREADLE_TASK_QUEUE: taskQueue,
      TREADLE_CALL_LOG: 'off',
      ANTHROPIC_API_KEY: API_KEY,
      ANTHROPIC_BASE_URL: fake.baseURL,
    };
    if (limiter) {
      const file = path.join(home, 'limits.yaml');
      writeFileSync(file, limitsFile());
      env.TREADLE_LIMITS = file;
    }
    progress(`${name}: starting ${WORKERS} treadle worker processes`);
    const workers = await Promise.all(Array.from({ length: WORKERS }, () => startWorker(env, home)));
    let stopping = false;
    let workerDied: (error: Error) => void = () => undefined;
    const died = new Promise<never>((_, reject) => (workerDied = reject));
    died.catch(() => undefined);
    for (const worker of workers) {
      worker.child.once('exit', (code, signal) => {
        if (!stopping) workerDied(new Error(`a treadle worker exited (${signal ?? code}):\n${worker.log()}`));
      });
    }
    cleanups.push(async () => {
      stopping = true;
      await Promise.all(workers.map((w) => stopWorker(w.child)));
    });
    fake.reset();
    fake.setDefault({ kind: 'tool', input: { summary: 'One line.' } });

    const client = new TreadleClient(temporal, { taskQueue, blobs: new FileBlobStore(path.join(home, 'blobs')) });
    const itemId = `${tag}-model-capacity-${name}`;
    progress(`${name}: ${elements} llm elements, ${MAX_CONCURRENT} at once`);
    const started = nowMs();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`${name}: not done within ${SIDE_TIMEOUT_MS / 60_000} min`)),
        SIDE_TIMEOUT_MS,
      );
    });
    // No request for longer than any retry-after (60 s) means the server or the workers are stuck.
    let stalled: (error: Error) => void = () => undefined;
    const stall = new Promise<never>((_, reject) => (stalled = reject));
    stall.catch(() => undefined);
    let lastRequests = -1;
    let quietTicks = 0;
    const ticker = setInterval(() => {
      const s = fake.stats();
      progress(`${name}: ${s.admitted} calls answered, ${s.rateLimited} 429s, ${fmt((nowMs() - started) / 1000)} s`);
      quietTicks = s.requests === lastRequests ? quietTicks + 1 : 0;
      lastRequests = s.requests;
      if (quietTicks >= STALL_TICKS)
        stalled(new Error(`${name}: no model call for ${STALL_TICKS} minutes: the server or the workers are stuck`));
    }, 60_000);
    try {
      await Promise.race([
        (async () => {
          await client.start(
            capacityPipelineSpec(elements),
            { elements: Array.from({ length: elements }, (_, i) => i) },
            { id: itemId },
          );
          const result = await client.result(itemId);
          if (result.status !== 'completed') throw new Error(`${name}: item ${result.status}: ${result.error ?? ''}`);
          const fanOut = (await client.readArtefact(result.artefacts[STAGE])) as FanOutArtefact | undefined;
          if (fanOut?.completed !== elements)
            throw new Error(
              `${name}: ${fanOut?.completed ?? 0} of ${elements} elements completed (${fanOut?.failed ?? '?'} failed)`,
            );
        })(),
        died,
        timeout,
        stall,
      ]);
    } finally {
      clearTimeout(timer);
      clearInterval(ticker);
    }
    const wallMs = round(nowMs() - started);
    const stats = fake.stats();
    const model = stats.models[MODEL];
    const tokens = model ? model.inputTokens + model.outputTokens : 0;
    const figures = timelineFigures(stats);
    const { spanMs } = figures;
    const limit = CAPACITY_LIMITS.tokensPerMinute;
    const temporalCounts = await elementAttempts(temporal, itemId, elements);
    let limiterHistory: CapacitySide['limiterHistory'] = null;
    if (limiter) {
      const runs = await allRuns(temporal, limiterWorkflowId('anthropic', MODEL, capacityKeyId(API_KEY)));
      limiterHistory = { ...runs, eventsPerCall: round(runs.events / Math.max(1, stats.requests)) };
    }
    const side: CapacitySide = {
      limiter,
      wallMs,
      spanMs,
      fake: {
        requests: stats.requests,
        admitted: stats.admitted,
        rateLimited: stats.rateLimited,
        violations: stats.violations,
        maxInFlight: stats.maxInFlight,
        maxWindowTokens: stats.maxWindowTokens,
        tokens,
      },
      utilisation: spanMs === null ? null : round(tokens / (limit * (spanMs / WINDOW_MS + 1)), 3),
      utilisationPerSpan: spanMs === null || spanMs === 0 ? null : round(tokens / ((limit * spanMs) / WINDOW_MS), 3),
      burstCallsPerSecond: figures.burstCallsPerSecond,
      admittedAtMs: figures.admittedAtMs,
      windowLagMs: figures.windowLagMs,
      temporal: temporalCounts,
      limiterHistory,
    };
    progress(
      `${name}: ${fmt(wallMs / 1000)} s, ${stats.rateLimited} 429s, max ${stats.maxInFlight} in flight, ` +
        `max ${stats.maxWindowTokens} tokens in a window, utilisation ${side.utilisation ?? '—'}, ` +
        `${temporalCounts.retried} retried / ${temporalCounts.failed} failed attempts` +
        (temporalCounts.retryCauses.length > 0 ? ` (retried after: ${temporalCounts.retryCauses.join(' | ')})` : ''),
    );
    return side;
  } finally {
    await runCleanups(cleanups, (m) => progress(`${name}: ${m}`));
  }
}

/** The budget of the scaled run (both sides, CI's quick mode runs it). */
export const SCALED_BUDGET_MS = 150_000;

/**
 * The scenario's goals: the limiter side within both limits with no 429 and no attempt retried or failed, its
 * utilisation at the issue's size, and the scaled run's time.
 */
export function modelCapacityGoals(r: ModelCapacityResult) {
  const side = r.limiter;
  const label = `model capacity, ${r.elements} elements${r.scaled ? ' (scaled)' : ''}, limiter`;
  const checks = r.limiterMisses.filter((m) => !m.startsWith('utilisation'));
  return [
    {
      goal: `${label}: over a limit, 429s, attempts retried or failed (fake's and Temporal's counts)`,
      measured: checks.length,
      target: '0',
      met: checks.length === 0,
      ...(checks.length > 0 ? { uncertainty: checks.join('; ') } : {}),
    },
    {
      goal: `${label}: utilisation of tokens/min, first call → last reply${r.scaled ? ' (goal at 1,000 only)' : ''}`,
      measured: side.utilisation,
      target: r.scaled ? `reported; best ${r.bestUtilisation}` : `≥ ${UTILISATION_GOAL}; best ${r.bestUtilisation}`,
      met: r.scaled || (side.utilisation ?? 0) >= UTILISATION_GOAL,
    },
    ...(r.scaled
      ? [
          {
            goal: 'model capacity scenario wall time, both sides (ms)',
            measured: r.scenarioMs,
            target: `< ${SCALED_BUDGET_MS}`,
            met: r.scenarioMs < SCALED_BUDGET_MS,
          },
        ]
      : []),
  ];
}

/** What the limiter side missed of the issue's checks (empty: every one held). */
export function limiterMisses(side: CapacitySide, scaled: boolean): string[] {
  const misses: string[] = [];
  if (side.fake.maxInFlight > CAPACITY_LIMITS.concurrency)
    misses.push(`${side.fake.maxInFlight} calls in flight (limit ${CAPACITY_LIMITS.concurrency})`);
  if (side.fake.maxWindowTokens > CAPACITY_LIMITS.tokensPerMinute)
    misses.push(`${side.fake.maxWindowTokens} tokens in a window (limit ${CAPACITY_LIMITS.tokensPerMinute})`);
  if (side.fake.rateLimited > 0) misses.push(`${side.fake.rateLimited} 429s`);
  if (side.temporal.retried > 0 || side.temporal.failed > 0)
    misses.push(
      `${side.temporal.retried} attempts retried, ${side.temporal.failed} failed (${side.temporal.retryCauses.join(' | ')})`,
    );
  if (!scaled && (side.utilisation ?? 0) < UTILISATION_GOAL)
    misses.push(`utilisation ${side.utilisation ?? '—'} (goal ≥ ${UTILISATION_GOAL})`);
  return misses;
}

/**
 * The best utilisation `elements` calls of {@link TOKENS_PER_REPLY} allow: a window holds a whole number of
 * calls, so the last call starts `floor((n - 1) / perWindow)` windows after the first.
 */
function bestUtilisation(elements: number): number {
  const perWindow = Math.floor(CAPACITY_LIMITS.tokensPerMinute / TOKENS_PER_REPLY);
  const windows = Math.floor((elements - 1) / perWindow) + 1;
  return round((elements * TOKENS_PER_REPLY) / (CAPACITY_LIMITS.tokensPerMinute * windows), 3);
}

/** Runs both sides on a dev server of the scenario's own. */
export async function modelCapacity(
  ctx: Pick<ScenarioContext, 'sizes' | 'tag' | 'progress'>,
): Promise<ScenarioResult<ModelCapacityResult>> {
  if (!existsSync(path.join(ROOT, 'lib', 'workflow-bundle', 'manifest.json')))
    throw new Error('model capacity runs `treadle worker` from lib/; run "npm run build" first');
  const elements = ctx.sizes.mode === 'full' ? FULL_ELEMENTS : SCALED_ELEMENTS;
  const scaled = elements < FULL_ELEMENTS;
  const progress = (message: string): void => ctx.progress(`model capacity: ${message}`);
  progress(
    `${elements} elements${scaled ? ` (scaled from ${FULL_ELEMENTS} for --${ctx.sizes.mode})` : ''}, ` +
      `${WORKERS} workers, limits ${CAPACITY_LIMITS.concurrency} in flight and ${CAPACITY_LIMITS.tokensPerMinute} tokens/min`,
  );
  const scenarioStarted = nowMs();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'treadle-bench-capacity-'));
  const cleanups: (() => Promise<void> | void)[] = [() => rmSync(dir, { recursive: true, force: true })];
  try {
    const server = await serverOfItsOwn(dir, progress);
    cleanups.push(() => server.stop());
    const connection = await Connection.connect({ address: server.address });
    cleanups.push(() => connection.close());
    const temporal = new Client({ connection, namespace: server.namespace });
    const side = (limiter: boolean): Promise<CapacitySide> =>
      runSide(temporal, server.address, dir, elements, limiter, ctx.tag, progress);
    // Scaled, the sides run at once to fit CI's budget (each mostly waits on its fake's token window); at the
    // issue's size one after the other, so neither's bursts take the other's CPU.
    const [limiter, noLimiter] = scaled
      ? await Promise.all([side(true), side(false)])
      : [await side(true), await side(false)];
    const result: ModelCapacityResult = {
      elements,
      scaled,
      workers: WORKERS,
      maxConcurrent: MAX_CONCURRENT,
      limits: CAPACITY_LIMITS,
      latencyMs: LATENCY_MS,
      tokensPerReply: TOKENS_PER_REPLY,
      bestUtilisation: bestUtilisation(elements),
      limiter,
      noLimiter,
      scenarioMs: round(nowMs() - scenarioStarted, 0),
      limiterMisses: limiterMisses(limiter, scaled),
    };
    if (result.limiterMisses.length > 0) progress(`LIMITER MISSED: ${result.limiterMisses.join('; ')}`);
    return { result, rows: rowsOf(result) };
  } finally {
    await runCleanups(cleanups, (m) => progress(m));
  }
}

/** The table's rows: the limiter side in the Treadle column, no limiter in the baseline's. */
function rowsOf(r: ModelCapacityResult): Row[] {
  const scenario = `model capacity (${r.elements} llm elements${r.scaled ? ', SCALED, sides at once' : ''}, ${r.workers} workers, ${r.limits.concurrency} in flight / ${r.limits.tokensPerMinute / 1000}k tokens/min; T: limiter, B: none)`;
  const row = (metric: string, of: (side: CapacitySide) => string): Row => ({
    scenario,
    metric,
    treadle: of(r.limiter),
    baseline: of(r.noLimiter),
    ratio: '',
  });
  const pct = (x: number | null): string => (x === null ? '—' : `${(x * 100).toFixed(1)} %`);
  return [
    row('wall time (client start → result)', (s) => fmt(s.wallMs / 1000, ' s')),
    row(
      'fake: max in flight / max tokens in a 60-s window',
      (s) => `${s.fake.maxInFlight} / ${s.fake.maxWindowTokens}`,
    ),
    row(
      'fake: 429s (concurrency / tokens violations)',
      (s) => `${s.fake.rateLimited} (${s.fake.violations.concurrency} / ${s.fake.violations.tokens})`,
    ),
    row('Temporal: attempts retried / failed', (s) => `${s.temporal.retried} / ${s.temporal.failed}`),
    row(
      `utilisation of tokens/min over first call → last reply (best for this size ${pct(r.bestUtilisation)})`,
      (s) => `${pct(s.utilisation)} (per span alone ${pct(s.utilisationPerSpan)})`,
    ),
    row('first burst: calls admitted per second', (s) => fmt(s.burstCallsPerSecond)),
    row('a call a window later than the one 120 calls before: lag median / max', (s) =>
      s.windowLagMs ? `${fmt(s.windowLagMs.median / 1000, ' s')} / ${fmt(s.windowLagMs.max / 1000, ' s')}` : '—',
    ),
    row('limiter history: events per call', (s) => (s.limiterHistory ? fmt(s.limiterHistory.eventsPerCall) : '—')),
  ];
}
