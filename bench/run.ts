/**
 * `npm run bench` / `npm run bench:quick`: runs every scenario on Treadle and on the raw-Temporal baseline
 * against one dev server in this process, prints a table, and writes `bench/results/<mode>.json`.
 *
 * Flags: `--quick` (CI size, under two minutes plus the model-capacity scenario's own budget), `--medium`, default
 * full; `--only=fan-out-items` (or `worker-start`, `cli-start`, `inbox`, `model-capacity`) runs that one scenario at
 * the mode's sizes (after the warm-up; the inbox and model capacity without it, each on a server of its own) and
 * writes `bench/results/<mode>-<scenario>.json`. See BENCHMARKS.md.
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  bundleWorkflows,
  describeHost,
  startEnvironment,
  type BenchEnvironment,
  type EnvironmentRecord,
  type HostRecord,
} from './environment';
import { SIZES, mapLimited, type Row, type ScenarioContext, type Sizes } from './scenario';
import { baselineSide, treadleSide } from './sides';
import { CLI_SERVER_GOAL_RATIO, CLI_START_GOAL_MS, cliStart, type CliStartResult } from './scenarios/cli-start';
import { WORKER_START_GOAL_MS, workerStart, type WorkerStartResult } from './scenarios/worker-start';
import { fanOut, type FanOutWidthResult } from './scenarios/fan-out';
import { fanOutItems, type FanOutItemsResult } from './scenarios/fan-out-items';
import { loopIterations, type LoopIterationsResult } from './scenarios/loop-iterations';
import {
  HISTORY_BYTES_PER_ATTEMPT_GOAL,
  largeArtefacts,
  sizeLabel,
  type ArtefactSizeResult,
} from './scenarios/large-artefacts';
import { latency, type LatencyResult } from './scenarios/latency';
import { retryLoop, type RetryLoopResult } from './scenarios/retry-loop';
import { reviewRoundTrip, type ReviewRoundTripResult } from './scenarios/review-round-trip';
import { separateProcesses, type SeparateProcessesResult } from './scenarios/separate-processes';
import { serverSettings, type ServerSettingsResult } from './scenarios/server-settings';
import { roundRatioMeanText, throughput, type ThroughputResult } from './scenarios/throughput';
import { serverWork, type ServerWorkResult } from './scenarios/server-work';
import { LISTING_GOAL_MS, waitingItems, type WaitingItemsResult } from './scenarios/waiting-items';
import { tddTree, type TddTreeResult } from './scenarios/tdd-tree';
import { inbox, inboxGoals, type InboxResult } from './scenarios/inbox';
import { modelCapacity, modelCapacityGoals, type ModelCapacityResult } from './scenarios/model-capacity';
import { round } from './statistics';
import { parseServerKind, type ServerKind } from './bench-server';
import { servers, serversGoals } from './scenarios/servers';

/** Goals from the issue. */
const THROUGHPUT_RATIO_GOAL = 0.9;
const LATENCY_P50_RATIO_GOAL = 1.2;
const QUICK_MODE_BUDGET_MS = 120_000;
/** Items per side run before measuring, so JIT, bundles and connections are warm on both sides. */
const WARM_UP_ITEMS = 20;

/** Where results go: `bench/results` in the repository (this file runs from `.bench-build/bench`). */
const RESULTS_DIR = path.resolve(__dirname, '..', '..', 'bench', 'results');

/** A goal and whether this run met it. */
export interface Goal {
  goal: string;
  measured: number | null;
  target: string;
  met: boolean;
  /** How uncertain the measurement is, where the scenario can tell (printed after the target). */
  uncertainty?: string;
}

/** The results file. */
export interface BenchResults {
  mode: Sizes['mode'];
  sizes: Sizes;
  startedAt: string;
  durationMs: number;
  environment: EnvironmentRecord;
  /** 1/5/15-minute load averages when the run ended. */
  loadAverageAtEnd: number[];
  scenarios: {
    throughput: ThroughputResult;
    /** Null in quick mode (CI's budget). */
    serverWork: ServerWorkResult | null;
    latency: LatencyResult;
    retryLoop: RetryLoopResult;
    reviewRoundTrip: ReviewRoundTripResult;
    fanOut: FanOutWidthResult[];
    fanOutItems: FanOutItemsResult;
    loopIterations: LoopIterationsResult;
    largeArtefacts: ArtefactSizeResult[];
    waitingItems: WaitingItemsResult;
    tddTree: TddTreeResult;
    cliStart: CliStartResult;
    /** Null unless the mode's sizes (or `--only=worker-start`) ask for the start scenarios. */
    workerStart: WorkerStartResult | null;
    /** Null in quick mode (three more servers would not fit CI's budget). */
    serverSettings: ServerSettingsResult | null;
    /** Throughput with each worker in its own process, on a server of its own; null in quick mode (CI's budget). */
    separateProcesses: SeparateProcessesResult | null;
    /** The review inbox at the mode's size, on a server of its own; null when the sizes say 0. */
    inbox: InboxResult | null;
    /** Three `treadle worker` processes against a rate-limited fake provider, with and without a limits file. */
    modelCapacity: ModelCapacityResult;
  };
  goals: Goal[];
  table: Row[];
}

