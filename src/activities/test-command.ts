/**
 * Runs a spec's test command in a worktree, for real, so that "the tests pass" is never an agent's word.
 *
 * The command comes from a spec, which users write, so the worker admits only the argv prefixes listed in
 * `TREADLE_TDD_TEST_COMMANDS`, optionally followed by relative test file paths. It runs without a shell, in
 * its own process group (a timeout or a cancellation kills everything it started), with an allow-listed
 * environment (the worker's secrets stay out). Its output is kept up to a size, head and tail; TAP lines
 * (what `node --test` prints when its output is not a terminal) become the list of tests.
 */
import { spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import type { Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import path from 'node:path';
import { utf8Cut } from '../model/limits';

/** The worker's allow-list of test commands: a JSON array of argv arrays, e.g. `[["node","--test"],["npm","test"]]`. */
export const TEST_COMMANDS_ENV = 'TREADLE_TDD_TEST_COMMANDS';
/** The allow-list when `TREADLE_TDD_TEST_COMMANDS` is not set. */
export const DEFAULT_TEST_COMMANDS: readonly (readonly string[])[] = [['node', '--test']];
/** The only variables of the worker's environment a test command sees (plus those passed explicitly). */
export const PASSED_ENV = ['PATH', 'HOME', 'LANG', 'TMPDIR'] as const;

/** Default cap of the output kept. */
const DEFAULT_MAX_OUTPUT_BYTES = 1024 * 1024;
/** After the command exits or is killed, wait this long for its output to end (a grandchild may hold it). */
const OUTPUT_GRACE_MS = 2_000;
/** Test results parsed from TAP, at most. */
const MAX_PARSED_TESTS = 10_000;
/** The command as shown in a summary is cut to this many characters. */
const MAX_SUMMARY_COMMAND_CHARS = 80;

/** One test as TAP reported it; `ok` is true for passed, skipped and to-do tests. */
export interface TestResult {
  name: string;
  ok: boolean;
}

/** What a test run did. `passed` is exit code 0, not timed out and not killed, whatever the output says. */
export interface TestRun {
  passed: boolean;
  exitCode: number | null;
  /** The signal that ended the command, if one did. */
  signal: string | null;
  timedOut: boolean;
  durationMs: number;
  /** stdout and stderr as they arrived; when longer than the cap, its head and tail around a note. */
  output: string;
  outputTruncated: boolean;
  /** Leaf tests, plus any failing test none of whose subtests failed (so every failure is named once). */
  tests: TestResult[];
  /** One line, e.g. `3 passed, 1 failed (node --test, exit 1, 412 ms)`. */
  summary: string;
}

/** Input of {@link runTestCommand}. */
export interface RunTestCommandInput {
  cwd: string;
  /** argv, checked with {@link checkTestCommand} by the caller. */
  command: string[];
  timeoutMs: number;
  /** Output kept, default 1 MiB. */
  maxOutputBytes?: number;
  /** Variables for the command, on top of PATH, HOME, LANG and TMPDIR from the worker. */
  env?: NodeJS.ProcessEnv;
  /** Aborting kills the command's process group and rejects with an `AbortError`. */
  signal?: AbortSignal;
}

/** The allow-list configured on the worker; an unparsable `TREADLE_TDD_TEST_COMMANDS` throws. */
export function allowedTestCommands(env: NodeJS.ProcessEnv = process.env): string[][] {
  return commandList(env, TEST_COMMANDS_ENV, DEFAULT_TEST_COMMANDS);
}

/** An allow-list of argv prefixes from the JSON in `env[name]` (`defaults` when unset); an unparsable one throws. */
export function commandList(
  env: NodeJS.ProcessEnv,
  name: string,
  defaults: readonly (readonly string[])[],
): string[][] {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return defaults.map((c) => [...c]);
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (error) {
    throw new Error(
      `${name} is not valid JSON (${(error as Error).message}); expected an array of argv arrays such as [["node","--test"]]`,
    );
  }
  const valid =
    Array.isArray(parsed) &&
    parsed.every((c) => Array.isArray(c) && c.length > 0 && c.every((a) => typeof a === 'string' && a !== ''));
  if (!valid)
    throw new Error(
      `${name} must be a JSON array of non-empty argv arrays of strings, such as [["node","--test"],["npm","test"]]`,
    );
  return parsed as string[][];
}

/**
 * Null when `command` is allowed: exactly one of `allowed`, or one followed by relative file paths (no
 * `..`, not starting with "-"). Otherwise the reason, naming the allowed commands.
 */
export function checkTestCommand(command: string[], allowed: string[][]): string | null {
  return checkCommand(command, allowed, {
    what: 'test command',
    env: TEST_COMMANDS_ENV,
    args: 'relative test file paths',
  });
}

/** {@link checkTestCommand} for any kind of command: `label` names it, its allow-list and its arguments. */
export function checkCommand(
  command: string[],
  allowed: string[][],
  label: { what: string; env: string; args: string },
): string | null {
  const listed = allowed.map((c) => JSON.stringify(c)).join(', ') || '(none)';
  const refuse = (why: string): string =>
    `the ${label.what} ${JSON.stringify(command)} is not allowed: ${why}. Allowed (${label.env}): ${listed}, each optionally followed by ${label.args}`;
  if (!Array.isArray(command) || command.length === 0 || !command.every((a) => typeof a === 'string'))
    return refuse('it must be a non-empty argv array of strings');
  let best: string | undefined;
  for (const prefix of allowed) {
    if (prefix.length > command.length || !prefix.every((arg, i) => command[i] === arg)) continue;
    const problem = command
      .slice(prefix.length)
      .map(fileArgumentProblem)
      .find((p) => p !== undefined);
    if (!problem) return null;
    best ??= problem;
  }
  return refuse(best ?? 'it starts with none of the allowed commands');
}

/** Why `arg` is not a plain relative file path, or undefined when it is one. */
function fileArgumentProblem(arg: string): string | undefined {
  if (arg === '' || arg.startsWith('-')) return `the extra argument ${JSON.stringify(arg)} is not a file path`;
  if (arg.includes('\0') || path.posix.isAbsolute(arg) || path.win32.isAbsolute(arg) || /^[a-zA-Z]:/.test(arg))
    return `the extra argument ${JSON.stringify(arg)} must be a relative path`;
  if (arg.split(/[/\\]/).includes('..')) return `the extra argument ${JSON.stringify(arg)} must not contain ".."`;
  return undefined;
}

/**
 * Runs `command` in `cwd` (no shell, its own process group) and reports what happened. A timeout kills the
 * whole group (SIGKILL) and is reported as `timedOut`, not thrown; so is anything the command left running
 * when it exited. A command that cannot start (not installed, no such folder) throws; a cancellation
 * through `signal` kills the group and rejects with an `AbortError`.
 */
export async function runTestCommand(input: RunTestCommandInput): Promise<TestRun> {
  const { command, signal } = input;
  const [file, ...args] = command;
  if (file === undefined) throw new Error('the test command is empty');
  if (signal?.aborted) throw abortError(signal);
  const started = performance.now();
  const output = new HeadTailBuffer(input.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES);
  const tap = new TapParser();
  const { child, exited } = await startCommand(file, args, input);

  const killGroup = (): void => {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    } catch {
      // The group is gone already.
    }
  };
  let timedOut = false;
  let aborted = false;
  const timer = setTimeout(() => {
    timedOut = true;
    killGroup();
  }, input.timeoutMs);
  const onAbort = (): void => {
    aborted = true;
    killGroup();
  };
  signal?.addEventListener('abort', onAbort, { once: true });
  if (signal?.aborted) onAbort();

  const decoder = new StringDecoder('utf8');
  child.stdout.on('data', (chunk: Buffer) => {
    output.push(chunk);
    tap.push(decoder.write(chunk));
  });
  child.stderr.on('data', (chunk: Buffer) => output.push(chunk));

  const [exitCode, exitSignal] = await exited;
  clearTimeout(timer);
  signal?.removeEventListener('abort', onAbort);
  // Whatever the command started and left behind goes with it.
  killGroup();
  await outputEnded([child.stdout, child.stderr]);
  tap.push(decoder.end());
  tap.end();

  if (aborted && signal) throw abortError(signal);
  const durationMs = Math.round(performance.now() - started);
  return {
    passed: exitCode === 0 && !timedOut,
    exitCode,
    signal: exitSignal,
    timedOut,
    durationMs,
    output: output.text(),
    outputTruncated: output.truncated,
    tests: tap.results(),
    summary: summarize({
      command,
      exitCode,
      signal: exitSignal,
      timedOut,
      durationMs,
      timeoutMs: input.timeoutMs,
      counts: tap.counts(),
    }),
  };
}

/**
 * Starts `file` in `input.cwd` in a process group of its own; resolves once it runs, with its exit to come
 * (listened for from the start, so an early exit is not missed), and rejects when it cannot start.
 */
async function startCommand(file: string, args: string[], input: RunTestCommandInput) {
  const child = spawn(file, args, {
    cwd: input.cwd,
    env: testEnv(input.env),
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    windowsHide: true,
  });
  const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
    child.once('exit', (code, sig) => resolve([code, sig])),
  );
  await new Promise<void>((resolve, reject) => {
    child.once('spawn', resolve);
    child.once('error', (error) =>
      reject(new Error(`the test command ${file} could not start in ${input.cwd}: ${error.message}`)),
    );
  });
  child.on('error', () => undefined); // started: failures show as the exit code
  return { child, exited };
}

