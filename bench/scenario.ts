/**
 * What every scenario shares: its inputs (the two sides, sizes, a run tag for unique ids), the rows it adds
 * to the printed table, and small helpers for running many items with bounded concurrency.
 */
import type { WorkflowHandle } from '@temporalio/client';
import type { TreadleClient } from '../src/client';
import type { WorkerWarning } from './environment';
import type { Side } from './sides';
import { readHistory, type History, type HistorySize, type TransitionParts } from './history';
import { median, round } from './statistics';

/** The sizes of one run mode. */
export interface Sizes {
  mode: 'quick' | 'medium' | 'full';
  throughputItems: number;
  /** Rounds of the throughput scenario; rounds alternate which side goes first. */
  throughputRounds: number;
  stages: number;
  latencyItems: number;
  retryItems: number;
  reviewItems: number;
  fanOutWidths: number[];
  fanOutRuns: number;
  artefactBytes: number[];
  artefactRuns: number;
  waitingItems: number;
  /** Server settings: items at once on each of the three dev servers, and rounds of them (0: not run). */
  serverItemsAtOnce: number;
  serverRounds: number;
  /** Whether the throughput scenario runs again with each worker in its own process (its own server too). */
  separateProcesses: boolean;
  /**
   * Whether the spawn-heavy start scenarios run: `treadle worker` to its ready line, and the CLI's commands
   * against the server beside bare-client scripts (about a minute together); `--only=<scenario>` runs them in any mode.
   */
  processStarts: boolean;
  /** Children of the wide TDD tree. */
  tddWidth: number;
  /** Sizes of the fan-out stage over elements (one child workflow each), and how many run at once. */
  fanOutItems: number[];
  fanOutConcurrency: number;
  /** Iterations of the loop-stage scenario (continue-as-new every 100 on both sides). */
  loopIterations: number;
  /** Items per side of the server-work scenario (persistence operations counted from the server's metrics; 0: not run). */
  serverWorkItems: number;
  /** Pending decisions of the review inbox scenario (0: not run). */
  inboxDecisions: number;
  /** Its workers' workflow cache; absent: Treadle's `TREADLE_WORKFLOW_CACHE` (default 1,000). */
  inboxWorkflowCache?: number;
  /** SDK decisions whose row is watched leaving the inbox's API. */
  inboxFreshnessSamples: number;
}

/** Sizes of each mode; `quick` must finish in under two minutes on a 2-core machine. */
export const SIZES: Record<Sizes['mode'], Sizes> = {
  quick: {
    mode: 'quick',
    throughputItems: 30,
    throughputRounds: 2,
    stages: 10,
    latencyItems: 8,
    retryItems: 5,
    reviewItems: 10,
    fanOutWidths: [50, 200],
    fanOutRuns: 1,
    artefactBytes: [1_000, 1_000_000, 10_000_000],
    artefactRuns: 1,
    waitingItems: 100,
    // Three more servers would not fit CI's budget; `--medium` and the full run measure them.
    serverItemsAtOnce: 60,
    serverRounds: 0,
    separateProcesses: false,
    // Worker and server-command starts (about a minute) would break the quick budget: `--only` measures them.
    processStarts: false,
    // A parent with 4 children took 26 s of a 125 s quick run on 2026-11-25's slow VM; 2 show the same shape
    // in about half the time (medium and full run 10 and 20).
    tddWidth: 2,
    fanOutItems: [100],
    fanOutConcurrency: 50,
    // About 100 ms an iteration on each side on a 2-core machine: 40 (about 8 s for both sides) keeps the quick
    // run well inside its two minutes; medium and full run 500 (and continue as new).
    loopIterations: 40,
    // About 10 s; CI's quick run has no room for it.
    serverWorkItems: 0,
    // Enough to run every step; a cache of 100 so the batch has evicted (replayed) items to decide, as at 10,000.
    inboxDecisions: 300,
    inboxWorkflowCache: 100,
    inboxFreshnessSamples: 5,
  },
  medium: {
    mode: 'medium',
    throughputItems: 60,
    throughputRounds: 6,
    stages: 10,
    latencyItems: 20,
    retryItems: 10,
    reviewItems: 25,
    fanOutWidths: [50, 200],
    fanOutRuns: 2,
    artefactBytes: [1_000, 1_000_000, 10_000_000],
    artefactRuns: 2,
    waitingItems: 500,
    serverItemsAtOnce: 60,
    serverRounds: 1,
    separateProcesses: true,
    processStarts: true,
    tddWidth: 10,
    fanOutItems: [1_000],
    fanOutConcurrency: 50,
    loopIterations: 500,
    serverWorkItems: 40,
    inboxDecisions: 2_000,
    inboxFreshnessSamples: 10,
  },
  full: {
    mode: 'full',
    // Ten rounds a side of 100 items (four of 200 until 2026-11-26): 100 at once still keep both cores busy,
    // and one slow round (the dev server's own CPU per item swings between rounds) weighs a tenth of the run.
    throughputItems: 100,
    throughputRounds: 10,
    stages: 10,
    latencyItems: 40,
    retryItems: 20,
    reviewItems: 50,
    fanOutWidths: [50, 200],
    fanOutRuns: 3,
    artefactBytes: [1_000, 1_000_000, 10_000_000],
    artefactRuns: 3,
    waitingItems: 1000,
    serverItemsAtOnce: 60,
    serverRounds: 2,
    separateProcesses: true,
    processStarts: true,
    tddWidth: 20,
    // 10,000: a Treadle fan-out continues as new; the baseline's one parent holds ~7.5 MB of history. Above
    // 10,000 only Treadle runs (BASELINE_MAX_ITEMS).
    fanOutItems: [1_000, 10_000],
    fanOutConcurrency: 50,
    loopIterations: 500,
    serverWorkItems: 40,
    // Issue 27's scale: 10,000 decisions pending, the worker's default cache of 1,000.
    inboxDecisions: 10_000,
    inboxFreshnessSamples: 10,
  },
};

