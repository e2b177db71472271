/**
 * Commits made once (seed 001): each carries a `Treadle-Op: <opKey>` trailer, and a repeated call (Temporal
 * retries an activity that crashed half way) finds that commit instead of committing twice.
 */
import { failed, git, headCommit, runGit } from './git';

/** The trailer that names the operation a commit was made for. */
export const OP_TRAILER = 'Treadle-Op';
/** How far back from HEAD a repeated operation looks for its own commit. */
const OP_SEARCH_DEPTH = 200;

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

/** The newest commit reachable from HEAD (at most 200 back) whose `Treadle-Op` trailer is `opKey`. */
export async function findOpCommit(worktree: string, opKey: string): Promise<string | undefined> {
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

/** Refuses an empty message or an op key that is not one clean line. */
export function checkCommitText(message: string, opKey: string): void {
  if (message.trim() === '') throw new Error('a commit message must not be empty');
  // eslint-disable-next-line no-control-regex
  if (opKey === '' || opKey.trim() !== opKey || /[\x00-\x1f\x7f]/.test(opKey))
    throw new Error(`invalid op key ${JSON.stringify(opKey)}: one line, no control characters`);
}

/** Commits the index as `<message>\n\nTreadle-Op: <opKey>` (empty if nothing is staged) and returns it. */
export async function commitStaged(worktree: string, message: string, opKey: string): Promise<string> {
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
