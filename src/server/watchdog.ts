/**
 * Runs a server process so that it goes away with the process that started it, however that process ends:
 * `process.on('exit')` handlers do not run on SIGKILL, an out-of-memory kill or a native crash, and an
 * orphaned dev server keeps the port and the SQLite file.
 *
 * The server runs under a small watchdog (a second Node process running {@link WATCHDOG_SCRIPT}) whose stdin
 * is a pipe from this process. Nothing is ever written to it; when this process ends, in whatever way, the
 * kernel closes its end, the watchdog reads end-of-file and stops the server: SIGTERM, then SIGKILL after a
 * grace period. SIGTERM/SIGINT/SIGHUP sent to the watchdog are forwarded the same way, which is how
 * {@link WatchedProcess.stop} stops the server gracefully. The watchdog and the server get their own process
 * group, so a Ctrl-C in the terminal reaches only Treadle, which stops its worker before the server.
 * Plain Node and POSIX pipes: no native addon, Linux and macOS alike.
 */
import { spawn } from 'node:child_process';
import { appendFileSync, closeSync, openSync, readSync, statSync } from 'node:fs';
import { createInterface } from 'node:readline';

/**
 * The watchdog, run with `node -e` so it works from the sources (tests) and from the build alike. Its one
 * argument is JSON `{ command, args, logFile, graceMs, env, uid, gid, stopSignal }`; it reports on stdout, one JSON line per event:
 * `{"event":"started","pid":…}`, then `{"event":"exited","code":…,"signal":…}` or `{"event":"error",…}`.
 */
export const WATCHDOG_SCRIPT = `// treadle: the dev server's watchdog, stops it when treadle ends
'use strict';
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const { command, args, logFile, graceMs, env, uid, gid, stopSignal } = JSON.parse(process.argv[1]);
process.stdout.on('error', () => undefined);
const report = (message, then) => process.stdout.write(JSON.stringify(message) + '\\n', then);
const log = fs.openSync(logFile, 'a');
const as = uid === undefined ? {} : { uid, gid };
const server = spawn(command, args, { stdio: ['ignore', log, log], env: { ...process.env, ...env }, ...as });
fs.closeSync(log);
let stopping = false;
function stop(signal) {
  if (stopping) return;
  stopping = true;
  server.kill(signal);
  setTimeout(() => server.kill('SIGKILL'), graceMs);
}
server.on('spawn', () => report({ event: 'started', pid: server.pid }));
server.on('error', (error) => {
  report({ event: 'error', message: error.message }, () => process.exit(1));
});
server.on('exit', (code, signal) => {
  report({ event: 'exited', code, signal }, () => process.exit(0));
});
process.stdin.on('end', () => stop(stopSignal));
process.stdin.on('close', () => stop(stopSignal));
process.stdin.on('error', () => stop(stopSignal));
process.stdin.resume();
process.on('SIGTERM', () => stop(stopSignal));
process.on('SIGINT', () => stop(stopSignal === 'SIGTERM' ? 'SIGINT' : stopSignal));
process.on('SIGHUP', () => stop(stopSignal));
`;

/** How long the server has to stop after SIGTERM before the watchdog kills it. */
export const SERVER_STOP_GRACE_MS = 10_000;
/** How much longer this process waits for the watchdog before killing its whole process group. */
const WATCHDOG_EXTRA_MS = 5_000;

/** Options for {@link startWatched}. */
export interface WatchedOptions {
  command: string;
  args: string[];
  /** Receives the server's stdout and stderr (appended). */
  logFile: string;
  graceMs?: number;
  /** Variables added to the server's environment (this process's own, which it inherits). */
  env?: Record<string, string>;
  /** Run the server as this user and group (PostgreSQL, which refuses root). */
  uid?: number;
  gid?: number;
  /** The signal that asks the server to stop (default SIGTERM; PostgreSQL's fast shutdown is SIGINT). */
  stopSignal?: NodeJS.Signals;
}

/** A server process running under the watchdog. */
export interface WatchedProcess {
  /** The watchdog's process id (also its process group id). */
  readonly watchdogPid: number;
  /** Resolves with the server's process id once it runs; rejects when it could not be started. */
  readonly started: Promise<number>;
  /** The server's process id once known. */
  pid(): number | undefined;
  /** Why the server is not running any more (`exited with code 1`, …), or undefined while it runs. */
  exited(): string | undefined;
  /** The last lines of the server's log (and of the watchdog's own errors), a Go crash's reason first, for error messages. */
  logTail(lines?: number): string;
  /** Stops the server (SIGTERM, then SIGKILL after the grace period) and resolves once it is gone. */
  stop(): Promise<void>;
}