function abortError(signal: AbortSignal): Error {
  const error = new Error('the test run was cancelled', { cause: signal.reason });
  error.name = 'AbortError';
  return error;
}

/** PATH, HOME, LANG and TMPDIR from the worker, then what the caller passes. */
function testEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const name of PASSED_ENV) if (process.env[name] !== undefined) env[name] = process.env[name];
  return { ...env, ...extra };
}

/** Waits until both streams end, at most {@link OUTPUT_GRACE_MS}, then stops reading them. */
async function outputEnded(streams: Readable[]): Promise<void> {
  const ended = streams.map((s) =>
    s.readableEnded || s.destroyed
      ? Promise.resolve()
      : new Promise<void>((resolve) => s.once('end', resolve).once('close', resolve)),
  );
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    Promise.all(ended),
    new Promise<void>((resolve) => (timer = setTimeout(resolve, OUTPUT_GRACE_MS))),
  ]);
  clearTimeout(timer);
  for (const s of streams) s.destroy();
}

function summarize(run: {
  command: string[];
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  durationMs: number;
  timeoutMs: number;
  counts: TapCounts;
}): string {
  const shown = run.command.join(' ');
  const commandText =
    shown.length > MAX_SUMMARY_COMMAND_CHARS ? `${shown.slice(0, MAX_SUMMARY_COMMAND_CHARS - 1)}…` : shown;
  const { passed, failed, skipped } = run.counts;
  const counted =
    passed + failed + skipped > 0
      ? `${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ''}`
      : 'no test results';
  if (run.timedOut) return `timed out after ${formatSeconds(run.timeoutMs)} (${commandText}; ${counted} before)`;
  const ending = run.exitCode !== null ? `exit ${run.exitCode}` : `killed by ${run.signal ?? 'a signal'}`;
  return `${counted} (${commandText}, ${ending}, ${run.durationMs} ms)`;
}

