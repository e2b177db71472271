/**
 * Throughput with each worker in a process of its own, the setup of issue 7's independent measurement: a
 * fresh dev server with the benchmark's SQLite pragmas, the Treadle worker and the baseline worker forked as
 * two processes (`bench/worker-process.ts`, SDK-default options, the same bundles and activities as in
 * process), and only the clients in this one. Rounds of N ten-stage no-op items alternate between the sides
 * as in the throughput scenario; each round records the CPU of the side's worker process, of this process
 * (the clients) and of the server, so the gap splits exactly into worker, client and server work.
 *
 * Runs after the main environment has shut down (medium and full runs), so nothing else is in flight.
 */
import { Client, Connection } from '@temporalio/client';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { TreadleClient } from '../../src/client';
import { FileBlobStore } from '../../src/storage/blob-store';
import { cpuSnapshot, cpuSpent, processCpuMs } from '../cpu';
import { startBenchServer, type BenchServer, type ServerKind } from '../bench-server';
import { BENCH_ANSWER_WAIT_MS, type WorkflowBundles } from '../environment';
import { fmt, fmtRatio, mapLimited, type ScenarioContext, type ScenarioResult, runCleanups } from '../scenario';
import { baselineSide, treadleSide, type Side, type SideName } from '../sides';
import { ratio, round } from '../statistics';
import { roundRatiosRow, summarizeRoundRatios, type RoundRatioSummary } from './throughput';

const QUEUES: Record<SideName, string> = { treadle: 'bench-treadle', baseline: 'bench-baseline' };
const STAGES = 10;
const WARMUP_ITEMS = 20;
/** A forked worker that has not said `ready` by then is broken. */
const READY_TIMEOUT_MS = 60_000;

/** One side's rounds: wall time and CPU milliseconds per item of its worker process, the clients and the server. */
interface SideRounds {
  wallMs: number[];
  workerMs: number[];
  clientMs: number[];
  serverMs: number[];
}

/** One side over all rounds. */
export interface SeparateSide {
  /** Items over the summed wall time of all rounds. */
  itemsPerSecond: number;
  /** Mean over the rounds of CPU milliseconds per item: the side's worker process, this process (the clients), the server. */
  cpuPerItemMs: { worker: number; clients: number; server: number };
  rounds: SideRounds;
}

export interface SeparateProcessesResult extends RoundRatioSummary {
  items: number;
  rounds: number;
  treadle: SeparateSide;
  baseline: SeparateSide;
  /** Treadle ÷ baseline items per second over all rounds. */
  throughputRatio: number | null;
  /** Treadle ÷ baseline items per second of each round (summarised by the fields of {@link RoundRatioSummary}). */
  roundRatios: number[];
  /** Baseline ÷ Treadle CPU per item (worker + clients + server): what a CPU-bound machine would give. */
  cpuBoundRatio: number | null;
}

/** Forks a worker process (with `env`, default this one's) and resolves once it prints `ready`. */
export async function forkWorker(side: SideName, args: string[], env = process.env): Promise<ChildProcess> {
  const child = spawn(process.execPath, [path.join(__dirname, '..', 'worker-process.js'), side, ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env,
  });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`the ${side} worker process did not start within ${READY_TIMEOUT_MS / 1000} s`)),
      READY_TIMEOUT_MS,
    );
    child.once('exit', (code) => reject(new Error(`the ${side} worker process exited (${code}) before it was ready`)));
    createInterface({ input: child.stdout! }).once('line', (line) => {
      clearTimeout(timer);
      if (line === 'ready') resolve();
      else reject(new Error(`the ${side} worker process said "${line}" instead of ready`));
    });
  });
  return child;
}

/** Ends a forked worker process (SIGTERM) and resolves once it has exited; at once if it already has. */
export function stopChild(child: ChildProcess): Promise<void> {
  return new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}

/**
 * A dev server of a scenario's own, its SQLite file in `dir`, with the benchmark's pragmas: for the scenarios that
 * run after the main environment has stopped. The caller stops it.
 */
export async function serverOfItsOwn(
  dir: string,
  progress: (message: string) => void,
  kind: ServerKind = 'dev',
): Promise<BenchServer> {
  progress(`starting ${kind === 'dev' ? 'the Temporal dev server' : 'a Temporal server on PostgreSQL'}...`);
  return startBenchServer(kind, dir, progress);
}

