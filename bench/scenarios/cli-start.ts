/**
 * CLI start (issue 7): wall time from spawning `node bin/treadle.js <command>` to its exit, for the commands
 * that never talk to the server (`pipelines`, `--help`, `validate` on a catalog spec). The baseline column
 * is a bare Node start (`node -e 0`) measured the same way, so T/B is what the CLI adds to Node itself.
 * The commands that talk to the server (`status`, `reviews`, `review`, `approve list`; issue 26 §5) are measured
 * beside a bare `@temporalio/client` script making the same calls, so T/B is what Treadle adds to the SDK.
 * Commands run round-robin, one at a time, so a burst of load on the machine weighs on all of them alike.
 * The CLI runs from `lib/` (`npm run build`), which this benchmark does not build.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { distribution, ratio, type Distribution } from '../statistics';
import type { Connection } from '@temporalio/client';
import { fmt, fmtRatio, mapLimited, nowMs, type ScenarioContext, type ScenarioResult } from '../scenario';

/** The goal: each measured command's median start-to-exit time stays under this. */
export const CLI_START_GOAL_MS = 300;
/** Runs of each command: enough for a stable median, a few seconds in all. */
const RUNS = { quick: 7, medium: 11, full: 15 } as const;
/** A start that takes longer than this is a hang, not a measurement. */
const RUN_TIMEOUT_MS = 30_000;

/** The repository (this file runs from `.bench-build/bench/scenarios`). */
const ROOT = path.resolve(__dirname, '..', '..', '..');
const BIN = path.join(ROOT, 'bin', 'treadle.js');

/** The commands measured, by the label the table and the goals use. */
const COMMANDS: Record<string, string[]> = {
  'treadle pipelines': ['pipelines'],
  'treadle --help': ['--help'],
  'treadle validate review-demo.yaml': ['validate', path.join(ROOT, 'examples', 'review-demo.yaml')],
};

export interface CliStartCommand {
  command: string;
  startMs: Distribution;
  /** Median ÷ the median bare Node start. */
  ratioToNode: number | null;
  underGoal: boolean;
}

/** A command that talks to the server, beside a bare `@temporalio/client` script making the same calls. */
export interface CliServerCommand {
  command: string;
  startMs: Distribution;
  bareMs: Distribution;
  /** Median ÷ the bare script's median. */
  ratioToBare: number | null;
  underGoal: boolean;
}

export interface CliStartResult {
  runs: number;
  /** `node -e 0`, the floor no CLI can go under. */
  nodeStartMs: Distribution;
  commands: CliStartCommand[];
  /** status, reviews, review, approve list against bench/bare-client-commands.ts (issue 26 §5). */
  serverCommands: CliServerCommand[];
}

/** The goal for commands that talk to the server: at most this × the bare client script's wall time. */
export const CLI_SERVER_GOAL_RATIO = 1.3;

/** Spawns one process and returns its wall time; a failure is an error, not a fast sample. */
function timeOnce(args: string[], env: NodeJS.ProcessEnv = process.env): number {
  const started = nowMs();
  const run = spawnSync(process.execPath, args, { cwd: ROOT, env, encoding: 'utf8', timeout: RUN_TIMEOUT_MS });
  const elapsed = nowMs() - started;
  if (run.status !== 0)
    throw new Error(
      `node ${args.join(' ')} exited ${run.status ?? run.signal}: ${run.stderr.trim() || run.error?.message}`,
    );
  return elapsed;
}

/**
 * {@link timeOnce} without blocking: the benchmark's own workers run in this process, and a command that queries
 * a work item (`status`) or updates it (`review`) waits for them to answer.
 */
function timeOnceAsync(args: string[], env: NodeJS.ProcessEnv): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = nowMs();
    const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), RUN_TIMEOUT_MS);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      const elapsed = nowMs() - started;
      if (code === 0) resolve(elapsed);
      else reject(new Error(`node ${args.join(' ')} exited ${code ?? signal}: ${stderr.trim()}`));
    });
  });
}

/** Fails early when the CLI is not built, and warns when the build is older than the CLI's source. */
function checkBuild(ctx: ScenarioContext): void {
  const built = path.join(ROOT, 'lib', 'cli', 'main.js');
  if (!existsSync(built)) throw new Error(`CLI start needs the built CLI (${built}); run "npm run build" first`);
  const source = path.join(ROOT, 'src', 'cli', 'main.ts');
  if (existsSync(source) && statSync(source).mtimeMs > statSync(built).mtimeMs)
    ctx.progress('CLI start: lib/ is older than src/cli/main.ts; measuring the old build (run "npm run build")');
}