function formatSeconds(ms: number): string {
  return `${Number((ms / 1000).toFixed(ms < 10_000 ? 1 : 0))} s`;
}

/** Keeps the first and the last bytes of a stream, up to a total, and counts what it drops. */
class HeadTailBuffer {
  private readonly headLimit: number;
  private readonly tailLimit: number;
  private head: Buffer[] = [];
  private headSize = 0;
  private tail: Buffer[] = [];
  private tailSize = 0;
  private total = 0;

  constructor(limit: number) {
    this.headLimit = Math.ceil(limit / 2);
    this.tailLimit = Math.floor(limit / 2);
  }

  get truncated(): boolean {
    return this.total > this.headLimit + this.tailLimit;
  }

  push(chunk: Buffer): void {
    this.total += chunk.length;
    const toHead = Math.min(chunk.length, this.headLimit - this.headSize);
    if (toHead > 0) {
      this.head.push(chunk.subarray(0, toHead));
      this.headSize += toHead;
    }
    const rest = chunk.subarray(toHead);
    if (rest.length === 0 || this.tailLimit === 0) return;
    this.tail.push(rest);
    this.tailSize += rest.length;
    while (this.tailSize - (this.tail[0]?.length ?? 0) >= this.tailLimit) this.tailSize -= this.tail.shift()!.length;
  }

