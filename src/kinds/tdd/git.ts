/**
 * Git operations on a real repository for the TDD tree (seed 001): one worktree per node branch, commits,
 * squash merges into the parent's branch and rebases onto it.
 *
 * Every operation is safe to repeat, because Temporal retries an activity that crashed half way:
 *
 * - a worktree is found again at its fixed path, and a directory left by a crashed `worktree add` is removed;
 * - a commit carries a `Treadle-Op: <opKey>` trailer, and a repeated call finds it instead of committing twice;
 * - a squash merge interrupted before its commit, or a rebase left in progress, is undone before trying again;
 * - a conflict leaves the worktree exactly as it was.
 *
 * git runs through `execFile` with argv arrays (never a shell), without prompts or editors, with a fixed
 * identity (`TREADLE_GIT_AUTHOR_NAME` / `TREADLE_GIT_AUTHOR_EMAIL`) and without commit signing. Operations on
 * one worktree must not run concurrently: git's index lock makes the second one fail.
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { lstat, mkdir, realpath, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { resolveInside } from '../../agents/worktree-files';

/** The trailer that names the operation a commit was made for. */
export const OP_TRAILER = 'Treadle-Op';
/** Overrides the name Treadle commits under. */
export const GIT_AUTHOR_NAME_ENV = 'TREADLE_GIT_AUTHOR_NAME';
/** Overrides the e-mail address Treadle commits under. */
export const GIT_AUTHOR_EMAIL_ENV = 'TREADLE_GIT_AUTHOR_EMAIL';

/** A git command that runs longer is killed (a hung hook or filesystem, not a slow repository). */
const DEFAULT_GIT_TIMEOUT_MS = 120_000;
/** Output larger than this fails the command instead of filling the worker's memory. */
const MAX_GIT_OUTPUT_BYTES = 64 * 1024 * 1024;
/** How far back from HEAD a repeated operation looks for its own commit. */
const OP_SEARCH_DEPTH = 200;
/** Default cut of {@link diffText}. */
const DEFAULT_DIFF_MAX_BYTES = 1024 * 1024;
/** Error messages quote this many lines of git's output. */
const ERROR_OUTPUT_LINES = 4;
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

/** A squash merge conflicted; the worktree was restored to its HEAD. `files` are the conflicting paths. */
export class MergeConflictError extends Error {
  override name = 'MergeConflictError';
  constructor(
    readonly files: string[],
    readonly details: string,
  ) {
    super(`the merge conflicts in ${files.join(', ')}`);
  }
}

/** Options of {@link git}. */
export interface GitOptions {
  /** Kill git after this long (default 120 s). */
  timeoutMs?: number;
  /** Added to the worker's environment (after Treadle's own settings, so it can override them). */
  env?: NodeJS.ProcessEnv;
}

