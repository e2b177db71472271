/**
 * File access for agents, confined to their worktree. Every path an agent names is relative to the
 * worktree root and is refused when it is empty, absolute, contains a NUL byte or a backslash, leaves the
 * root (`..`, or a symlink anywhere along it that points outside), or names anything inside a `.git`
 * (the worktree's `.git` file, or a nested repository's folder). Writes and deletions also refuse
 * read-only paths (a parent's interface files, the tests Impl must not change) and never go through a
 * symlink.
 *
 * These checks are against agents' mistakes and tricks in their replies, not against another process
 * changing the worktree at the same time.
 */
import { constants, lstatSync, realpathSync, type Stats } from 'node:fs';
import { lstat, mkdir, open, readdir, stat, unlink } from 'node:fs/promises';
import path from 'node:path';

/** Default cap of {@link readFileInside}. */
const DEFAULT_MAX_READ_BYTES = 1024 * 1024;
/** Default cap of {@link listFilesInside}. */
const DEFAULT_MAX_LIST_ENTRIES = 2_000;
/** Names {@link listFilesInside} neither lists nor descends into. */
const UNLISTED = new Set(['.git', 'node_modules']);

/** A path that would reach outside the worktree, into `.git`, or through a symlink. */
export class PathEscapeError extends Error {
  override name = 'PathEscapeError';
  constructor(
    readonly requested: string,
    reason: string,
  ) {
    super(`refused path ${JSON.stringify(requested)}: ${reason}`);
  }
}

/** A write or deletion of a path that is read-only for this caller. */
export class ReadOnlyPathError extends Error {
  override name = 'ReadOnlyPathError';
  constructor(
    readonly requested: string,
    /** The read-only entry (a file or a folder prefix) that matched. */
    readonly rule: string,
  ) {
    super(
      rule === path.posix.normalize(requested.replace(/^\.\/+/, ''))
        ? `${requested} is read-only`
        : `${requested} is read-only (everything under ${rule}/ is)`,
    );
  }
}

/** Options of writes and deletions. */
export interface WriteOptions {
  /** Relative paths of files, or folders whose contents are all read-only. */
  readOnly?: string[];
}

/** A checked path: absolute, relative to the root as asked, and relative to the root after symlinks. */
interface Located {
  requested: string;
  absolute: string;
  relative: string;
  realRelative: string;
}

/**
 * The absolute path of `relative` inside `root`, refusing (with a {@link PathEscapeError}) anything that
 * is empty, absolute (POSIX or Windows), has a NUL byte or a backslash, leaves `root`, goes into a `.git`,
 * or passes a symlink that leads outside `root` (or into a `.git`). `root` itself is `"."`.
 */
export function resolveInside(root: string, relative: string): string {
  return locate(root, relative).absolute;
}

/** The text of a file inside `root`; a file over `maxBytes` (default 1 MiB) is refused with its size. */
export async function readFileInside(
  root: string,
  relative: string,
  options: { maxBytes?: number } = {},
): Promise<string> {
  const { absolute } = locate(root, relative);
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_READ_BYTES;
  const stats = await lstat(absolute).catch((error: NodeJS.ErrnoException) => {
    throw error.code === 'ENOENT' ? new Error(`${relative} does not exist`) : error;
  });
  // A symlink inside the worktree is read through (locate checked where it leads); FIFOs and folders are not files.
  const target = stats.isSymbolicLink() ? await stat(absolute) : stats;
  if (!target.isFile()) throw new Error(`${relative} is not a file`);
  const handle = await open(absolute, 'r');
  try {
    const { size } = await handle.stat();
    if (size > maxBytes)
      throw new Error(`${relative} is ${size} bytes, more than the ${maxBytes} bytes that may be read`);
    return await handle.readFile('utf8');
  } finally {
    await handle.close();
  }
}

/**
 * Writes `content` to a file inside `root`, making missing parent folders. Refused: read-only paths
 * ({@link ReadOnlyPathError}), a path that is a symlink or passes one out of `root`, and a folder.
 */