/**
 * Scenarios `--only=<name>` runs by themselves: the long ones worth measuring alone. The inbox needs no environment
 * (a server of its own and the two bundles); the others run in it, after the warm-up.
 */
const ALONE = {
  'fan-out-items': fanOutItems,
  'worker-start': workerStart,
  'cli-start': cliStart,
  inbox,
  'model-capacity': modelCapacity,
} as const;

/** What `--only=<scenario>` writes. */
interface AloneResults {
  mode: Sizes['mode'];
  only: Only;
  sizes: Sizes;
  startedAt: string;
  durationMs: number;
  /** Where it ran: the inbox starts no environment, so its record is the host's alone. */
  environment: EnvironmentRecord | HostRecord;
  loadAverageAtEnd: number[];
  table: Row[];
  goals: Goal[];
  result: unknown;
}

/** `--only=<name>`, when given. */
/** A scenario run alone: one of {@link ALONE}, or `servers` (the same work on both kinds of server). */
type Only = keyof typeof ALONE | 'servers';

function parseOnly(argv: string[]): Only | undefined {
  const only = argv.find((a) => a.startsWith('--only='))?.slice('--only='.length);
  if (only === undefined) return undefined;
  if (!(only in ALONE) && only !== 'servers')
    throw new Error(`--only=${only}: no such scenario; use one of ${[...Object.keys(ALONE), 'servers'].join(', ')}`);
  return only as Only;
}

function parseMode(argv: string[]): Sizes['mode'] {
  const known = ['--quick', '--medium', '--full'];
  const unknown = argv.filter((a) => !known.includes(a) && !a.startsWith('--only=') && !a.startsWith('--server='));
  if (unknown.length > 0)
    throw new Error(
      `unknown argument(s) ${unknown.join(' ')}; use --quick, --medium, --full, --only=<scenario> or --server=dev|postgres`,
    );
  if (argv.includes('--quick')) return 'quick';
  if (argv.includes('--medium')) return 'medium';
  return 'full';
}

