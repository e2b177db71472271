/**
 * Running git for the TDD tree (seed 001): the one place that starts git, and the small questions every git
 * operation asks (HEAD, a commit a name points at, a path in the git directory, a rebase in progress).
 *
 * git runs through `execFile` with argv arrays (never a shell), without prompts or editors, with a fixed
 * identity (`TREADLE_GIT_AUTHOR_NAME` / `TREADLE_GIT_AUTHOR_EMAIL`) and without commit signing. Operations on
 * one worktree must not run concurrently: git's index lock makes the second one fail. The operations built on
 * it live beside it: `worktrees.ts`, `commits.ts`, `merge-rebase.ts` and `worktree-changes.ts`.
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { resolveInside } from '../../../agents/worktree-files';
import { utf8Cut } from '../../../model/limits';

/** Overrides the name Treadle commits under. */
export const GIT_AUTHOR_NAME_ENV = 'TREADLE_GIT_AUTHOR_NAME';
/** Overrides the e-mail address Treadle commits under. */
export const GIT_AUTHOR_EMAIL_ENV = 'TREADLE_GIT_AUTHOR_EMAIL';

/** A git command that runs longer is killed (a hung hook or filesystem, not a slow repository). */
const DEFAULT_GIT_TIMEOUT_MS = 120_000;
/** Output larger than this fails the command instead of filling the worker's memory. */
const MAX_GIT_OUTPUT_BYTES = 64 * 1024 * 1024;
/** Error messages quote this many lines of git's output. */
export const ERROR_OUTPUT_LINES = 4;
/** Environment variables that would point git at another repository than the one asked for. */
const REPOSITORY_ENV = [
  'GIT_DIR',
  'GIT_WORK_TREE',
  'GIT_INDEX_FILE',
  'GIT_COMMON_DIR',
  'GIT_OBJECT_DIRECTORY',
  'GIT_ALTERNATE_OBJECT_DIRECTORIES',
  'GIT_NAMESPACE',
  'GIT_PREFIX',
];

/** A git command failed: which one, its exit code (null when it was killed or never started) and stderr. */
export class GitError extends Error {
  override name = 'GitError';
  constructor(
    readonly args: string[],
    readonly exitCode: number | null,
    readonly stderr: string,
    detail?: string,
  ) {
    super(detail ?? `git ${args[0] ?? ''} failed (exit ${exitCode ?? 'none'}): ${firstLines(stderr) || '(no output)'}`);
  }
}

/** Options of {@link git}. */
export interface GitOptions {
  /** Kill git after this long (default 120 s). */
  timeoutMs?: number;
  /** Added to the worker's environment (after Treadle's own settings, so it can override them). */
  env?: NodeJS.ProcessEnv;
}

/** What a git command printed and how it exited. */
export interface GitOutput {
  stdout: string;
  stderr: string;
  exitCode: number;
}

/**
 * Runs `git <args>` in `cwd` and returns its stdout without the final newline; a non-zero exit, a timeout or
 * more than 64 MiB of output throws a {@link GitError}.
 */
export async function git(cwd: string, args: string[], options: GitOptions = {}): Promise<string> {
  const out = await runGit(cwd, args, options);
  if (out.exitCode !== 0) throw failed(args, out);
  return out.stdout;
}

/** The error for a git command that exited non-zero (quoting stdout when stderr is empty). */
export function failed(args: string[], out: GitOutput): GitError {
  const report = out.stderr.trim() !== '' ? out.stderr : out.stdout;
  return new GitError(
    args,
    out.exitCode,
    out.stderr,
    `git ${args[0] ?? ''} failed (exit ${out.exitCode}): ${firstLines(report) || '(no output)'}`,
  );
}

/** Like {@link git}, but a non-zero exit is returned rather than thrown (for commands that answer with it). */
export function runGit(cwd: string, args: string[], options: GitOptions = {}): Promise<GitOutput> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_GIT_TIMEOUT_MS;
  return new Promise((resolve, reject) => {
    execFile(
      'git',
      gitArgv(args, options.env),
      {
        cwd,
        env: gitEnv(options.env),
        timeout: timeoutMs,
        maxBuffer: MAX_GIT_OUTPUT_BYTES,
        encoding: 'utf8',
        windowsHide: true,
      },
      (error, stdout, stderr) => {
        if (!error) return resolve({ stdout: stripFinalNewline(stdout), stderr, exitCode: 0 });
        const failure = error as NodeJS.ErrnoException & {
          code?: number | string;
          killed?: boolean;
          signal?: string | null;
        };
        if (typeof failure.code === 'number')
          return resolve({ stdout: stripFinalNewline(stdout), stderr, exitCode: failure.code });
        const sub = args[0] ?? '';
        if (failure.code === 'ERR_CHILD_PROCESS_STDIO_MAXBUFFER')
          return reject(new GitError(args, null, stderr, `git ${sub} printed more than ${MAX_GIT_OUTPUT_BYTES} bytes`));
        if (failure.killed && failure.signal)
          return reject(
            new GitError(args, null, stderr, `git ${sub} timed out after ${Math.round(timeoutMs / 1000)} s`),
          );
        if (failure.signal)
          return reject(new GitError(args, null, stderr, `git ${sub} was killed (${failure.signal})`));
        reject(new GitError(args, null, stderr, `git ${sub} could not run in ${cwd}: ${failure.message}`));
      },
    );
  });
}

