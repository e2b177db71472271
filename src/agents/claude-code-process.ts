/**
 * One run of the Claude Code CLI as a child process: started, fed its stdin, heartbeated, stopped on
 * cancellation or timeout (SIGTERM, then SIGKILL after a grace period), and read until its output closes.
 * What the run printed is read by the agent (`ClaudeCodeAgent`, claude-code.ts); this file only runs it.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import type { Invocation } from './claude-code-invocation';
import type { CliOutcome } from './claude-code-result';

/** How long a cancelled or timed-out CLI gets to exit after SIGTERM before it is sent SIGKILL. */
export const CLAUDE_CODE_KILL_GRACE_MS = 2_000;
/** How long to wait for stdout/stderr to close after the CLI exits (a leftover tool process may hold them). */
const STDIO_DRAIN_MS = 1_000;
/** How much of stderr is kept for the error message; only its last line is quoted. */
const STDERR_TAIL_CHARS = 16_384;

/** How one run of the CLI is started and watched. */
export interface CliRunOptions {
  cwd: string;
  /** The CLI's whole environment (nothing is inherited). */
  env: NodeJS.ProcessEnv;
  signal: AbortSignal | undefined;
  timeoutMs: number | undefined;
  heartbeat: (() => void) | undefined;
  heartbeatIntervalMs: number;
}

/** Runs the CLI to completion, cancellation or timeout, heartbeating meanwhile. Never rejects. */
export function runCli(command: string, invocation: Invocation, options: CliRunOptions): Promise<CliOutcome> {
  return new Promise<CliOutcome>((resolve) => {
    let child: ChildProcess;
    try {
      child = spawn(command, invocation.args, {
        cwd: options.cwd,
        env: options.env,
        stdio: [invocation.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
      });
    } catch (error) {
      resolve({ kind: 'spawn-failed', error: error as NodeJS.ErrnoException, synchronous: true });
      return;
    }
    new CliRun(child, options, resolve).watch(invocation.stdin);
  });
}

/**
 * A started CLI process until its outcome is settled, once: by its output closing after exit, by the drain
 * timer when a leftover tool process holds its output open, or by a stop (cancellation, timeout).
 */
class CliRun {
  private readonly stdout: Buffer[] = [];
  private stderr = '';
  private stopReason: 'aborted' | 'timed-out' | undefined;
  private exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  private settled = false;
  private killTimer: NodeJS.Timeout | undefined;
  private drainTimer: NodeJS.Timeout | undefined;
  private timeoutTimer: NodeJS.Timeout | undefined;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private readonly onAbort = (): void => this.stop('aborted');

  constructor(
    private readonly child: ChildProcess,
    private readonly options: CliRunOptions,
    private readonly resolve: (outcome: CliOutcome) => void,
  ) {}

  /** Starts the stop conditions and the heartbeat, collects the output, feeds stdin and follows the process. */
  watch(stdin: string | undefined): void {
    this.startTimers();
    this.collectOutput(stdin);
    this.followProcess();
  }

  private startTimers(): void {
    const { signal, timeoutMs, heartbeat, heartbeatIntervalMs } = this.options;
    signal?.addEventListener('abort', this.onAbort, { once: true });
    if (timeoutMs !== undefined) this.timeoutTimer = setTimeout(() => this.stop('timed-out'), timeoutMs);
    if (heartbeat !== undefined)
      this.heartbeatTimer = setInterval(() => {
        // A throwing heartbeat must not become an uncaught exception in the worker.
        try {
          heartbeat();
        } catch {
          /* the activity's own cancellation reaches us through the signal */
        }
      }, heartbeatIntervalMs);
  }

  private collectOutput(stdin: string | undefined): void {
    const { child } = this;
    child.stdout?.on('data', (chunk: Buffer) => this.stdout.push(chunk));
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (chunk: string) => {
      this.stderr = (this.stderr + chunk).slice(-STDERR_TAIL_CHARS);
    });
    if (stdin !== undefined && child.stdin) {
      // EPIPE when the CLI exits without reading: its exit status tells the story.
      child.stdin.on('error', () => undefined);
      child.stdin.end(stdin);
    }
  }

  private followProcess(): void {
    const { child } = this;
    child.on('error', (error: NodeJS.ErrnoException) => {
      // After a successful spawn, 'error' means a kill failed; 'close' still follows.
      if (child.pid === undefined) this.settle({ kind: 'spawn-failed', error, synchronous: false });
    });
    child.on('exit', (code, signal) => {
      this.exit = { code, signal };
      clearTimeout(this.killTimer);
      if (this.stopReason) {
        this.finish();
        return;
      }
      this.drainTimer = setTimeout(() => {
        child.stdout?.destroy();
        child.stderr?.destroy();
        this.finish();
      }, STDIO_DRAIN_MS);
    });
    child.on('close', (code: number | null, signal: NodeJS.Signals | null) => {
      this.exit ??= { code, signal };
      this.finish();
    });
  }

  /** Asks the CLI to stop (SIGTERM, SIGKILL after the grace period); the outcome is the reason. */
  private stop(reason: 'aborted' | 'timed-out'): void {
    if (this.stopReason || this.settled) return;
    this.stopReason = reason;
    if (this.exit) {
      this.finish();
      return;
    }
    this.child.kill('SIGTERM');
    this.killTimer = setTimeout(() => this.child.kill('SIGKILL'), CLAUDE_CODE_KILL_GRACE_MS);
  }

  private finish(): void {
    if (this.stopReason) this.settle({ kind: this.stopReason });
    else if (this.exit)
      this.settle({
        kind: 'exited',
        ...this.exit,
        stdout: Buffer.concat(this.stdout).toString('utf8'),
        stderr: this.stderr,
      });
  }

  private settle(outcome: CliOutcome): void {
    if (this.settled) return;
    this.settled = true;
    this.options.signal?.removeEventListener('abort', this.onAbort);
    clearTimeout(this.timeoutTimer);
    clearInterval(this.heartbeatTimer);
    clearTimeout(this.drainTimer);
    this.resolve(outcome);
  }
}
