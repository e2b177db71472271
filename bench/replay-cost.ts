/**
 * What the workflow code of one item costs on its own: replays a recorded ten-stage history of each side
 * many times, with no server and no network, and prints the CPU per replay. The two sides alternate in
 * batches of 20 replays inside each process, because this VM's speed drifts by more than the differences
 * measured; several processes (alternating the settings) give the medians.
 *
 * With `--without-promise-hook` each side is also measured with the SDK's promise hook switched off after
 * the warm-up. The hook records a stack trace for every promise a workflow creates (for the `__stack_trace`
 * query); switching it off uses an SDK internal and is a measurement only, never something a worker does.
 *
 *   npx tsc -p tsconfig.bench.json
 *   PROFILE_SAVE_HISTORIES=/tmp/h node .bench-build/bench/profile.js 20 1    # records treadle.json, baseline.json
 *   node .bench-build/bench/replay-cost.js /tmp/h [batches of 20 replays] [processes] [--without-promise-hook]
 *
 * Not part of `npm run bench`; BENCHMARKS.md "How to run" says how, and "Second paths" reports what it measured.
 */
import { fork } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import v8 from 'node:v8';
import { bundleWorkflowCode, DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
import { globalHandlers } from '@temporalio/worker/lib/workflow/vm-shared';
import { median } from './statistics';

type SideName = 'treadle' | 'baseline';

const WORKFLOWS: Record<SideName, string> = {
  treadle: require.resolve('../src/workflows'),
  baseline: require.resolve('./baseline-workflows'),
};

/** Warm-up replays before the measured ones: the bundle is compiled and optimised by then. */
const WARM_UP = 50;

/** Replays per batch: the sides alternate batch by batch, so a drift of the machine's speed hits both. */
const BATCH = 20;

interface Measurement {
  promiseHook: boolean;
  cpuMsPerReplay: Record<SideName, number>;
  workflowPromisesPerReplay: Record<SideName, number>;
}

/**
 * One measurement, in this process: bundle both sides, warm up, count each side's workflow promises, then
 * `batches` batches of replays per side, alternating the sides.
 */
async function measureHere(historiesDir: string, promiseHook: boolean, batches: number): Promise<Measurement> {
  Runtime.install({ logger: new DefaultLogger('WARN') });
  const noop = (): void => undefined;
  const quiet = { trace: noop, debug: noop, info: noop, warn: noop, error: noop, log: noop };
  const sides = ['treadle', 'baseline'] as const;
  const replayers = {} as Record<SideName, (count: number) => Promise<void>>;
  for (const side of sides) {
    const bundle = await bundleWorkflowCode({ workflowsPath: WORKFLOWS[side], logger: quiet });
    const history = historyFromJSON(JSON.parse(readFileSync(path.join(historiesDir, `${side}.json`), 'utf8')));
    replayers[side] = async (count) => {
      async function* histories() {
        for (let i = 0; i < count; i++) yield { workflowId: `replay-${i}`, history };
      }
      for await (const result of Worker.runReplayHistories({ workflowBundle: bundle }, histories())) {
        if (result.error) throw new Error(`replay of the ${side} history failed: ${String(result.error)}`);
      }
    };
  }
  for (const side of sides) await replayers[side](WARM_UP);
  // Workflow promises are those created inside a workflow's context (the ones the SDK's hook records).
  const workflowPromisesPerReplay = {} as Record<SideName, number>;
  const inWorkflow = (promise: Promise<unknown>): boolean => {
    const contextFunction = promise.constructor.constructor as FunctionConstructor;
    return contextFunction !== Function && Boolean(contextFunction('return globalThis.__TEMPORAL_ACTIVATOR__')());
  };
  for (const side of sides) {
    let count = 0;
    const stop = v8.promiseHooks.onInit((promise) => {
      if (inWorkflow(promise)) count++;
    });
    await replayers[side](10);
    stop();
    workflowPromisesPerReplay[side] = count / 10;
  }
  if (!promiseHook) {
    // The SDK installs one promise hook per thread; replays run the workflow in this thread.
    (globalHandlers as unknown as { stopPromiseHook(): void }).stopPromiseHook();
  }
  const cpuMs = { treadle: 0, baseline: 0 };
  for (let b = 0; b < batches; b++) {
    for (const side of b % 2 === 0 ? sides : [...sides].reverse()) {
      const before = process.cpuUsage();
      await replayers[side](BATCH);
      const spent = process.cpuUsage(before);
      cpuMs[side] += (spent.user + spent.system) / 1000;
    }
  }
  const per = (side: SideName): number => cpuMs[side] / (batches * BATCH);
  return {
    promiseHook,
    cpuMsPerReplay: { treadle: per('treadle'), baseline: per('baseline') },
    workflowPromisesPerReplay,
  };
}

function measureInChild(historiesDir: string, promiseHook: boolean, batches: number): Promise<Measurement> {
  return new Promise((resolve, reject) => {
    const child = fork(__filename, ['--one', historiesDir, promiseHook ? 'hook' : 'no-hook', String(batches)], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    let answer: Measurement | undefined;
    child.on('message', (message) => (answer = message as Measurement));
    child.on('error', reject);
    child.on('exit', (code, signal) =>
      answer ? resolve(answer) : reject(new Error(`a measurement exited with ${signal ?? code} before answering`)),
    );
  });
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  if (args[0] === '--one') {
    const [, dir, hook, batches] = args;
    process.send!(await measureHere(dir!, hook === 'hook', Number(batches)));
    return;
  }
  const withoutHook = args.includes('--without-promise-hook');
  const [dir, batchesArg, roundsArg] = args.filter((a) => !a.startsWith('--'));
  if (!dir)
    throw new Error(
      'usage: replay-cost.js <histories dir> [batches of 20 replays] [processes] [--without-promise-hook]',
    );
  const batches = Number(batchesArg ?? 10);
  const rounds = Number(roundsArg ?? 3);
  const settings = withoutHook ? [true, false] : [true];
  const results = new Map<boolean, Measurement[]>();
  for (let round = 0; round < rounds; round++) {
    for (const promiseHook of round % 2 === 0 ? settings : [...settings].reverse()) {
      const measured = await measureInChild(dir, promiseHook, batches);
      results.set(promiseHook, [...(results.get(promiseHook) ?? []), measured]);
      process.stderr.write(
        `[replay-cost] process ${round + 1}/${rounds}, promise hook ${promiseHook ? 'on' : 'off'}: treadle ${measured.cpuMsPerReplay.treadle.toFixed(2)} ms, baseline ${measured.cpuMsPerReplay.baseline.toFixed(2)} ms per replay\n`,
      );
    }
  }
  const medianOf = (promiseHook: boolean, side: SideName): number =>
    median(results.get(promiseHook)!.map((m) => m.cpuMsPerReplay[side]));
  const first = results.get(true)![0]!;
  console.log(
    `workflow promises per item: treadle ${first.workflowPromisesPerReplay.treadle}, baseline ${first.workflowPromisesPerReplay.baseline}`,
  );
  for (const promiseHook of settings) {
    const t = medianOf(promiseHook, 'treadle');
    const b = medianOf(promiseHook, 'baseline');
    const ratios = results
      .get(promiseHook)!
      .map((m) => (m.cpuMsPerReplay.treadle / m.cpuMsPerReplay.baseline).toFixed(2));
    console.log(
      `promise hook ${promiseHook ? 'on ' : 'off'}: CPU per replayed item (median of ${rounds} processes): treadle ${t.toFixed(2)} ms, baseline ${b.toFixed(2)} ms, difference ${(t - b).toFixed(2)} ms; treadle ÷ baseline per process: ${ratios.join(' ')}`,
    );
  }
  if (withoutHook) {
    const hook = (side: SideName): number => medianOf(true, side) - medianOf(false, side);
    console.log(
      `the promise hook's share: treadle ${hook('treadle').toFixed(2)} ms, baseline ${hook('baseline').toFixed(2)} ms per item`,
    );
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`replay-cost failed: ${(error as Error).stack ?? String(error)}\n`);
  process.exitCode = 1;
});