export async function writeFileInside(
  root: string,
  relative: string,
  content: string,
  options: WriteOptions = {},
): Promise<void> {
  const located = await checkWrite(root, relative, options.readOnly ?? []);
  await write(root, located, content);
}

/** Deletes a file inside `root` (nothing happens when it is already gone); read-only paths are refused. */
export async function deleteFileInside(root: string, relative: string, options: WriteOptions = {}): Promise<void> {
  const located = await checkDelete(root, relative, options.readOnly ?? []);
  await unlink(located.absolute).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== 'ENOENT') throw error;
  });
}

/**
 * The files under `relative` (default the whole worktree) as sorted POSIX paths relative to `root`,
 * skipping `.git` (file or folder) and `node_modules`, and not following symlinks (a symlink is listed as a file).
 * At most `maxEntries` (default 2,000) are returned: a list of exactly that many may have been cut.
 */
export async function listFilesInside(
  root: string,
  relative = '.',
  options: { maxEntries?: number } = {},
): Promise<string[]> {
  const start = locate(root, relative);
  const maxEntries = options.maxEntries ?? DEFAULT_MAX_LIST_ENTRIES;
  const files: string[] = [];
  const rootAbsolute = path.resolve(root);
  const walk = async (dir: string): Promise<void> => {
    const entries = (await readdir(dir, { withFileTypes: true })).sort((a, b) =>
      a.name < b.name ? -1 : a.name > b.name ? 1 : 0,
    );
    for (const entry of entries) {
      if (files.length >= maxEntries) return;
      const full = path.join(dir, entry.name);
      // A worktree's `.git` is a file, a repository's a folder: neither is listed.
      if (UNLISTED.has(entry.name.toLowerCase())) continue;
      if (entry.isDirectory()) {
        await walk(full);
      } else {
        files.push(toPosix(path.relative(rootAbsolute, full)));
      }
    }
  };
  const stats = await lstat(start.absolute).catch(() => undefined);
  if (!stats) return [];
  if (stats.isDirectory()) await walk(start.absolute);
  else files.push(start.relative);
  return files.sort();
}

/**
 * Applies an agent's file changes (relative path → new content, or null to delete). Every path is checked
 * before anything is touched, so one bad path means nothing is written. Returns the normalised paths
 * written and deleted (a deletion of a missing file counts, so a repeated call reports the same).
 */
export async function applyFileWrites(
  root: string,
  writes: Record<string, string | null>,
  options: WriteOptions = {},
): Promise<{ written: string[]; deleted: string[] }> {
  const readOnly = options.readOnly ?? [];
  const planned: { located: Located; content: string | null }[] = [];
  for (const [relative, content] of Object.entries(writes)) {
    if (content !== null && typeof content !== 'string')
      throw new Error(`the new content of ${relative} must be text or null`);
    planned.push({
      located:
        content === null ? await checkDelete(root, relative, readOnly) : await checkWrite(root, relative, readOnly),
      content,
    });
  }
  const written: string[] = [];
  const deleted: string[] = [];
  for (const { located, content } of planned) {
    if (content === null) {
      await deleteFileInside(root, located.requested, { readOnly });
      deleted.push(located.relative);
    } else {
      await write(root, located, content);
      written.push(located.relative);
    }
  }
  return { written, deleted };
}

// ---------------------------------------------------------------------------------------------------------