/** Treadle's fixed settings in front of the caller's arguments. */
function gitArgv(args: string[], env?: NodeJS.ProcessEnv): string[] {
  const merged = { ...process.env, ...env };
  const name = merged[GIT_AUTHOR_NAME_ENV] || 'Treadle';
  const email = merged[GIT_AUTHOR_EMAIL_ENV] || 'treadle@localhost';
  // No hooks at all (post-checkout runs on `worktree add`, post-merge on merges): a repository's hooks are
  // its owner's code, and the agents' files never reach .git, so nothing they write runs through git.
  return [
    '-c',
    `user.name=${name}`,
    '-c',
    `user.email=${email}`,
    '-c',
    'commit.gpgsign=false',
    '-c',
    'core.quotePath=false',
    '-c',
    'core.hooksPath=/dev/null',
    ...args,
  ];
}

function gitEnv(env?: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const base: NodeJS.ProcessEnv = { ...process.env };
  for (const name of REPOSITORY_ENV) delete base[name];
  // No prompts, no editor (":" is git's own no-op editor), no optional index locks, English messages.
  return { ...base, GIT_TERMINAL_PROMPT: '0', GIT_EDITOR: ':', GIT_OPTIONAL_LOCKS: '0', LC_ALL: 'C', ...env };
}

/** The commit HEAD points at in `worktree`. */
export async function headCommit(worktree: string): Promise<string> {
  return git(worktree, ['rev-parse', '--verify', 'HEAD^{commit}']);
}

/** Whether `refs/heads/<branch>` exists in `repo`. */
export async function branchExists(repo: string, branch: string): Promise<boolean> {
  const out = await runGit(repo, ['show-ref', '--verify', '--quiet', `refs/heads/${branch}`]);
  if (out.exitCode === 0) return true;
  if (out.exitCode === 1) return false;
  throw failed(['show-ref', branch], out);
}

/** The commit `rev` names (a branch, tag or commit), refusing anything git would read as an option. */
export async function resolveCommit(cwd: string, rev: string): Promise<string> {
  if (rev === '' || rev.startsWith('-')) throw new Error(`"${rev}" is not a branch or commit`);
  const out = await runGit(cwd, ['rev-parse', '--verify', '--quiet', '--end-of-options', `${rev}^{commit}`]);
  if (out.exitCode !== 0)
    throw new GitError(['rev-parse', rev], out.exitCode, out.stderr, `"${rev}" is not a branch or commit in ${cwd}`);
  return out.stdout;
}

/** The path of `name` inside the worktree's own git directory. */
export async function gitPath(worktree: string, name: string): Promise<string> {
  return path.resolve(worktree, await git(worktree, ['rev-parse', '--git-path', name]));
}

/** Whether a rebase is stopped half way in `worktree`. */
export async function rebaseInProgress(worktree: string): Promise<boolean> {
  return existsSync(await gitPath(worktree, 'rebase-merge')) || existsSync(await gitPath(worktree, 'rebase-apply'));
}

/**
 * Makes `dir` a repository on branch `main` with `files` (relative path → content) in a first commit, and
 * returns that commit. For tests and examples.
 */
export async function initRepository(dir: string, files: Record<string, string> = {}): Promise<string> {
  await mkdir(dir, { recursive: true });
  await git(dir, ['init', '--quiet', '--initial-branch=main']);
  for (const [relative, content] of Object.entries(files)) {
    const target = resolveInside(dir, relative);
    await mkdir(path.dirname(target), { recursive: true });
    await writeFile(target, content);
  }
  await git(dir, ['add', '--all']);
  await git(dir, ['commit', '--quiet', '--no-verify', '--allow-empty', '-m', 'Initial commit']);
  return headCommit(dir);
}

/** Runs git and keeps at most `maxBytes` of its stdout (stopping it once it has printed more). */
export function gitPrefix(
  cwd: string,
  args: string[],
  maxBytes: number,
): Promise<{ text: string; truncated: boolean }> {
  return new Promise((resolve, reject) => {
    const child = spawn('git', gitArgv(args), {
      cwd,
      env: gitEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
      windowsHide: true,
    });
    const chunks: Buffer[] = [];
    let size = 0;
    let truncated = false;
    let stderr = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), DEFAULT_GIT_TIMEOUT_MS);
    child.stdout.on('data', (chunk: Buffer) => {
      if (truncated) return;
      chunks.push(chunk);
      size += chunk.length;
      if (size > maxBytes) {
        truncated = true;
        child.kill();
      }
    });
    child.stderr.on('data', (chunk: Buffer) => {
      if (stderr.length < 10_000) stderr += chunk.toString('utf8');
    });
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(new GitError(args, null, stderr, `git ${args[0] ?? ''} could not run in ${cwd}: ${error.message}`));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const all = Buffer.concat(chunks);
      if (truncated) return resolve({ text: cutAtLine(all, maxBytes), truncated: true });
      if (code !== 0)
        return reject(
          new GitError(args, code, stderr, signal ? `git ${args[0] ?? ''} was killed (${signal})` : undefined),
        );
      resolve({ text: stripFinalNewline(all.toString('utf8')), truncated: false });
    });
  });
}

/** The first `max` bytes of `bytes`, ending at the last line end in them when there is one. */
function cutAtLine(bytes: Buffer, max: number): string {
  const head = bytes.subarray(0, max);
  const lineEnd = head.lastIndexOf(0x0a);
  if (lineEnd > 0) return head.subarray(0, lineEnd + 1).toString('utf8');
  return head.subarray(0, utf8Cut(head, head.length, 'head')).toString('utf8');
}

/** The entries of `-z` output (NUL-separated, empty ones dropped). */
export function splitNul(text: string): string[] {
  return text.split('\0').filter((s) => s !== '');
}

function stripFinalNewline(text: string): string {
  return text.endsWith('\n') ? text.slice(0, -1) : text;
}

function firstLines(text: string): string {
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '')
    .slice(0, ERROR_OUTPUT_LINES)
    .join(' | ');
}