  text(): string {
    const head = Buffer.concat(this.head);
    let tail = Buffer.concat(this.tail);
    if (!this.truncated) return Buffer.concat([head, tail]).toString('utf8');
    tail = tail.subarray(tail.length - this.tailLimit);
    const omitted = this.total - head.length - tail.length;
    // Whole characters only: the partial one at each cut is dropped.
    const headText = head.subarray(0, utf8Cut(head, head.length, 'head')).toString('utf8');
    const tailText = tail.subarray(utf8Cut(tail, 0, 'tail')).toString('utf8');
    return `${headText}\n[… ${omitted} bytes of output omitted …]\n${tailText}`;
  }
}

interface TapCounts {
  passed: number;
  failed: number;
  skipped: number;
}

interface TapEntry {
  indent: number;
  name: string;
  ok: boolean;
  directive: 'skip' | 'todo' | undefined;
  hasChildren: boolean;
  childFailed: boolean;
}

/**
 * Reads TAP as it streams: `ok N - name` / `not ok N - name`, at any indentation (node prints subtests
 * indented, before their parent's line). YAML diagnostics and comments (`# Subtest: …`) are skipped.
 */
class TapParser {
  private pending = '';
  private inYaml = false;
  private lastTestIndent: number | undefined;
  private readonly entries: TapEntry[] = [];
  /** Entries not yet claimed by a parent line, innermost last. */
  private readonly open: TapEntry[] = [];

  push(text: string): void {
    const lines = (this.pending + text).split('\n');
    this.pending = lines.pop() ?? '';
    for (const line of lines) this.line(line.replace(/\r$/, ''));
  }

  end(): void {
    if (this.pending !== '') this.line(this.pending);
    this.pending = '';
  }

  /** Leaf tests, and failing tests whose failure is not one of their subtests'. */
  results(): TestResult[] {
    return this.entries
      .filter((e) => !e.hasChildren || (!e.ok && !e.childFailed))
      .map((e) => ({ name: e.name, ok: e.ok }));
  }

  counts(): TapCounts {
    const counts: TapCounts = { passed: 0, failed: 0, skipped: 0 };
    for (const e of this.entries.filter((x) => !x.hasChildren || (!x.ok && !x.childFailed))) {
      if (e.directive) counts.skipped++;
      else if (e.ok) counts.passed++;
      else counts.failed++;
    }
    return counts;
  }

  private line(line: string): void {
    const trimmed = line.trim();
    if (this.inYaml) {
      if (trimmed === '...') this.inYaml = false;
      return;
    }
    // A YAML block belongs to the test line just before it, indented deeper.
    const lastIndent = this.lastTestIndent;
    this.lastTestIndent = undefined;
    if (trimmed === '---' && lastIndent !== undefined && line.indexOf('-') > lastIndent) {
      this.inYaml = true;
      return;
    }
    const match = /^(\s*)(not ok|ok)\b(?:\s+\d+)?(?:\s*-)?\s*(.*)$/.exec(line);
    if (!match || this.entries.length >= MAX_PARSED_TESTS) return;
    const indent = match[1]!.length;
    const { name, directive } = splitDirective(match[3]!);
    const entry: TapEntry = {
      indent,
      name,
      ok: match[2] === 'ok' || directive !== undefined,
      directive,
      hasChildren: false,
      childFailed: false,
    };
    while (this.open.length > 0 && this.open[this.open.length - 1]!.indent > indent) {
      const child = this.open.pop()!;
      entry.hasChildren = true;
      if (!child.ok) entry.childFailed = true;
    }
    this.open.push(entry);
    this.entries.push(entry);
    this.lastTestIndent = indent;
  }
}

/** `name # SKIP reason` → name and directive; TAP escapes (`\#`, `\\`, `\n`) undone in the name. */
function splitDirective(text: string): { name: string; directive: 'skip' | 'todo' | undefined } {
  let cut = -1;
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '\\') i++;
    else if (text[i] === '#') {
      cut = i;
      break;
    }
  }
  const rawName = (cut < 0 ? text : text.slice(0, cut)).trim();
  const comment =
    cut < 0
      ? ''
      : text
          .slice(cut + 1)
          .trim()
          .toLowerCase();
  const directive = comment.startsWith('skip') ? 'skip' : comment.startsWith('todo') ? 'todo' : undefined;
  const name = rawName.replace(/\\(.)/g, (_, c: string) => ({ n: '\n', t: '\t', r: '\r' })[c] ?? c);
  return { name, directive };
}
