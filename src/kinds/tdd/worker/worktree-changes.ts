/**
 * What changed in a worktree (seed 001): the diff a reviewer reads, the files changed since a base, and
 * putting read-only files back as HEAD has them.
 */
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { REVIEW_TEXT_MAX_BYTES } from '../../../model/limits';
import { git, gitPrefix, resolveCommit, splitNul } from './git';

/** Default cut of {@link diffText}. */
const DEFAULT_DIFF_MAX_BYTES = 1024 * 1024;

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
 * `git diff <base>..HEAD` as a person judging a node reads it (binary files as git shows them): past `maxBytes`
 * cut at a line end, with a final line saying so, so a cut diff never passes for a whole one.
 */
export async function reviewDiff(worktree: string, base: string, maxBytes = REVIEW_TEXT_MAX_BYTES): Promise<string> {
  // One git process on every call that commits: no rev-parse, no list of files (diffText's, unused here).
  const range = `${base}..HEAD`;
  const diff = await gitPrefix(worktree, ['diff', '--no-color', '--no-ext-diff', '--end-of-options', range], maxBytes);
  if (!diff.truncated) return diff.text === '' ? '' : `${diff.text}\n`;
  const size = maxBytes % (1024 * 1024) === 0 ? `${maxBytes / (1024 * 1024)} MB` : `${maxBytes} bytes`;
  return `${diff.text}${diff.text.endsWith('\n') ? '' : '\n'}… diff cut at ${size}\n`;
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