/** Starts `command` under the watchdog; see the module comment for the guarantees. */
export function startWatched(options: WatchedOptions): WatchedProcess {
  const graceMs = options.graceMs ?? SERVER_STOP_GRACE_MS;
  // A marker in the (appended) log, so error messages quote this run's lines only.
  const marker = `--- ${new Date().toISOString()} treadle starts ${options.command} ---`;
  appendFileSync(options.logFile, `${marker}\n`);
  const watchdog = spawn(process.execPath, ['-e', WATCHDOG_SCRIPT, watchdogArgument(options, graceMs)], {
    stdio: ['pipe', 'pipe', 'pipe'],
    detached: true,
  });
  // The pipe is only a lifeline: never written, never ended until this process is gone or stop() runs.
  watchdog.stdin!.on('error', () => undefined);
  let watchdogErrors = '';
  watchdog.stderr!.on('data', (chunk: Buffer) => (watchdogErrors = (watchdogErrors + chunk.toString()).slice(-4_000)));

  let exited: string | undefined;
  let serverPid: number | undefined;
  let onStarted: (pid: number) => void = () => undefined;
  let onFailed: (error: Error) => void = () => undefined;
  const started = new Promise<number>((resolve, reject) => {
    onStarted = resolve;
    onFailed = reject;
  });
  started.catch(() => undefined); // callers may only look at exited()

  createInterface({ input: watchdog.stdout! }).on('line', (line) => {
    let message: { event?: string; pid?: number; code?: number | null; signal?: string | null; message?: string };
    try {
      message = JSON.parse(line) as typeof message;
    } catch {
      return;
    }
    if (message.event === 'started' && typeof message.pid === 'number') {
      serverPid = message.pid;
      onStarted(message.pid);
    } else if (message.event === 'error') {
      exited = `could not be started: ${message.message}`;
      onFailed(new Error(`${options.command} ${exited}`));
    } else if (message.event === 'exited') exited = `exited with ${message.signal ?? `code ${message.code}`}`;
  });
  let gone: () => void = () => undefined;
  const watchdogGone = new Promise<void>((resolve) => (gone = resolve));
  // 'close', not 'exit': the server's last report on stdout has been read by then.
  watchdog.once('close', (code, signal) => {
    exited ??= `is gone: its watchdog ${signal ? `was killed by ${signal}` : `exited with code ${code}`}${watchdogErrors ? ` (${watchdogErrors.trim().split('\n')[0]})` : ''}`;
    onFailed(new Error(`${options.command} ${exited}`));
    gone();
  });
  watchdog.once('error', (error) => {
    exited ??= `could not be started: the watchdog failed: ${error.message}`;
    onFailed(new Error(exited));
    gone();
  });

  let stopping: Promise<void> | undefined;
  return {
    watchdogPid: watchdog.pid ?? -1,
    started,
    pid: () => serverPid,
    exited: () => exited,
    logTail: (lines = 5) => lastLines([tailOf(options.logFile).split(marker).pop()!, watchdogErrors].join('\n'), lines),
    stop: () =>
      (stopping ??= (async () => {
        if (watchdog.exitCode === null && watchdog.signalCode === null) watchdog.kill('SIGTERM');
        // Last resort if the watchdog itself hangs: its whole process group, the server included.
        const timer = setTimeout(() => killGroup(watchdog.pid), graceMs + WATCHDOG_EXTRA_MS);
        await watchdogGone;
        clearTimeout(timer);
        watchdog.stdin!.destroy();
      })()),
  };
}

/** The watchdog's one argument: what to run and how (see {@link WATCHDOG_SCRIPT}). */
function watchdogArgument(options: WatchedOptions, graceMs: number): string {
  const { command, args, logFile, env = {}, uid, gid, stopSignal = 'SIGTERM' } = options;
  return JSON.stringify({ command, args, logFile, graceMs, env, uid, gid, stopSignal });
}

function killGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

/** The last 4 KB of a file, or '' when it cannot be read. */
/** The last `lines` non-empty lines of `text`; a Go crash's reason (its first line) first, the trace's end after. */
function lastLines(text: string, lines: number): string {
  const all = text.split('\n').filter((line) => line.trim() !== '');
  const crash = all.findIndex((line) => /^(panic|fatal error): /.test(line));
  const tail = all.slice(-lines);
  return (crash >= 0 && crash < all.length - lines ? [all[crash]!, '...', ...tail.slice(1)] : tail).join('\n');
}

function tailOf(file: string): string {
  try {
    const size = statSync(file).size;
    const length = Math.min(size, 4_000);
    const buffer = Buffer.alloc(length);
    const fd = openSync(file, 'r');
    try {
      readSync(fd, buffer, 0, length, size - length);
    } finally {
      closeSync(fd);
    }
    return buffer.toString();
  } catch {
    return '';
  }
}