function locate(root: string, requested: string): Located {
  const refuse = (reason: string): never => {
    throw new PathEscapeError(requested, reason);
  };
  if (typeof requested !== 'string' || requested.trim() === '') refuse('the path is empty');
  if (requested.includes('\0')) refuse('the path contains a NUL byte');
  if (path.posix.isAbsolute(requested) || path.win32.isAbsolute(requested) || /^[a-zA-Z]:/.test(requested))
    refuse('the path must be relative to the worktree');
  if (requested.includes('\\')) refuse('use "/" to separate folders, not "\\"');
  const rootAbsolute = path.resolve(root);
  let realRoot: string;
  try {
    realRoot = realpathSync.native(rootAbsolute);
  } catch {
    throw new Error(`the worktree ${rootAbsolute} does not exist`);
  }
  const absolute = path.resolve(rootAbsolute, requested);
  const relative = path.relative(rootAbsolute, absolute);
  if (leaves(relative)) refuse('it leads outside the worktree');
  if (inGitDir(relative)) refuse('files in .git are not the agent’s');

  // Follow symlinks on the part of the path that exists, and compare with the real root.
  let existing = absolute;
  const rest: string[] = [];
  while (existing !== rootAbsolute && !exists(existing)) {
    rest.unshift(path.basename(existing));
    existing = path.dirname(existing);
  }
  let realExisting: string;
  try {
    realExisting = realpathSync.native(existing);
  } catch {
    return refuse('it passes a symlink whose target does not exist');
  }
  const realRelative = path.join(path.relative(realRoot, realExisting), ...rest);
  if (leaves(realRelative)) refuse('a symlink on the way leads outside the worktree');
  if (inGitDir(realRelative)) refuse('a symlink on the way leads into .git');
  return { requested, absolute, relative: toPosix(relative) || '.', realRelative: toPosix(realRelative) || '.' };
}

async function checkWrite(root: string, relative: string, readOnly: string[]): Promise<Located> {
  const located = locate(root, relative);
  checkReadOnly(located, readOnly);
  const stats = await lstatOrUndefined(located.absolute);
  if (stats?.isSymbolicLink())
    throw new PathEscapeError(relative, 'it is a symlink, and files are not written through symlinks');
  if (stats?.isDirectory()) throw new Error(`${relative} is a folder, not a file`);
  return located;
}

async function checkDelete(root: string, relative: string, readOnly: string[]): Promise<Located> {
  const located = locate(root, relative);
  checkReadOnly(located, readOnly);
  const stats = await lstatOrUndefined(located.absolute);
  if (stats?.isDirectory()) throw new Error(`${relative} is a folder; only files are deleted`);
  return located;
}

/** Refuses a path that is, or is under, a read-only entry, as written or after symlinks. */
function checkReadOnly(located: Located, readOnly: string[]): void {
  for (const entry of readOnly) {
    const rule = path.posix.normalize(entry.replace(/^\.\/+/, '')).replace(/\/+$/, '') || '.';
    for (const candidate of [located.relative, located.realRelative]) {
      if (rule === '.' || candidate === rule || candidate.startsWith(`${rule}/`))
        throw new ReadOnlyPathError(located.requested, rule);
    }
  }
}

/** Creates the missing folders below `root` one by one, each a real folder, then writes without following a symlink. */
async function write(root: string, located: Located, content: string): Promise<void> {
  let dir = path.resolve(root);
  const segments = located.relative.split('/').slice(0, -1);
  for (const segment of segments) {
    dir = path.join(dir, segment);
    let stats = await lstatOrUndefined(dir);
    if (!stats) {
      await mkdir(dir).catch((error: NodeJS.ErrnoException) => {
        if (error.code !== 'EEXIST') throw error;
      });
      stats = await lstat(dir);
      if (!stats.isDirectory()) throw new PathEscapeError(located.requested, `${segment} is not a folder`);
    }
  }
  // O_NOFOLLOW: the last component must not be a symlink, even one made since the check.
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | (constants.O_NOFOLLOW ?? 0);
  const handle = await open(located.absolute, flags, 0o644).catch((error: NodeJS.ErrnoException) => {
    throw error.code === 'ELOOP'
      ? new PathEscapeError(located.requested, 'it is a symlink, and files are not written through symlinks')
      : error;
  });
  try {
    await handle.writeFile(content, 'utf8');
  } finally {
    await handle.close();
  }
}

function leaves(relative: string): boolean {
  return relative === '..' || relative.startsWith(`..${path.sep}`) || path.isAbsolute(relative);
}

function inGitDir(relative: string): boolean {
  return relative.split(path.sep).some((segment) => segment.toLowerCase() === '.git');
}

function exists(p: string): boolean {
  try {
    lstatSync(p);
    return true;
  } catch {
    return false;
  }
}

async function lstatOrUndefined(p: string): Promise<Stats | undefined> {
  return lstat(p).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return undefined;
    throw error;
  });
}

function toPosix(p: string): string {
  return p.split(path.sep).join('/');
}
