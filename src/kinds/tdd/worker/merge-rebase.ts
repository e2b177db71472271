/**
 * Squash merges into the parent's branch and rebases onto it (seed 001), safe to repeat: a merge is one
 * commit found again by its `Treadle-Op` trailer, a squash merge interrupted before its commit or a rebase
 * left in progress is undone before trying again, and a conflict leaves the worktree exactly as it was.
 */
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { checkCommitText, commitStaged, findOpCommit } from './commits';
import {
  ERROR_OUTPUT_LINES,
  failed,
  git,
  gitPath,
  headCommit,
  rebaseInProgress,
  resolveCommit,
  runGit,
  splitNul,
  type GitOutput,
} from './git';

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
