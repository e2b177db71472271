/**
 * A profiling harness for the throughput gap: the benchmark's environment, then rounds of 10-stage no-op
 * items on one side at a time, printing this process's CPU per item for each side. Run it under the V8
 * profiler to see where the worker's milliseconds go (every workflow thread writes its own profile):
 *
 *   npx tsc -p tsconfig.bench.json
 *   node --cpu-prof --cpu-prof-dir=/tmp/prof .bench-build/bench/profile.js [items per round] [rounds] [treadle|baseline|both]
 *
 * Each round also prints this process's CPU per item by thread (`main`: activities and clients; the workflow
 * thread and V8's helper threads, all named `node`; the SDK's Rust core, `tokio-runtime-w`), from /proc.
 *
 * With `PROFILE_SAVE_HISTORIES=<dir>`, one history per side is saved there as JSON, for replaying the
 * workflow code alone (`Worker.runReplayHistories`) without a server.
 *
 * Not part of `npm run bench`; see BENCHMARKS.md "How to run".
 */
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import { startEnvironment } from './environment';
import { cpuSnapshot, cpuSpent, threadCpuMs } from './cpu';
import { mapLimited } from './scenario';
import { baselineSide, treadleSide, type Side } from './sides';

async function main(): Promise<void> {
  const [itemsArg, roundsArg, sidesArg] = process.argv.slice(2);
  const items = Number(itemsArg ?? 60);
  const rounds = Number(roundsArg ?? 3);
  const which = sidesArg ?? 'both';
  const progress = (m: string): void => void process.stderr.write(`[profile] ${m}\n`);
  const env = await startEnvironment(progress, (error) => {
    progress(`a worker failed: ${String(error)}`);
    process.exit(1);
  });
  try {
    const sides: Side[] = [];
    if (which !== 'treadle') sides.push(baselineSide(env.temporal, env.baselineQueue));
    if (which !== 'baseline') sides.push(treadleSide(env.treadle));
    const tag = randomUUID().slice(0, 8);
    const runRound = async (side: Side, name: string, n: number): Promise<void> => {
      await mapLimited(
        Array.from({ length: n }, (_, i) => i),
        n,
        async (i) => {
          const id = `${tag}-${name}-${side.name}-${i}`;
          await side.startLinear(id, 10);
          await side.result(id);
        },
      );
    };
    for (const side of sides) await runRound(side, 'warmup', 20);
    const saveTo = process.env.PROFILE_SAVE_HISTORIES;
    if (saveTo) {
      for (const side of sides) {
        const history = await side.handle(`${tag}-warmup-${side.name}-0`).fetchHistory();
        writeFileSync(`${saveTo}/${side.name}.json`, historyToJSON(history));
      }
    }
    for (let r = 0; r < rounds; r++) {
      for (const side of sides) {
        const before = cpuSnapshot(env.server.pids());
        const threadsBefore = threadCpuMs();
        const started = performance.now();
        await runRound(side, `r${r}`, items);
        const spent = cpuSpent(before, cpuSnapshot(env.server.pids()));
        const wall = performance.now() - started;
        const threads = [...threadCpuMs()]
          .map(([name, ms]) => [name, (ms - (threadsBefore.get(name) ?? 0)) / items] as const)
          .filter(([, ms]) => ms >= 0.5)
          .sort((a, b) => b[1] - a[1])
          .map(([name, ms]) => `${name} ${ms.toFixed(1)}`)
          .join(', ');
        progress(
          `${side.name} round ${r + 1}: ${((items / wall) * 1000).toFixed(2)} items/s, CPU per item: process ${(spent.processMs / items).toFixed(1)} ms, server ${((spent.serverMs ?? Number.NaN) / items).toFixed(1)} ms; by thread: ${threads}`,
        );
      }
    }
  } finally {
    await env.shutdown();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`profile failed: ${(error as Error).stack ?? String(error)}\n`);
  process.exitCode = 1;
});
