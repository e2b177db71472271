/**
 * The TDD tree's worktrees (seed 001): one per node branch, at a fixed path, made and removed so that a
 * repeated call is safe (Temporal retries an activity that crashed half way): a worktree is found again at
 * its path, and a directory or registration left by a crashed `worktree add` is removed before trying again.
 */
import { existsSync } from 'node:fs';
import { lstat, mkdir, realpath, rm } from 'node:fs/promises';
import path from 'node:path';
import { branchExists, git, headCommit, rebaseInProgress, resolveCommit, runGit } from './git';

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