/** Runs the CLI start scenario. */
export async function cliStart(ctx: ScenarioContext): Promise<ScenarioResult<CliStartResult>> {
  checkBuild(ctx);
  const runs = RUNS[ctx.sizes.mode];
  ctx.progress(`CLI start: ${runs} runs each of node -e 0 and ${Object.keys(COMMANDS).join(', ')}`);
  const samples: Record<string, number[]> = { node: [] };
  for (const label of Object.keys(COMMANDS)) samples[label] = [];
  // One unmeasured round first: the file system cache, not Treadle, would otherwise pay the first start.
  for (let round = -1; round < runs; round++) {
    const node = timeOnce(['-e', '0']);
    if (round >= 0) samples.node!.push(node);
    for (const [label, args] of Object.entries(COMMANDS)) {
      const ms = timeOnce([BIN, ...args]);
      if (round >= 0) samples[label]!.push(ms);
    }
  }
  const nodeStartMs = distribution(samples.node!);
  const commands = Object.keys(COMMANDS).map((command): CliStartCommand => {
    const startMs = distribution(samples[command]!);
    return {
      command,
      startMs,
      ratioToNode: ratio(startMs.p50, nodeStartMs.p50),
      underGoal: startMs.p50 < CLI_START_GOAL_MS,
    };
  });
  const serverCommands = ctx.sizes.processStarts ? await serverCommandStarts(ctx, runs) : [];
  const scenario = `CLI start (median of ${runs}; baseline: node -e 0)`;
  const serverScenario = `CLI start against the server (median of ${runs}; baseline: bare @temporalio/client script)`;
  return {
    result: { runs, nodeStartMs, commands, serverCommands },
    rows: [
      ...commands.map((c) => ({
        scenario,
        metric: c.command,
        treadle: fmt(c.startMs.p50, ' ms'),
        baseline: fmt(nodeStartMs.p50, ' ms'),
        ratio: fmtRatio(c.ratioToNode),
      })),
      ...serverCommands.map((c) => ({
        scenario: serverScenario,
        metric: c.command,
        treadle: fmt(c.startMs.p50, ' ms'),
        baseline: fmt(c.bareMs.p50, ' ms'),
        ratio: fmtRatio(c.ratioToBare),
      })),
    ],
  };
}

/**
 * `treadle status`, `reviews`, `review --approve` and `approve list`, each beside the bare script making the same
 * calls (bench/bare-client-commands.ts), round-robin. An item waiting for review is what status shows and reviews
 * lists; each review run approves an item of its own (one per side and run), started before the clock starts.
 */
async function serverCommandStarts(ctx: ScenarioContext, runs: number): Promise<CliServerCommand[]> {
  const address = (ctx.treadleClient.client.connection as Connection).options.address;
  const env = { ...process.env, TEMPORAL_ADDRESS: address, TREADLE_TASK_QUEUE: ctx.treadleClient.taskQueue };
  const bare = path.join(__dirname, '..', 'bare-client-commands.js');
  const waiting = `${ctx.tag}-cli-status`;
  const reviewed = (side: string, round: number) => `${ctx.tag}-cli-review-${side}-${round}`;
  const ids = [waiting];
  for (let round = -1; round < runs; round++) ids.push(reviewed('treadle', round), reviewed('bare', round));
  ctx.progress(`CLI start: ${ids.length} items waiting for review for status, reviews and review`);
  await mapLimited(ids, 10, async (id) => {
    await ctx.treadle.startReview(id);
    await ctx.treadle.untilWaiting(id);
  });
  const commands: Record<string, { treadle: (round: number) => string[]; bare: (round: number) => string[] }> = {
    'treadle status': { treadle: () => [BIN, 'status', waiting], bare: () => [bare, 'status', waiting] },
    'treadle reviews': { treadle: () => [BIN, 'reviews'], bare: () => [bare, 'reviews'] },
    'treadle review --approve': {
      treadle: (round) => [BIN, 'review', reviewed('treadle', round), 'review', '--approve'],
      bare: (round) => [bare, 'review', reviewed('bare', round), 'review'],
    },
    'treadle approve list': { treadle: () => [BIN, 'approve', 'list'], bare: () => [bare, 'approve-list'] },
  };
  const samples: Record<string, { treadle: number[]; bare: number[] }> = {};
  for (const label of Object.keys(commands)) samples[label] = { treadle: [], bare: [] };
  // One unmeasured round first, as above.
  for (let round = -1; round < runs; round++) {
    for (const [label, command] of Object.entries(commands)) {
      const treadle = await timeOnceAsync(command.treadle(round), env);
      const bareMs = await timeOnceAsync(command.bare(round), env);
      if (round >= 0) {
        samples[label]!.treadle.push(treadle);
        samples[label]!.bare.push(bareMs);
      }
    }
  }
  // The status item would otherwise wait through every later scenario.
  await ctx.treadleClient.approve(waiting, 'review');
  return Object.keys(commands).map((command) => {
    const startMs = distribution(samples[command]!.treadle);
    const bareMs = distribution(samples[command]!.bare);
    const ratioToBare = ratio(startMs.p50, bareMs.p50);
    return {
      command,
      startMs,
      bareMs,
      ratioToBare,
      underGoal: ratioToBare !== null && ratioToBare <= CLI_SERVER_GOAL_RATIO,
    };
  });
}
