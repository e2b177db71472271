/** Running the built `treadle` command (and other programs) to their end, as users run them, for tests to check. */
import { execFile, spawn } from 'node:child_process';
import path from 'node:path';
import type { Harness } from './harness';

/** The command users run: bin/treadle.js of this checkout (it loads lib/, so tests that use it need a build). */
export const TREADLE_BIN = path.join(__dirname, '..', '..', 'bin', 'treadle.js');

/** Enough for the longest listings tests print (Node's own default, 1 MiB, is not). */
const MAX_OUTPUT_BYTES = 16 * 1024 * 1024;

/** Exit code and output of one run. */
export interface CliRun {
  /** The exit code; 1 when the process was killed (a timeout, a signal). */
  code: number;
  stdout: string;
  stderr: string;
}

/** Where and how long one run goes. */
export interface RunOptions {
  /** The child's whole environment: nothing of the test process's is added. By default the test process's own. */
  env?: NodeJS.ProcessEnv;
  /** Its working directory; by default the test process's. */
  cwd?: string;
  /** The child is killed (SIGTERM) after this long, and the run reports exit code 1. */
  timeoutMs: number;
}

/** Runs `file args…` to its end and resolves with its exit code and output; it never rejects. */
export function runCommand(file: string, args: string[], options: RunOptions): Promise<CliRun> {
  const { env, cwd, timeoutMs } = options;
  return new Promise((resolve) => {
    execFile(file, args, { env, cwd, timeout: timeoutMs, maxBuffer: MAX_OUTPUT_BYTES }, (error, stdout, stderr) =>
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/**
 * Runs `treadle args…` (bin/treadle.js with the test's own Node) to its end. `options.env`, when given, is the
 * child's whole environment, so tests can play separate machines or a user's clean shell: spread `process.env`
 * into it to inherit the test process's settings.
 */
export function runCli(args: string[], options: RunOptions): Promise<CliRun> {
  return runCommand(process.execPath, [TREADLE_BIN, ...args], options);
}

/** A run's exit code and both outputs, for a failure message. */
export function showRun(run: CliRun): string {
  return `exit ${run.code}\n--- stdout\n${run.stdout}\n--- stderr\n${run.stderr}`;
}

/** Runs `treadle …` with the harness's server, task queue and blob store; `env` adds or overrides variables. */
export function runTreadle(h: Harness, args: string[], env: Record<string, string> = {}): Promise<CliRun> {
  return runCli(args, {
    env: {
      ...process.env,
      TEMPORAL_ADDRESS: h.address,
      TREADLE_TASK_QUEUE: h.taskQueue,
      TREADLE_BLOB_DIR: h.blobs.dir,
      ...env,
    },
    timeoutMs: 60_000,
  });
}

/**
 * `treadle approve batch --by tty-user --pipeline <pipeline>` in a real pseudo-terminal (util-linux `script`),
 * answering each prompt as it appears; `env` is added to the test process's environment.
 */
export function approveBatchInTerminal(
  answers: string[],
  env: NodeJS.ProcessEnv,
  pipeline: string,
): Promise<{ code: number | null; output: string }> {
  const command = [process.execPath, TREADLE_BIN, 'approve', 'batch', '--by', 'tty-user', '--pipeline', pipeline]
    .map((a) => `'${a}'`)
    .join(' ');
  const child = spawn('script', ['-qfec', command, '/dev/null'], { env: { ...process.env, ...env } });
  let output = '';
  let prompts = 0;
  const pending = [...answers];
  child.stdout.on('data', (chunk: Buffer) => {
    output += chunk.toString();
    // Each prompt (and the reason prompt after a rejection) gets the next answer once it is on screen.
    const seen = (output.match(/\[a\]pprove, \[r\]eject, \[s\]kip, \[q\]uit\? |reason \(optional\): /g) ?? []).length;
    while (prompts < seen && pending.length > 0) {
      prompts++;
      child.stdin.write(`${pending.shift()}\r`);
    }
  });
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, output })));
}