/** Runs the scenario on a server of its own, with the main run's bundles: the sizes of the throughput scenario. */
export async function separateProcesses(
  ctx: ScenarioContext,
  bundles: WorkflowBundles,
): Promise<ScenarioResult<SeparateProcessesResult>> {
  const { throughputItems: items, throughputRounds: rounds } = ctx.sizes;
  const progress = (message: string): void => ctx.progress(`separate processes: ${message}`);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'treadle-bench-separate-'));
  const cleanups: (() => Promise<void> | void)[] = [() => rmSync(dir, { recursive: true, force: true })];
  try {
    const server = await serverOfItsOwn(dir, progress);
    cleanups.push(() => server.stop());
    const blobDir = path.join(dir, 'blobs');
    mkdirSync(blobDir);
    const workers: Partial<Record<SideName, ChildProcess>> = {};
    // A worker process that dies while items run would leave them waiting forever: the rounds race this.
    let stopping = false;
    let workerDied: (error: Error) => void = () => undefined;
    const died = new Promise<never>((_, reject) => (workerDied = reject));
    died.catch(() => undefined);
    for (const side of ['treadle', 'baseline'] as const) {
      const bundleFile = path.join(dir, `${side}-workflows.js`);
      writeFileSync(bundleFile, bundles[side].code);
      const child = await forkWorker(side, [server.address, server.namespace, QUEUES[side], bundleFile, blobDir]);
      workers[side] = child;
      child.once('exit', (code, signal) => {
        if (!stopping)
          workerDied(new Error(`the ${side} worker process exited (${signal ?? code}) during the scenario`));
      });
      cleanups.push(() => {
        stopping = true;
        return stopChild(child);
      });
    }
    const connection = await Connection.connect({ address: server.address });
    cleanups.push(() => connection.close());
    const temporal = new Client({ connection, namespace: server.namespace });
    const sides: Side[] = [
      baselineSide(temporal, QUEUES.baseline),
      treadleSide(
        new TreadleClient(temporal, {
          taskQueue: QUEUES.treadle,
          blobs: new FileBlobStore(blobDir),
          answerWaitMs: BENCH_ANSWER_WAIT_MS,
        }),
      ),
    ];
    const tag = `${ctx.tag}-${randomUUID().slice(0, 4)}`;
    const runItems = (side: Side, name: string, n: number): Promise<void[]> =>
      Promise.race([
        mapLimited(
          Array.from({ length: n }, (_, i) => i),
          n,
          async (i) => {
            const id = `${tag}-${name}-${side.name}-${i}`;
            await side.startLinear(id, STAGES);
            await side.result(id);
          },
        ),
        died,
      ]);
    for (const side of sides) await runItems(side, 'warmup', WARMUP_ITEMS);

    const measured: Record<SideName, SideRounds> = {
      treadle: { wallMs: [], workerMs: [], clientMs: [], serverMs: [] },
      baseline: { wallMs: [], workerMs: [], clientMs: [], serverMs: [] },
    };
    for (let r = 0; r < rounds; r++) {
      // The side that goes first alternates, as in the throughput scenario.
      for (const side of r % 2 === 0 ? sides : [...sides].reverse()) {
        const workerPid = workers[side.name]!.pid!;
        const before = { all: cpuSnapshot(server.pids()), worker: processCpuMs(workerPid) };
        const started = performance.now();
        await runItems(side, `r${r}`, items);
        const wallMs = performance.now() - started;
        const spent = cpuSpent(before.all, cpuSnapshot(server.pids()));
        const workerMs = (processCpuMs(workerPid) ?? Number.NaN) - (before.worker ?? Number.NaN);
        const m = measured[side.name];
        m.wallMs.push(wallMs);
        m.workerMs.push(workerMs / items);
        m.clientMs.push(spent.processMs / items);
        m.serverMs.push((spent.serverMs ?? Number.NaN) / items);
        progress(
          `${side.name} round ${r + 1}/${rounds}: ${((items / wallMs) * 1000).toFixed(2)} items/s; CPU ms per item: worker ${(workerMs / items).toFixed(1)}, clients ${(spent.processMs / items).toFixed(1)}, server ${((spent.serverMs ?? Number.NaN) / items).toFixed(1)}`,
        );
      }
    }

    const summary = (m: SideRounds): SeparateSide => {
      const perItem = (xs: number[]): number => round(xs.reduce((a, b) => a + b, 0) / xs.length);
      const wall = m.wallMs.reduce((a, b) => a + b, 0);
      return {
        itemsPerSecond: round(((items * rounds) / wall) * 1000),
        cpuPerItemMs: { worker: perItem(m.workerMs), clients: perItem(m.clientMs), server: perItem(m.serverMs) },
        rounds: m,
      };
    };
    const treadle = summary(measured.treadle);
    const baseline = summary(measured.baseline);
    // Both sides ran the same number of items per round: the items/s ratio is the inverse ratio of wall times.
    const roundRatios = measured.treadle.wallMs.map((t, r) => round(measured.baseline.wallMs[r]! / t, 3));
    const total = (side: SeparateSide): number =>
      side.cpuPerItemMs.worker + side.cpuPerItemMs.clients + side.cpuPerItemMs.server;
    const result: SeparateProcessesResult = {
      items,
      rounds,
      treadle,
      baseline,
      throughputRatio: ratio(treadle.itemsPerSecond, baseline.itemsPerSecond),
      roundRatios,
      ...summarizeRoundRatios(roundRatios),
      cpuBoundRatio: ratio(total(baseline), total(treadle)),
    };
    const name = `throughput, workers in separate processes (${items}×${rounds} items × ${STAGES} stages)`;
    const cpu = (side: SeparateSide): string =>
      `${fmt(side.cpuPerItemMs.worker)} / ${fmt(side.cpuPerItemMs.clients)} / ${fmt(side.cpuPerItemMs.server)}`;
    return {
      result,
      rows: [
        {
          scenario: name,
          metric: 'work items/s',
          treadle: fmt(treadle.itemsPerSecond),
          baseline: fmt(baseline.itemsPerSecond),
          ratio: fmtRatio(result.throughputRatio),
        },
        roundRatiosRow(name, result),
        {
          scenario: name,
          metric: 'CPU ms per item: worker process / clients / server',
          treadle: cpu(treadle),
          baseline: cpu(baseline),
          ratio: fmtRatio(ratio(total(treadle), total(baseline))),
        },
      ],
    };
  } finally {
    await runCleanups(cleanups, (m) => progress(m));
  }
}
