/**
 * `treadle worker` as a process of its own, started as users start it (bin/treadle.js, an environment and a
 * directory of its own): tests that need workers on separate "machines", or one they can kill, start it here.
 */
import { Connection } from '@temporalio/client';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { WORKER_READY_LINE } from '../../src/worker';
import { eventually, testAddress } from './harness';
import { stopProcess } from './processes';

const BIN = path.join(__dirname, '..', '..', 'bin', 'treadle.js');

/** How long a worker may take to print its ready line on a busy machine before the test gives up. */
const READY_WITHIN_MS = 120_000;

/** What `startTreadleWorker` runs. */
export interface TreadleWorkerOptions {
  /** The worker's whole environment (nothing of the test process's is added). */
  env: NodeJS.ProcessEnv;
  /** Its working directory; by default the test process's. */
  cwd?: string;
  /** Arguments after `treadle worker`. */
  args?: string[];
  readyWithinMs?: number;
  /** The plaintext address of the server to find its pollers on, when it is not the test run's server. */
  pollersOn?: string;
}

/** A running `treadle worker`. */
export interface TreadleWorkerProcess {
  child: ChildProcess;
  /** Everything it printed so far, stdout and stderr interleaved. */
  log(): string;
  /** Sends a signal and waits for the process to exit (SIGKILL: a machine lost at once). */
  kill(signal: NodeJS.Signals): Promise<void>;
  /** Stops it as an operator does (SIGTERM) and waits for it to exit. */
  stop(): Promise<void>;
}

/**
 * Starts `treadle worker` and resolves once it prints {@link WORKER_READY_LINE} and the test server (or
 * `pollersOn`) lists it among the pollers of its task queue (`TREADLE_TASK_QUEUE`, default `treadle`), so a
 * command that asks whether a worker polls gets yes; rejects, with everything it printed, when it exits first or
 * is not ready in time.
 */
export async function startTreadleWorker(options: TreadleWorkerOptions): Promise<TreadleWorkerProcess> {
  const child = spawn(process.execPath, [BIN, 'worker', ...(options.args ?? [])], {
    env: options.env,
    ...(options.cwd !== undefined ? { cwd: options.cwd } : {}),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  let onLog: (() => void) | undefined;
  const collect = (chunk: Buffer): void => {
    log += chunk.toString();
    onLog?.();
  };
  child.stdout!.on('data', collect);
  child.stderr!.on('data', collect);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const worker: TreadleWorkerProcess = {
    child,
    log: () => log,
    kill: async (signal) => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
    stop: () => stopProcess(child),
  };
  const within = options.readyWithinMs ?? READY_WITHIN_MS;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      settle(new Error(`treadle worker printed no "${WORKER_READY_LINE}" within ${within} ms:\n${log}`));
    }, within);
    const onExit = (code: number | null, signal: string | null): void =>
      settle(new Error(`treadle worker exited (${signal ?? `code ${code}`}) before it was ready:\n${log}`));
    function settle(error?: Error): void {
      clearTimeout(timer);
      onLog = undefined;
      child.off('exit', onExit);
      if (error) reject(error);
      else resolve();
    }
    onLog = () => {
      if (log.includes(`${WORKER_READY_LINE}\n`)) settle();
    };
    child.once('exit', onExit);
  });
  await polling(child, options.pollersOn ?? testAddress(), options.env.TREADLE_TASK_QUEUE || 'treadle', within).catch(
    (error: Error) => {
      child.kill('SIGKILL');
      throw new Error(`${error.message}\n${log}`);
    },
  );
  return worker;
}

/** Waits until the server at `address` lists this process (`<pid>@<host>`, the SDK's identity) polling `taskQueue`. */
async function polling(child: ChildProcess, address: string, taskQueue: string, timeoutMs: number): Promise<void> {
  const connection = await Connection.connect({ address });
  try {
    await eventually(
      async () => {
        if (child.exitCode !== null) throw new Error('treadle worker exited');
        const { pollers } = await connection.workflowService.describeTaskQueue({
          namespace: 'default',
          taskQueue: { name: taskQueue },
        });
        return (pollers ?? []).some((p) => p.identity?.startsWith(`${child.pid}@`)) ? true : undefined;
      },
      timeoutMs,
      `treadle worker (pid ${child.pid}) polling ${taskQueue}`,
    );
  } finally {
    await connection.close();
  }
}