interface GitOutput {
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
function failed(args: string[], out: GitOutput): GitError {
  const report = out.stderr.trim() !== '' ? out.stderr : out.stdout;
  return new GitError(
    args,
    out.exitCode,
    out.stderr,
    `git ${args[0] ?? ''} failed (exit ${out.exitCode}): ${firstLines(report) || '(no output)'}`,
  );
}

/** Like {@link git}, but a non-zero exit is returned rather than thrown (for commands that answer with it). */
function runGit(cwd: string, args: string[], options: GitOptions = {}): Promise<GitOutput> {
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

/** Input of {@link ensureWorktree}. */
export interface EnsureWorktreeInput {
  repo: string;
  /** Worktrees live in this folder (relative paths are resolved against `repo`). */
  worktreesDir: string;
  branch: string;
  /** Where a new branch starts: a branch name or a commit. Ignored when the branch exists. */
  base: string;
}

/**
 * The worktree of `branch`, at `<worktreesDir>/<branch with "/" replaced by "__">`, made if missing:
 * `created` is false when it was already there. An existing branch is checked out as it is; a new one
 * starts at `base`. A directory left at the path by a crashed attempt is removed first, and a worktree
 * left detached by a crashed rebase gets its rebase aborted.
 */
export async function ensureWorktree(
  input: EnsureWorktreeInput,
): Promise<{ path: string; head: string; created: boolean }> {
  const { repo, branch } = input;
  await checkBranchName(repo, branch);
  const dir = worktreePathFor(path.resolve(repo, input.worktreesDir), branch);
  let entry = await findWorktree(repo, dir);
  if (entry && (entry.prunable || entry.locked === 'initializing')) {
    // `worktree add` crashed before its checkout finished (git's "initializing" lock), or the folder is gone:
    // unregister it (the prune below finishes the job) and add it again.
    await runGit(repo, ['worktree', 'unlock', dir]);
    await runGit(repo, ['worktree', 'remove', '--force', dir]);
    entry = undefined;
  }
  if (entry && entry.branch !== `refs/heads/${branch}` && (await rebaseInProgress(dir))) {
    await git(dir, ['rebase', '--abort']);
    entry = await findWorktree(repo, dir);
  }
  if (entry) {
    if (entry.branch !== `refs/heads/${branch}`) {
      throw new Error(
        `${dir} is a worktree on ${entry.branch ? entry.branch.replace('refs/heads/', '') : 'a detached HEAD'}, not on ${branch}`,
      );
    }
    return { path: dir, head: await headCommit(dir), created: false };
  }
  await git(repo, ['worktree', 'prune']);
  if (existsSync(dir)) await rm(dir, { recursive: true, force: true });
  await mkdir(path.dirname(dir), { recursive: true });
  if (await branchExists(repo, branch)) {
    await git(repo, ['worktree', 'add', '--quiet', dir, branch]);
  } else {
    const start = await resolveCommit(repo, input.base);
    await git(repo, ['worktree', 'add', '--quiet', '-b', branch, dir, start]);
  }
  return { path: dir, head: await headCommit(dir), created: true };
}

/** Where {@link ensureWorktree} puts the worktree of `branch`. */
export function worktreePathFor(worktreesDir: string, branch: string): string {
  return path.join(worktreesDir, branch.replaceAll('/', '__'));
}

/** Input of {@link commitAll}. */
export interface CommitAllInput {
  worktree: string;
  message: string;
  /** Names the operation; the commit carries it as a `Treadle-Op` trailer. One line, no control characters. */
  opKey: string;
  /** Commit even when nothing changed (default false). */
  allowEmpty?: boolean;
}

/**
 * Commits everything in the worktree (`git add -A`) as `<message>\n\nTreadle-Op: <opKey>`. When a commit
 * with that trailer is among the last 200 reachable from HEAD, it is returned (`created` false) and nothing
 * is committed, even if the worktree changed since. With nothing to commit and no `allowEmpty`, HEAD is
 * returned (`created` false).
 */
export async function commitAll(input: CommitAllInput): Promise<{ commit: string; created: boolean }> {
  const { worktree, message, opKey } = input;
  checkCommitText(message, opKey);
  const found = await findOpCommit(worktree, opKey);
  if (found) return { commit: found, created: false };
  await git(worktree, ['add', '--all']);
  if (!(await hasStagedChanges(worktree)) && !input.allowEmpty)
    return { commit: await headCommit(worktree), created: false };
  return { commit: await commitStaged(worktree, message, opKey), created: true };
}

/** Input of {@link squashMerge}. */
export interface SquashMergeInput {
  /** The worktree of the branch merged into (the parent's). */
  worktree: string;
  /** The branch (or commit) whose changes are merged. */
  branch: string;
  message: string;
  opKey: string;
}

/**
 * Squash-merges `branch` into the branch checked out in `worktree` as one commit `<message>` with the
 * `Treadle-Op` trailer; repeated with the same `opKey`, it returns that commit (`created` false). A merge
 * that changes nothing still commits (empty), so it is recorded once. The worktree must have no
 * uncommitted changes to tracked files (untracked ones are kept). A conflict restores the worktree to its
 * HEAD and throws {@link MergeConflictError}.
 */
export async function squashMerge(input: SquashMergeInput): Promise<{ commit: string; created: boolean }> {
  const { worktree, message, opKey } = input;
  checkCommitText(message, opKey);
  const found = await findOpCommit(worktree, opKey);
  if (found) return { commit: found, created: false };
  const source = await resolveCommit(worktree, input.branch);
  if (await hasTrackedChanges(worktree)) {
    // A squash merge staged but never committed (the attempt crashed in between) is undone and redone.
    if (!existsSync(await gitPath(worktree, 'SQUASH_MSG'))) {
      throw new Error(`cannot merge ${input.branch} into ${worktree}: it has uncommitted changes`);
    }
    await git(worktree, ['reset', '--quiet', '--hard', 'HEAD']);
  }
  const untrackedBefore = await untrackedEntries(worktree);
  const merged = await runGit(worktree, ['-c', 'merge.ff=true', 'merge', '--squash', source]);
  if (merged.exitCode !== 0) {
    const conflicts = await conflictFiles(worktree);
    await restoreHead(worktree, untrackedBefore);
    if (conflicts.length > 0) throw new MergeConflictError(conflicts, conflictDetails(merged));
    throw failed(['merge', '--squash', input.branch], merged);
  }
  return { commit: await commitStaged(worktree, message, opKey), created: true };
}

/** What {@link rebaseOnto} did: rebased (or nothing to do), or a conflict with the worktree left as it was. */
export type RebaseResult =
  { clean: true; newBase: string; changed: boolean } | { clean: false; conflictFiles: string[]; details: string };

/**
 * Rebases the branch checked out in `worktree` onto `onto` (a branch or commit). Already on top of it:
 * nothing happens (`changed` false). A conflict aborts the rebase, so the worktree is as before, and
 * returns the conflicting files and git's report. A rebase left in progress by a crashed attempt is aborted
 * first. The worktree must have no uncommitted changes to tracked files.
 */
export async function rebaseOnto(input: { worktree: string; onto: string }): Promise<RebaseResult> {
  const { worktree } = input;
  if (await rebaseInProgress(worktree)) await git(worktree, ['rebase', '--abort']);
  const onto = await resolveCommit(worktree, input.onto);
  const ancestor = await runGit(worktree, ['merge-base', '--is-ancestor', onto, 'HEAD']);
  if (ancestor.exitCode === 0) return { clean: true, newBase: onto, changed: false };
  if (ancestor.exitCode !== 1) throw failed(['merge-base', '--is-ancestor', input.onto], ancestor);
  if (await hasTrackedChanges(worktree))
    throw new Error(`cannot rebase ${worktree} onto ${input.onto}: it has uncommitted changes`);
  const before = await headCommit(worktree);
  const untrackedBefore = await untrackedEntries(worktree);
  const rebased = await runGit(worktree, [
    '-c',
    'rebase.autoStash=false',
    '-c',
    'rebase.updateRefs=false',
    'rebase',
    '--no-verify',
    onto,
  ]);
  if (rebased.exitCode !== 0) {
    const conflicts = await conflictFiles(worktree);
    if (await rebaseInProgress(worktree)) await git(worktree, ['rebase', '--abort']);
    await removeNewUntracked(worktree, untrackedBefore);
    if (conflicts.length > 0) return { clean: false, conflictFiles: conflicts, details: conflictDetails(rebased) };
    throw failed(['rebase', input.onto], rebased);
  }
  return { clean: true, newBase: onto, changed: (await headCommit(worktree)) !== before };
}

/** Input of {@link diffText}. */
export interface DiffTextInput {
  worktree: string;
  base: string;
  /** Default HEAD. */
  head?: string;
  /** The text is cut (at a line end when possible) to this many bytes; default 1 MiB. */
  maxBytes?: number;
}

/** `git diff <base>..<head>` as text (cut to `maxBytes`, `truncated` then true) and the files it touches. */
export async function diffText(input: DiffTextInput): Promise<{ text: string; truncated: boolean; files: string[] }> {
  const { worktree } = input;
  const base = await resolveCommit(worktree, input.base);
  const head = await resolveCommit(worktree, input.head ?? 'HEAD');
  const range = `${base}..${head}`;
  const files = splitNul(await git(worktree, ['diff', '--name-only', '-z', range]));
  const { text, truncated } = await gitPrefix(
    worktree,
    ['diff', '--no-color', '--no-ext-diff', range],
    input.maxBytes ?? DEFAULT_DIFF_MAX_BYTES,
  );
  return { text, truncated, files };
}

/**
 * Files that differ between `base` and what is in the worktree now: committed since, staged, modified and
 * untracked (not ignored) files. Sorted, relative to the worktree root.
 */
export async function changedFiles(worktree: string, base: string): Promise<string[]> {
  const commit = await resolveCommit(worktree, base);
  const tracked = splitNul(await git(worktree, ['diff', '--name-only', '-z', '--no-renames', commit]));
  const untracked = splitNul(await git(worktree, ['ls-files', '--others', '--exclude-standard', '-z']));
  return [...new Set([...tracked, ...untracked])].sort();
}

/**
 * Puts `paths` (files, or folders for everything under them) back as HEAD has them, in the worktree and the
 * index: changed and deleted files are checked out again, files HEAD does not have are removed (a symlink
 * itself, never its target). Returns the files it put back, sorted; none when nothing under `paths` changed.
 */
export async function restoreFromHead(worktree: string, paths: string[]): Promise<string[]> {
  if (paths.length === 0) return [];
  const pathspecs = paths.map((p) => `:(literal)${p}`);
  // Entries are `XY path`; `--no-renames` keeps each to one path.
  const entries = splitNul(
    await git(worktree, [
      'status',
      '--porcelain=v1',
      '-z',
      '--untracked-files=all',
      '--no-renames',
      '--',
      ...pathspecs,
    ]),
  ).map((entry) => ({ code: entry.slice(0, 2), file: entry.slice(3) }));
  const root = path.resolve(worktree);
  for (const { code, file } of entries) {
    const inHead = await git(worktree, ['cat-file', '-e', `HEAD:${file}`]).then(
      () => true,
      () => false,
    );
    if (inHead) {
      await git(worktree, ['checkout', 'HEAD', '--', `:(literal)${file}`]);
      continue;
    }
    if (code !== '??') await git(worktree, ['rm', '--cached', '-q', '-f', '--', `:(literal)${file}`]);
    // git lists files below real folders only (it does not enter symlinked ones), so this stays in the worktree.
    await rm(path.join(root, file), { force: true });
  }
  return entries.map((e) => e.file).sort();
}

/**
 * Removes the worktree at `worktreePath` with whatever is in it (even when locked); nothing happens when it
 * is gone already. A folder there that is not a worktree is left alone and reported.
 */
export async function removeWorktree(repo: string, worktreePath: string): Promise<void> {
  const entry = await findWorktree(repo, worktreePath);
  if (entry) {
    await git(repo, ['worktree', 'remove', '--force', '--force', entry.path]);
    return;
  }
  await git(repo, ['worktree', 'prune']);
  if (!existsSync(worktreePath)) return;
  // A folder left by a crashed `worktree add` still has its `.git` file; anything else is not ours to delete.
  const marker = await lstat(path.join(worktreePath, '.git')).catch(() => undefined);
  if (!marker?.isFile()) throw new Error(`${worktreePath} is not a worktree of ${repo}; not removing it`);
  await rm(worktreePath, { recursive: true, force: true });
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

// ---------------------------------------------------------------------------------------------------------

interface WorktreeEntry {
  path: string;
  head?: string;
  /** `refs/heads/<name>`, or undefined when detached. */
  branch?: string;
  /** The lock reason ('' when locked without one). */
  locked?: string;
  prunable: boolean;
}

/** The registered worktree at `dir`, if any. */
async function findWorktree(repo: string, dir: string): Promise<WorktreeEntry | undefined> {
  const wanted = await canonicalPath(dir);
  for (const entry of await listWorktrees(repo)) {
    if ((await canonicalPath(entry.path)) === wanted) return entry;
  }
  return undefined;
}

async function listWorktrees(repo: string): Promise<WorktreeEntry[]> {
  const out = await git(repo, ['worktree', 'list', '--porcelain', '-z']);
  const entries: WorktreeEntry[] = [];
  let current: WorktreeEntry | undefined;
  for (const line of out.split('\0')) {
    if (line === '') {
      current = undefined;
      continue;
    }
    const space = line.indexOf(' ');
    const key = space < 0 ? line : line.slice(0, space);
    const value = space < 0 ? '' : line.slice(space + 1);
    if (key === 'worktree') {
      current = { path: value, prunable: false };
      entries.push(current);
    } else if (current) {
      if (key === 'HEAD') current.head = value;
      else if (key === 'branch') current.branch = value;
      else if (key === 'locked') current.locked = value;
      else if (key === 'prunable') current.prunable = true;
    }
  }
  return entries;
}

/** The real path when it exists (git records real paths), else the absolute one. */
async function canonicalPath(p: string): Promise<string> {
  return realpath(p).catch(() => path.resolve(p));
}

async function checkBranchName(repo: string, branch: string): Promise<void> {
  const out =
    branch.startsWith('-') || branch.includes('@{')
      ? undefined
      : await runGit(repo, ['check-ref-format', '--branch', branch]);
  if (!out || out.exitCode !== 0 || out.stdout !== branch) throw new Error(`"${branch}" is not a valid branch name`);
}

/** The commit `rev` names (a branch, tag or commit), refusing anything git would read as an option. */
async function resolveCommit(cwd: string, rev: string): Promise<string> {
  if (rev === '' || rev.startsWith('-')) throw new Error(`"${rev}" is not a branch or commit`);
  const out = await runGit(cwd, ['rev-parse', '--verify', '--quiet', '--end-of-options', `${rev}^{commit}`]);
  if (out.exitCode !== 0)
    throw new GitError(['rev-parse', rev], out.exitCode, out.stderr, `"${rev}" is not a branch or commit in ${cwd}`);
  return out.stdout;
}

/** The newest commit reachable from HEAD (at most 200 back) whose `Treadle-Op` trailer is `opKey`. */
async function findOpCommit(worktree: string, opKey: string): Promise<string | undefined> {
  const out = await git(worktree, [
    'log',
    '-n',
    String(OP_SEARCH_DEPTH),
    `--format=%H%x1f%(trailers:key=${OP_TRAILER},valueonly,separator=%x1f)%x1e`,
    'HEAD',
  ]);
  for (const record of out.split('\x1e')) {
    const [hash, ...values] = record.trim().split('\x1f');
    if (hash && values.some((v) => v.trim() === opKey)) return hash;
  }
  return undefined;
}

function checkCommitText(message: string, opKey: string): void {
  if (message.trim() === '') throw new Error('a commit message must not be empty');
  // eslint-disable-next-line no-control-regex
  if (opKey === '' || opKey.trim() !== opKey || /[\x00-\x1f\x7f]/.test(opKey))
    throw new Error(`invalid op key ${JSON.stringify(opKey)}: one line, no control characters`);
}

/** Commits the index as `<message>\n\nTreadle-Op: <opKey>` (empty if nothing is staged) and returns it. */
async function commitStaged(worktree: string, message: string, opKey: string): Promise<string> {
  await git(worktree, [
    'commit',
    '--quiet',
    '--no-verify',
    '--allow-empty',
    '--cleanup=whitespace',
    '-m',
    message,
    '-m',
    `${OP_TRAILER}: ${opKey}`,
  ]);
  return headCommit(worktree);
}

async function hasStagedChanges(worktree: string): Promise<boolean> {
  const out = await runGit(worktree, ['diff', '--cached', '--quiet']);
  if (out.exitCode > 1) throw failed(['diff', '--cached'], out);
  return out.exitCode === 1;
}

/** Staged or unstaged changes to tracked files (untracked files do not count). */
async function hasTrackedChanges(worktree: string): Promise<boolean> {
  return (await git(worktree, ['status', '--porcelain', '-z', '--untracked-files=no'])) !== '';
}

async function conflictFiles(worktree: string): Promise<string[]> {
  return [...new Set(splitNul(await git(worktree, ['diff', '--name-only', '-z', '--diff-filter=U'])))].sort();
}

/** git's CONFLICT lines (and the "could not apply" line of a rebase), else its first lines. */
function conflictDetails(out: GitOutput): string {
  const lines = `${out.stdout}\n${out.stderr}`.split('\n').map((l) => l.trim());
  const relevant = lines.filter((l) => l.startsWith('CONFLICT') || l.startsWith('error: could not apply'));
  return (relevant.length > 0 ? relevant : lines.filter((l) => l !== '').slice(0, ERROR_OUTPUT_LINES)).join('\n');
}

/** Untracked entries (ignored ones included; wholly untracked folders as `dir/`). */
async function untrackedEntries(worktree: string): Promise<Set<string>> {
  return new Set(splitNul(await git(worktree, ['ls-files', '--others', '--directory', '-z'])));
}

/** Back to HEAD after a failed merge: tracked files reset, and untracked files the merge wrote removed. */
async function restoreHead(worktree: string, untrackedBefore: Set<string>): Promise<void> {
  await git(worktree, ['reset', '--quiet', '--hard', 'HEAD']);
  await removeNewUntracked(worktree, untrackedBefore);
}

/** Removes untracked entries that were not there before (git writes `file~HEAD` copies in some conflicts). */
async function removeNewUntracked(worktree: string, before: Set<string>): Promise<void> {
  for (const entry of await untrackedEntries(worktree)) {
    // A plain join: git lists paths inside the worktree, and rm removes a symlink itself, not its target.
    if (!before.has(entry)) await rm(path.join(worktree, entry), { recursive: true, force: true });
  }
}

async function rebaseInProgress(worktree: string): Promise<boolean> {
  return existsSync(await gitPath(worktree, 'rebase-merge')) || existsSync(await gitPath(worktree, 'rebase-apply'));
}

/** The path of `name` inside the worktree's own git directory. */
async function gitPath(worktree: string, name: string): Promise<string> {
  return path.resolve(worktree, await git(worktree, ['rev-parse', '--git-path', name]));
}

/** Runs git and keeps at most `maxBytes` of its stdout (stopping it once it has printed more). */
function gitPrefix(cwd: string, args: string[], maxBytes: number): Promise<{ text: string; truncated: boolean }> {
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
  let end = head.length;
  while (end > 0 && ((bytes[end] ?? 0) & 0xc0) === 0x80) end--; // do not split a UTF-8 character
  return bytes.subarray(0, end).toString('utf8');
}

function splitNul(text: string): string[] {
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