/** One row of the summary table: a metric for Treadle and the baseline, and their ratio. */
export interface Row {
  scenario: string;
  metric: string;
  treadle: string;
  baseline: string;
  ratio: string;
}

/** What a scenario is given. */
export interface ScenarioContext {
  sizes: Sizes;
  treadle: Side;
  baseline: Side;
  /** The Treadle client behind the `treadle` side, for Treadle-only calls (listing reviews). */
  treadleClient: TreadleClient;
  /** The server's processes, for CPU accounting. */
  serverPids?: () => number[];
  /** The dev server's Prometheus metrics, for counting its persistence operations. */
  serverMetricsUrl?: string;
  /** SDK warnings logged so far (the native side's too), oldest first. */
  warnings: readonly WorkerWarning[];
  /** Unique per run, so workflow ids never collide. */
  tag: string;
  progress(message: string): void;
}

/** A scenario's JSON result and its table rows. */
export interface ScenarioResult<T> {
  result: T;
  rows: Row[];
}

/** Runs `fn` over `items`, at most `limit` at a time, keeping the results in order. */
export async function mapLimited<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!, i);
    }
  });
  await Promise.all(lanes);
  return out;
}

/** A median and the samples it came from (ms). */
export interface Timed {
  medianMs: number;
  samplesMs: number[];
}

/**
 * Times each probe once a round, taking turns at going first (a fixed order favours whoever runs second). A
 * probe that returns a number measured itself (the inbox's first screen leaves out making its browser context).
 */
export async function takeTurns<K extends string>(
  rounds: number,
  probes: Record<K, () => Promise<number | void>>,
): Promise<Record<K, Timed>> {
  const names = Object.keys(probes) as K[];
  const samples = Object.fromEntries(names.map((n) => [n, [] as number[]])) as Record<K, number[]>;
  for (let r = 0; r < rounds; r++) {
    for (let turn = 0; turn < names.length; turn++) {
      const name = names[(r + turn) % names.length]!;
      const started = nowMs();
      const measured = await probes[name]();
      samples[name].push(round(typeof measured === 'number' ? measured : nowMs() - started));
    }
  }
  return Object.fromEntries(
    names.map((n) => [n, { medianMs: round(median(samples[n])), samplesMs: samples[n] }]),
  ) as Record<K, Timed>;
}

/** Fetches histories and sizes of many executions (not timed: only read after the measured work). */
export function readHistories(handles: WorkflowHandle[]): Promise<{ history: History; size: HistorySize }[]> {
  return mapLimited(handles, 16, (h) => readHistory(h));
}

/** Both sides, in the order round `n` runs them: alternating, so neither always goes first. */
export function sidesInOrder(ctx: ScenarioContext, n: number): Side[] {
  return n % 2 === 0 ? [ctx.baseline, ctx.treadle] : [ctx.treadle, ctx.baseline];
}

/** Formats a number for the table. */
export function fmt(value: number | null | undefined, unit = ''): string {
  if (value === null || value === undefined || Number.isNaN(value)) return '—';
  const text = Math.abs(value) >= 100 ? value.toFixed(0) : Math.abs(value) >= 10 ? value.toFixed(1) : value.toFixed(2);
  return `${text}${unit}`;
}

/** Formats a ratio for the table (`×`). */
export function fmtRatio(value: number | null): string {
  if (value === null) return '—';
  return `${value !== 0 && Math.abs(value) < 0.1 ? value.toPrecision(2) : value.toFixed(2)}×`;
}

/** Milliseconds since an arbitrary origin, for wall-clock durations. */
export function nowMs(): number {
  return performance.now();
}

/** The three main parts of a transition (workflow task queue wait / workflow task / activity queue wait). */
export function partsText(p: TransitionParts): string {
  return `${fmt(p.wftQueue)} / ${fmt(p.wftRun)} / ${fmt(p.activityQueue)} ms`;
}

/**
 * Runs a scenario's cleanups, the last registered first; one that fails is reported through `say` (as "cleanup
 * failed: …") and the rest still run.
 */
export async function runCleanups(
  cleanups: readonly (() => Promise<unknown> | unknown)[],
  say: (message: string) => unknown,
): Promise<void> {
  for (const cleanup of [...cleanups].reverse()) {
    try {
      await cleanup();
    } catch (error) {
      say(`cleanup failed: ${(error as Error).message}`);
    }
  }
}