function progress(message: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

/** The scenarios' view of an environment. */
function contextOf(env: BenchEnvironment, sizes: Sizes): ScenarioContext {
  return {
    sizes,
    treadle: treadleSide(env.treadle),
    baseline: baselineSide(env.temporal, env.baselineQueue, env.temporalWithoutRetries),
    treadleClient: env.treadle,
    serverPids: env.server.pids,
    ...(env.serverMetricsUrl !== undefined ? { serverMetricsUrl: env.serverMetricsUrl } : {}),
    warnings: env.warnings,
    tag: randomUUID().slice(0, 8),
    progress,
  };
}

async function warmUp(ctx: ScenarioContext): Promise<void> {
  progress(`warming up both sides (${WARM_UP_ITEMS} items each)`);
  for (const side of [ctx.baseline, ctx.treadle]) {
    await mapLimited(
      Array.from({ length: WARM_UP_ITEMS }, (_, i) => i),
      WARM_UP_ITEMS,
      async (i) => {
        const id = `${ctx.tag}-warmup-${side.name}-${i}`;
        await side.startLinear(id, ctx.sizes.stages);
        await side.result(id);
      },
    );
    const id = `${ctx.tag}-warmup-review-${side.name}`;
    await side.startReview(id);
    await side.untilWaiting(id);
    await side.approve(id);
    await side.result(id);
  }
}

function evaluateGoals(mode: Sizes['mode'], durationMs: number, s: BenchResults['scenarios']): Goal[] {
  // The model-capacity scenario waits on a per-minute limit by design: it has a budget of its own.
  const restMs = durationMs - s.modelCapacity.scenarioMs;
  const goals: Goal[] = [
    {
      goal: 'throughput: Treadle items/s ÷ baseline items/s',
      measured: s.throughput.throughputRatio,
      target: `≥ ${THROUGHPUT_RATIO_GOAL}`,
      met: (s.throughput.throughputRatio ?? 0) >= THROUGHPUT_RATIO_GOAL,
      uncertainty: roundRatioMeanText(s.throughput),
    },
    ...(s.separateProcesses
      ? [
          {
            goal: 'throughput, each worker in its own process: Treadle items/s ÷ baseline items/s',
            measured: s.separateProcesses.throughputRatio,
            target: `≥ ${THROUGHPUT_RATIO_GOAL}`,
            met: (s.separateProcesses.throughputRatio ?? 0) >= THROUGHPUT_RATIO_GOAL,
            uncertainty: roundRatioMeanText(s.separateProcesses),
          },
        ]
      : []),
    {
      goal: 'per-stage scheduling latency p50: Treadle ÷ baseline (sequential items)',
      measured: s.latency.p50Ratio,
      target: `≤ ${LATENCY_P50_RATIO_GOAL}`,
      met: s.latency.p50Ratio !== null && s.latency.p50Ratio <= LATENCY_P50_RATIO_GOAL,
    },
    {
      goal: 'per-stage scheduling latency p50 under throughput load: Treadle ÷ baseline',
      measured: s.throughput.latencyUnderLoadP50Ratio,
      target: `≤ ${LATENCY_P50_RATIO_GOAL}`,
      met:
        s.throughput.latencyUnderLoadP50Ratio !== null &&
        s.throughput.latencyUnderLoadP50Ratio <= LATENCY_P50_RATIO_GOAL,
    },
    ...s.largeArtefacts.map((a) => ({
      goal: `payloads of ${sizeLabel(a.bytes)} (input and artefact): Treadle history bytes per attempt`,
      measured: a.treadle.historyBytesPerAttempt,
      target: `< ${HISTORY_BYTES_PER_ATTEMPT_GOAL}`,
      met: a.treadleUnderGoal,
    })),
    {
      goal: `listPendingReviews() with ${s.waitingItems.items} items waiting (ms)`,
      measured: s.waitingItems.listing.steadyCallMs,
      target: `< ${LISTING_GOAL_MS}`,
      met: s.waitingItems.listing.steadyCallMs < LISTING_GOAL_MS,
    },
    ...s.cliStart.commands.map((c) => ({
      goal: `CLI start: ${c.command}, median ms`,
      measured: c.startMs.p50,
      target: `< ${CLI_START_GOAL_MS}`,
      met: c.underGoal,
    })),
    ...s.cliStart.serverCommands.map((c) => ({
      goal: `CLI start: ${c.command} ÷ bare @temporalio/client script, medians`,
      measured: c.ratioToBare ?? Number.NaN,
      target: `≤ ${CLI_SERVER_GOAL_RATIO}`,
      met: c.underGoal,
    })),
    ...(s.workerStart
      ? [
          {
            goal: 'treadle worker: spawn → ready line, prebuilt bundle, median ms',
            measured: s.workerStart.prebuiltMs.p50,
            target: `< ${WORKER_START_GOAL_MS}`,
            met: s.workerStart.underGoal,
          },
        ]
      : []),
    ...(s.inbox ? inboxGoals(s.inbox, mode) : []),
    ...modelCapacityGoals(s.modelCapacity),
  ];
  if (mode === 'quick')
    goals.push({
      goal: 'quick mode wall time, model capacity aside (ms)',
      measured: round(restMs, 0),
      target: `< ${QUICK_MODE_BUDGET_MS}`,
      met: restMs < QUICK_MODE_BUDGET_MS,
    });
  return goals;
}

function printTable(rows: Row[], goals: Goal[]): void {
  const header: Row = {
    scenario: 'scenario',
    metric: 'metric',
    treadle: 'treadle',
    baseline: 'baseline',
    ratio: 'T/B',
  };
  const keys = ['scenario', 'metric', 'treadle', 'baseline', 'ratio'] as const;
  const widths = keys.map((k) => Math.max(...[header, ...rows].map((r) => r[k].length)));
  const line = (r: Row) => `| ${keys.map((k, i) => r[k].padEnd(widths[i]!)).join(' | ')} |`;
  const out = [line(header), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map(line), '', 'goals:'];
  for (const g of goals)
    out.push(
      `  ${g.met ? 'met   ' : 'MISSED'} ${g.goal}: ${g.measured ?? '—'} (target ${g.target}${g.uncertainty ? `; ${g.uncertainty}` : ''})`,
    );
  process.stdout.write(`${out.join('\n')}\n`);
}

/**
 * Prints a scenario run alone and writes `bench/results/<mode>-<scenario><suffix>.json`; `suffix` names other
 * fan-out sizes, so such a run never overwrites the mode's committed figures.
 */
function writeAlone(alone: Omit<AloneResults, 'loadAverageAtEnd'>, suffix: string): void {
  const results: AloneResults = {
    mode: alone.mode,
    only: alone.only,
    sizes: alone.sizes,
    startedAt: alone.startedAt,
    durationMs: round(alone.durationMs, 0),
    environment: alone.environment,
    loadAverageAtEnd: os.loadavg().map((l) => round(l)),
    table: alone.table,
    goals: alone.goals,
    result: alone.result,
  };
  printTable(results.table, results.goals);
  mkdirSync(RESULTS_DIR, { recursive: true });
  const file = path.join(RESULTS_DIR, `${results.mode}-${results.only}${suffix}.json`);
  writeFileSync(file, `${JSON.stringify(results, null, 2)}\n`);
  progress(`wrote ${file} (${(alone.durationMs / 1000).toFixed(1)} s)`);
}

function writeResults(results: BenchResults, suffix: string): string {
  mkdirSync(RESULTS_DIR, { recursive: true });
  const file = path.join(RESULTS_DIR, `${results.mode}${suffix}.json`);
  const temp = `${file}.${randomUUID().slice(0, 8)}.tmp`;
  writeFileSync(temp, `${JSON.stringify(results, null, 2)}\n`);
  renameSync(temp, file);
  return file;
}

/**
 * The command line and `TREADLE_BENCH_FAN_OUT_ITEMS` (the fan-out-over-items scenario at other sizes: `1000` or
 * `1000,10000`): the mode, its sizes, `--only`, and the suffix that keeps such a run's file apart from the mode's.
 */
function parseRun(argv: string[]): {
  mode: Sizes['mode'];
  only: Only | undefined;
  server: ServerKind;
  sizes: Sizes;
  suffix: string;
} {
  const mode = parseMode(argv);
  const only = parseOnly(argv);
  const items = (process.env.TREADLE_BENCH_FAN_OUT_ITEMS ?? '')
    .split(',')
    .filter((s) => s.trim() !== '')
    .map(Number);
  const resized = items.length > 0 && items.every((n) => Number.isInteger(n) && n > 0);
  const server = parseServerKind(argv);
  return {
    mode,
    only,
    server,
    // A run on the PostgreSQL-backed server writes files of its own, beside the dev server's.
    suffix: `${resized ? `-${items.join('-')}` : ''}${server === 'dev' ? '' : `-${server}`}`,
    sizes: resized ? { ...SIZES[mode], fanOutItems: items } : SIZES[mode],
  };
}

async function main(): Promise<void> {
  const { mode, only, server, sizes, suffix } = parseRun(process.argv.slice(2));
  const startedAt = new Date().toISOString();
  const started = performance.now();
  progress(`mode ${mode}`);
  let env: BenchEnvironment | undefined;
  const interrupt = (): void => {
    progress('interrupted; shutting down');
    void (env?.shutdown() ?? Promise.resolve()).finally(() => process.exit(130));
  };
  process.once('SIGINT', interrupt);
  process.once('SIGTERM', interrupt);
  try {
    if (only === 'model-capacity') {
      // A server and workers of its own: the main environment would only cost time.
      const environment = describeHost();
      const { result, rows } = await modelCapacity({ sizes, tag: randomUUID().slice(0, 8), progress });
      const durationMs = performance.now() - started;
      const goals = modelCapacityGoals(result);
      writeAlone({ mode, only, sizes, startedAt, durationMs, environment, table: rows, goals, result }, suffix);
      return;
    }
    if (only === 'inbox') {
      // A server of its own and both bundles are all it needs: the main environment would only cost time.
      const environment = describeHost();
      progress("bundling both sides' workflows...");
      const { result, rows } = await inbox(
        { sizes, tag: randomUUID().slice(0, 8), progress },
        await bundleWorkflows(),
        server,
      );
      const durationMs = performance.now() - started;
      const goals = inboxGoals(result, mode);
      writeAlone({ mode, only, sizes, startedAt, durationMs, environment, table: rows, goals, result }, suffix);
      return;
    }
    // Opens a warmed-up environment on a server of `kind` (the one the run uses, `env`, is shut down on interrupts).
    const open = async (kind: ServerKind) => {
      env = await startEnvironment(
        progress,
        (error) => {
          progress(`a worker failed: ${(error as Error).stack ?? String(error)}`);
          void (env?.shutdown() ?? Promise.resolve()).finally(() => process.exit(1));
        },
        kind,
      );
      const ctx = contextOf(env, sizes);
      await warmUp(ctx);
      return { env, ctx };
    };
    if (only === 'servers') {
      const tag = randomUUID().slice(0, 8);
      const { result, rows } = await servers({ sizes, tag, progress }, open, await bundleWorkflows());
      env = undefined;
      const durationMs = performance.now() - started;
      const environment = describeHost();
      const goals = serversGoals(result);
      writeAlone({ mode, only, sizes, startedAt, durationMs, environment, table: rows, goals, result }, suffix);
      return;
    }
    const { ctx } = await open(server);
    const record = env!.record;
    const rows: Row[] = [];
    const run = async <T>(scenario: (c: ScenarioContext) => Promise<{ result: T; rows: Row[] }>): Promise<T> => {
      const { result, rows: scenarioRows } = await scenario(ctx);
      rows.push(...scenarioRows);
      return result;
    };
    if (only !== undefined) {
      // Alone, a start scenario runs whatever the mode's sizes say.
      const result = await run<unknown>((c) => ALONE[only]({ ...c, sizes: { ...c.sizes, processStarts: true } }));
      const durationMs = performance.now() - started;
      writeAlone(
        { mode, only, sizes, startedAt, durationMs, environment: record, table: rows, goals: [], result },
        suffix,
      );
      return;
    }
    const scenarios: Omit<
      BenchResults['scenarios'],
      'serverSettings' | 'separateProcesses' | 'inbox' | 'modelCapacity'
    > = {
      // First, while no work items are in flight: it measures the wall time of short processes.
      cliStart: await run(cliStart),
      workerStart: sizes.processStarts ? await run(workerStart) : null,
      throughput: await run(throughput),
      serverWork: await run(serverWork),
      latency: await run(latency),
      retryLoop: await run(retryLoop),
      reviewRoundTrip: await run(reviewRoundTrip),
      fanOut: await run(fanOut),
      fanOutItems: await run(fanOutItems),
      loopIterations: await run(loopIterations),
      largeArtefacts: await run(largeArtefacts),
      tddTree: await run(tddTree),
      // Last: it leaves its items waiting, which would weigh on every scenario after it.
      waitingItems: await run(waitingItems),
    };
    progress('shutting down');
    const { bundles } = env!;
    await env!.shutdown();
    env = undefined;
    // After the shutdown: it starts three servers of its own, and nothing else should be running meanwhile.
    const serverSettingsResult = sizes.serverRounds > 0 ? await run((c) => serverSettings(c, bundles.treadle)) : null;
    // Issue 7's own setup: each worker in a process of its own (a server of its own too, after the others).
    const separate = sizes.separateProcesses ? await run((c) => separateProcesses(c, bundles)) : null;
    // Last, on a server of its own: it leaves thousands of workflows behind. Quick mode runs it alone
    // (`.ci/run`: `run.js --quick --only=inbox`), so the quick run keeps its two-minute budget.
    const inboxResult = sizes.inboxDecisions > 0 && sizes.mode !== 'quick' ? await run((c) => inbox(c, bundles)) : null;
    // Issue 39: three `treadle worker` processes and a rate-limited fake provider, on a server of its own (scaled
    // below the full mode, with a budget of its own: it waits on a per-minute limit by design).
    const capacity = await run(modelCapacity);
    const durationMs = performance.now() - started;
    const all: BenchResults['scenarios'] = {
      ...scenarios,
      serverSettings: serverSettingsResult,
      separateProcesses: separate,
      inbox: inboxResult,
      modelCapacity: capacity,
    };
    const goals = evaluateGoals(mode, durationMs, all);
    const results: BenchResults = {
      mode,
      sizes,
      startedAt,
      durationMs: round(durationMs, 0),
      environment: record,
      loadAverageAtEnd: os.loadavg().map((l) => round(l)),
      scenarios: all,
      goals,
      table: rows,
    };
    printTable(rows, goals);
    progress(`wrote ${writeResults(results, suffix)} (${(durationMs / 1000).toFixed(1)} s)`);
  } finally {
    await env?.shutdown();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`bench failed: ${(error as Error).stack ?? String(error)}\n`);
  process.exitCode = 1;
});
