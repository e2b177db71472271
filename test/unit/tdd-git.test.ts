/**
 * Git operations of the TDD tree on real repositories in a temporary folder. Cases: ensureWorktree makes a
 * worktree at its fixed path and finds it again, checks out an existing branch, recovers from a stale
 * folder, a half-made worktree and a deleted one, and refuses bad branch names; commitAll commits once per
 * op key (with the trailer), and its empty-commit behaviour; squashMerge makes one commit per op key, records
 * a merge that changes nothing, restores the parent on a conflict and recovers from a crashed attempt;
 * rebaseOnto rebases, does nothing when already based, reports a conflict with the worktree unchanged and
 * aborts a rebase left in progress; diffText, changedFiles, restoreFromHead, removeWorktree; GitError and
 * the identity.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { commitAll, OP_TRAILER } from '../../src/kinds/tdd/worker/commits';
import { branchExists, git, GitError, headCommit, initRepository } from '../../src/kinds/tdd/worker/git';
import { MergeConflictError, rebaseOnto, squashMerge } from '../../src/kinds/tdd/worker/merge-rebase';
import { changedFiles, diffText, restoreFromHead, reviewDiff } from '../../src/kinds/tdd/worker/worktree-changes';
import { ensureWorktree, removeWorktree } from '../../src/kinds/tdd/worker/worktrees';

let dir: string;
let counter = 0;
beforeAll(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'treadle-tdd-git-'));
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** A new repository with `files` committed on main, and its worktrees folder (where the TDD activity puts them). */
async function freshRepo(
  files: Record<string, string> = { 'README.md': '# test\n' },
): Promise<{ repo: string; worktreesDir: string; initial: string }> {
  const repo = path.join(dir, `repo-${++counter}`);
  const initial = await initRepository(repo, files);
  return { repo, worktreesDir: path.join(repo, '.git', 'treadle-worktrees'), initial };
}

async function commitCount(cwd: string, rev = 'HEAD'): Promise<number> {
  return Number(await git(cwd, ['rev-list', '--count', rev]));
}

async function currentBranch(cwd: string): Promise<string> {
  return git(cwd, ['symbolic-ref', '--short', 'HEAD']);
}

function write(root: string, relative: string, content: string): void {
  mkdirSync(path.dirname(path.join(root, relative)), { recursive: true });
  writeFileSync(path.join(root, relative), content);
}

describe('git()', () => {
  test('fails with a GitError naming the subcommand and git’s message', async () => {
    const { repo } = await freshRepo();
    const error = await git(repo, ['rev-parse', '--verify', 'no-such-branch']).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(GitError);
    expect((error as GitError).exitCode).toBe(128);
    expect((error as GitError).args).toEqual(['rev-parse', '--verify', 'no-such-branch']);
    expect((error as GitError).message).toMatch(/^git rev-parse failed \(exit 128\): fatal: Needed a single revision/);
  });

  test('commits as Treadle unless TREADLE_GIT_AUTHOR_NAME / _EMAIL say otherwise', async () => {
    const { repo } = await freshRepo();
    expect(await git(repo, ['log', '-1', '--format=%an <%ae> / %cn <%ce>'])).toBe(
      'Treadle <treadle@localhost> / Treadle <treadle@localhost>',
    );
    await git(repo, ['commit', '--allow-empty', '-m', 'as someone else'], {
      env: { TREADLE_GIT_AUTHOR_NAME: 'Robot', TREADLE_GIT_AUTHOR_EMAIL: 'robot@example.com' },
    });
    expect(await git(repo, ['log', '-1', '--format=%an <%ae>'])).toBe('Robot <robot@example.com>');
  });
});

describe('ensureWorktree', () => {
  test('makes the worktree of a new branch at base, then finds it again', async () => {
    const { repo, worktreesDir, initial } = await freshRepo();
    const first = await ensureWorktree({ repo, worktreesDir, branch: 'treadle/root', base: 'main' });
    expect(first).toEqual({ path: path.join(worktreesDir, 'treadle__root'), head: initial, created: true });
    expect(await currentBranch(first.path)).toBe('treadle/root');
    expect(readFileSync(path.join(first.path, 'README.md'), 'utf8')).toBe('# test\n');

    write(first.path, 'work.txt', 'in progress\n');
    const again = await ensureWorktree({ repo, worktreesDir, branch: 'treadle/root', base: 'main' });
    expect(again).toEqual({ path: first.path, head: initial, created: false });
    // Finding it again leaves the work in it alone.
    expect(readFileSync(path.join(first.path, 'work.txt'), 'utf8')).toBe('in progress\n');
    expect(await branchExists(repo, 'treadle/root')).toBe(true);
  });

  test('checks out an existing branch as it is, ignoring base', async () => {
    const { repo, worktreesDir } = await freshRepo();
    await git(repo, ['commit', '--allow-empty', '-m', 'second']);
    const second = await headCommit(repo);
    await git(repo, ['branch', 'existing', second]);
    await git(repo, ['reset', '--hard', 'HEAD~1']);
    const made = await ensureWorktree({ repo, worktreesDir, branch: 'existing', base: 'main' });
    expect(made.created).toBe(true);
    expect(made.head).toBe(second);
  });

  test('a new branch can start at a commit', async () => {
    const { repo, worktreesDir, initial } = await freshRepo();
    await git(repo, ['commit', '--allow-empty', '-m', 'later']);
    const made = await ensureWorktree({ repo, worktreesDir, branch: 'from-commit', base: initial });
    expect(made.head).toBe(initial);
  });

  test('removes a stale folder left at the path by a crashed attempt', async () => {
    const { repo, worktreesDir, initial } = await freshRepo();
    const stale = path.join(worktreesDir, 'node__a');
    write(stale, 'leftover.txt', 'junk');
    const made = await ensureWorktree({ repo, worktreesDir, branch: 'node/a', base: 'main' });
    expect(made).toEqual({ path: stale, head: initial, created: true });
    expect(existsSync(path.join(stale, 'leftover.txt'))).toBe(false);
    expect(await currentBranch(stale)).toBe('node/a');
  });

  test('re-makes a worktree whose checkout never finished, or whose folder was deleted', async () => {
    const { repo, worktreesDir } = await freshRepo({ 'a.txt': 'a\n' });
    const made = await ensureWorktree({ repo, worktreesDir, branch: 'half', base: 'main' });
    // What `git worktree add` leaves when it dies mid-checkout: its "initializing" lock, files missing.
    writeFileSync(path.join(repo, '.git', 'worktrees', 'half', 'locked'), 'initializing');
    unlinkSync(path.join(made.path, 'a.txt'));
    const again = await ensureWorktree({ repo, worktreesDir, branch: 'half', base: 'main' });
    expect(again.created).toBe(true);
    expect(readFileSync(path.join(made.path, 'a.txt'), 'utf8')).toBe('a\n');

    rmSync(made.path, { recursive: true, force: true });
    const third = await ensureWorktree({ repo, worktreesDir, branch: 'half', base: 'main' });
    expect(third.created).toBe(true);
    expect(await currentBranch(third.path)).toBe('half');
  });

  test('refuses branch names git would not accept or would read as options', async () => {
    const { repo, worktreesDir } = await freshRepo();
    for (const branch of ['bad..name', '-x', 'a b', 'x@{-1}', '']) {
      await expect(ensureWorktree({ repo, worktreesDir, branch, base: 'main' })).rejects.toThrow(
        /not a valid branch name/,
      );
    }
    await expect(ensureWorktree({ repo, worktreesDir, branch: 'ok', base: '--orphan' })).rejects.toThrow(
      /not a branch or commit/,
    );
    expect(await git(repo, ['branch', '--list'])).toBe('* main');
  });
});

describe('commitAll', () => {
  test('commits everything once per op key, with the Treadle-Op trailer', async () => {
    const { repo } = await freshRepo();
    const before = await commitCount(repo);
    write(repo, 'src/a.ts', 'export const a = 1;\n');
    write(repo, 'README.md', 'changed\n');
    const first = await commitAll({ worktree: repo, message: 'feat: a', opKey: 'wf-1/impl/0' });
    expect(first.created).toBe(true);
    expect(first.commit).toBe(await headCommit(repo));
    expect(await git(repo, ['log', '-1', '--format=%B'])).toBe(`feat: a\n\n${OP_TRAILER}: wf-1/impl/0\n`);
    expect(await git(repo, ['show', '--name-only', '--format=', 'HEAD'])).toBe('README.md\nsrc/a.ts');
    expect(await git(repo, ['status', '--porcelain'])).toBe('');

    // The retry finds its commit and does not commit again, even with new changes in the tree.
    write(repo, 'src/b.ts', 'export const b = 2;\n');
    const retry = await commitAll({ worktree: repo, message: 'feat: a', opKey: 'wf-1/impl/0' });
    expect(retry).toEqual({ commit: first.commit, created: false });
    expect(await commitCount(repo)).toBe(before + 1);

    // A key that only starts like the first one is another operation.
    const other = await commitAll({ worktree: repo, message: 'feat: b', opKey: 'wf-1/impl/' });
    expect(other.created).toBe(true);
    expect(await commitCount(repo)).toBe(before + 2);
  });

  test('with nothing to commit returns HEAD, unless allowEmpty, which commits once', async () => {
    const { repo, initial } = await freshRepo();
    expect(await commitAll({ worktree: repo, message: 'nothing', opKey: 'k-empty' })).toEqual({
      commit: initial,
      created: false,
    });
    expect(await commitCount(repo)).toBe(1);

    const empty = await commitAll({ worktree: repo, message: 'marker', opKey: 'k-marker', allowEmpty: true });
    expect(empty.created).toBe(true);
    expect(empty.commit).not.toBe(initial);
    expect(await commitAll({ worktree: repo, message: 'marker', opKey: 'k-marker', allowEmpty: true })).toEqual({
      commit: empty.commit,
      created: false,
    });
    expect(await commitCount(repo)).toBe(2);
  });

  test('refuses an empty message and an op key that is not one line', async () => {
    const { repo } = await freshRepo();
    await expect(commitAll({ worktree: repo, message: ' ', opKey: 'k' })).rejects.toThrow(/message must not be empty/);
    await expect(commitAll({ worktree: repo, message: 'm', opKey: 'a\nTreadle-Op: b' })).rejects.toThrow(
      /invalid op key/,
    );
  });
});

/** A repository with a parent branch and a child branch from it, each in its worktree. */
async function parentAndChild(files: Record<string, string> = { 'shared.txt': 'one\ntwo\nthree\n' }) {
  const { repo, worktreesDir } = await freshRepo(files);
  const parent = await ensureWorktree({ repo, worktreesDir, branch: 'tdd/root', base: 'main' });
  const child = await ensureWorktree({ repo, worktreesDir, branch: 'tdd/root.child', base: 'tdd/root' });
  return { repo, worktreesDir, parent: parent.path, child: child.path };
}

describe('squashMerge', () => {
  test('squashes the child’s commits into one parent commit, once per op key', async () => {
    const { parent, child } = await parentAndChild();
    write(child, 'src/child.ts', 'export const child = 1;\n');
    await commitAll({ worktree: child, message: 'scaffold', opKey: 'c/scaffold' });
    write(child, 'src/child.ts', 'export const child = 2;\n');
    await commitAll({ worktree: child, message: 'impl', opKey: 'c/impl' });
    const before = await commitCount(parent);

    const merged = await squashMerge({
      worktree: parent,
      branch: 'tdd/root.child',
      message: 'feat(child): implement',
      opKey: 'p/merger/0',
    });
    expect(merged.created).toBe(true);
    expect(merged.commit).toBe(await headCommit(parent));
    expect(await commitCount(parent)).toBe(before + 1);
    expect(await git(parent, ['log', '-1', '--format=%s'])).toBe('feat(child): implement');
    expect((await git(parent, ['log', '-1', '--format=%(trailers:key=Treadle-Op,valueonly)'])).trim()).toBe(
      'p/merger/0',
    );
    expect(readFileSync(path.join(parent, 'src/child.ts'), 'utf8')).toBe('export const child = 2;\n');
    expect(await currentBranch(parent)).toBe('tdd/root');
    expect(await git(parent, ['status', '--porcelain'])).toBe('');

    const retry = await squashMerge({
      worktree: parent,
      branch: 'tdd/root.child',
      message: 'feat(child): implement',
      opKey: 'p/merger/0',
    });
    expect(retry).toEqual({ commit: merged.commit, created: false });
    expect(await commitCount(parent)).toBe(before + 1);
  });

  test('a merge that brings nothing still commits (empty), so it is recorded once', async () => {
    const { parent } = await parentAndChild();
    const before = await headCommit(parent);
    const merged = await squashMerge({
      worktree: parent,
      branch: 'tdd/root.child',
      message: 'feat(child): implement',
      opKey: 'p/merger/empty',
    });
    expect(merged.created).toBe(true);
    expect(await git(parent, ['rev-parse', 'HEAD~1'])).toBe(before);
    expect(await git(parent, ['diff', '--name-only', 'HEAD~1', 'HEAD'])).toBe('');
  });

  test('a conflict throws MergeConflictError and leaves the parent exactly at its HEAD', async () => {
    const { parent, child } = await parentAndChild();
    write(child, 'shared.txt', 'one\nCHILD\nthree\n');
    write(child, 'added-by-child.txt', 'new\n');
    mkdirSync(path.join(child, 'newdir'));
    write(child, 'newdir/deep.txt', 'deep\n');
    await commitAll({ worktree: child, message: 'child change', opKey: 'c/1' });
    write(parent, 'shared.txt', 'one\nPARENT\nthree\n');
    const parentHead = (await commitAll({ worktree: parent, message: 'parent change', opKey: 'p/1' })).commit;

    const error = await squashMerge({
      worktree: parent,
      branch: 'tdd/root.child',
      message: 'feat(child): implement',
      opKey: 'p/merger/1',
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MergeConflictError);
    expect((error as MergeConflictError).files).toEqual(['shared.txt']);
    expect((error as MergeConflictError).details).toMatch(/CONFLICT \(content\): Merge conflict in shared.txt/);
    expect(await headCommit(parent)).toBe(parentHead);
    expect(await git(parent, ['status', '--porcelain', '--untracked-files=all'])).toBe('');
    expect(readFileSync(path.join(parent, 'shared.txt'), 'utf8')).toBe('one\nPARENT\nthree\n');
    expect(existsSync(path.join(parent, 'added-by-child.txt'))).toBe(false);
    expect(existsSync(path.join(parent, 'newdir'))).toBe(false);
  });

  test('a file/folder conflict (git moves files aside) also leaves the parent at its HEAD', async () => {
    const { parent, child } = await parentAndChild({ x: 'x\n' });
    rmSync(path.join(child, 'x'));
    write(child, 'x/inner.txt', 'inner\n');
    await commitAll({ worktree: child, message: 'x becomes a folder', opKey: 'c/df' });
    write(parent, 'x', 'parent change\n');
    const parentHead = (await commitAll({ worktree: parent, message: 'parent changes x', opKey: 'p/df' })).commit;
    const error = await squashMerge({
      worktree: parent,
      branch: 'tdd/root.child',
      message: 'm',
      opKey: 'p/merger/df',
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MergeConflictError);
    expect((error as MergeConflictError).files.length).toBeGreaterThan(0);
    expect(await headCommit(parent)).toBe(parentHead);
    expect(await git(parent, ['status', '--porcelain', '--untracked-files=all'])).toBe('');
    expect(readFileSync(path.join(parent, 'x'), 'utf8')).toBe('parent change\n');
  });

  test('keeps the parent’s untracked files through a conflict', async () => {
    const { parent, child } = await parentAndChild();
    write(child, 'shared.txt', 'CHILD\n');
    await commitAll({ worktree: child, message: 'child', opKey: 'c/u' });
    write(parent, 'shared.txt', 'PARENT\n');
    await commitAll({ worktree: parent, message: 'parent', opKey: 'p/u' });
    write(parent, 'notes.txt', 'mine\n');
    await expect(
      squashMerge({ worktree: parent, branch: 'tdd/root.child', message: 'm', opKey: 'p/merger/u' }),
    ).rejects.toBeInstanceOf(MergeConflictError);
    expect(await git(parent, ['status', '--porcelain'])).toBe('?? notes.txt');
  });

  test('redoes a squash that a crashed attempt staged but never committed', async () => {
    const { parent, child } = await parentAndChild();
    write(child, 'feature.txt', 'feature\n');
    await commitAll({ worktree: child, message: 'feature', opKey: 'c/f' });
    const before = await commitCount(parent);
    await git(parent, ['merge', '--squash', 'tdd/root.child']);
    expect(await git(parent, ['status', '--porcelain'])).toBe('A  feature.txt');

    const merged = await squashMerge({
      worktree: parent,
      branch: 'tdd/root.child',
      message: 'feat(child): implement',
      opKey: 'p/merger/crash',
    });
    expect(merged.created).toBe(true);
    expect(await commitCount(parent)).toBe(before + 1);
    expect(await git(parent, ['show', '--name-only', '--format=', 'HEAD'])).toBe('feature.txt');
    expect(await git(parent, ['status', '--porcelain'])).toBe('');
  });

  test('refuses to merge into a worktree with uncommitted changes', async () => {
    const { parent } = await parentAndChild();
    write(parent, 'shared.txt', 'edited but not committed\n');
    await expect(
      squashMerge({ worktree: parent, branch: 'tdd/root.child', message: 'm', opKey: 'p/dirty' }),
    ).rejects.toThrow(/uncommitted changes/);
    expect(readFileSync(path.join(parent, 'shared.txt'), 'utf8')).toBe('edited but not committed\n');
  });
});

describe('rebaseOnto', () => {
  test('rebases onto the parent’s new head, then does nothing when already on it', async () => {
    const { parent, child } = await parentAndChild();
    write(child, 'child.txt', 'child\n');
    await commitAll({ worktree: child, message: 'child work', opKey: 'c/r1' });
    write(parent, 'sibling.txt', 'merged sibling\n');
    const parentHead = (await commitAll({ worktree: parent, message: 'feat(sibling): implement', opKey: 'p/r1' }))
      .commit;

    const rebased = await rebaseOnto({ worktree: child, onto: 'tdd/root' });
    expect(rebased).toEqual({ clean: true, newBase: parentHead, changed: true });
    expect(await git(child, ['rev-parse', 'HEAD~1'])).toBe(parentHead);
    expect((await git(child, ['log', '-1', '--format=%(trailers:key=Treadle-Op,valueonly)'])).trim()).toBe('c/r1');
    expect(readFileSync(path.join(child, 'sibling.txt'), 'utf8')).toBe('merged sibling\n');
    expect(await currentBranch(child)).toBe('tdd/root.child');

    const head = await headCommit(child);
    expect(await rebaseOnto({ worktree: child, onto: parentHead })).toEqual({
      clean: true,
      newBase: parentHead,
      changed: false,
    });
    expect(await headCommit(child)).toBe(head);
  });

  test('a conflict is reported with its files and the worktree is left as it was', async () => {
    const { parent, child } = await parentAndChild();
    write(child, 'shared.txt', 'one\nCHILD\nthree\n');
    write(child, 'child-only.txt', 'x\n');
    const childHead = (await commitAll({ worktree: child, message: 'child', opKey: 'c/r2' })).commit;
    write(parent, 'shared.txt', 'one\nPARENT\nthree\n');
    await commitAll({ worktree: parent, message: 'parent', opKey: 'p/r2' });

    const result = await rebaseOnto({ worktree: child, onto: 'tdd/root' });
    expect(result.clean).toBe(false);
    if (result.clean) return;
    expect(result.conflictFiles).toEqual(['shared.txt']);
    expect(result.details).toMatch(/CONFLICT \(content\): Merge conflict in shared.txt/);
    expect(await headCommit(child)).toBe(childHead);
    expect(await currentBranch(child)).toBe('tdd/root.child');
    expect(await git(child, ['status', '--porcelain', '--untracked-files=all'])).toBe('');
    expect(readFileSync(path.join(child, 'shared.txt'), 'utf8')).toBe('one\nCHILD\nthree\n');
  });

  test('aborts a rebase a crashed attempt left in progress before rebasing', async () => {
    const { parent, child } = await parentAndChild();
    write(child, 'shared.txt', 'CHILD\n');
    const childHead = (await commitAll({ worktree: child, message: 'child', opKey: 'c/r3' })).commit;
    write(parent, 'shared.txt', 'PARENT\n');
    await commitAll({ worktree: parent, message: 'parent', opKey: 'p/r3' });
    await expect(git(child, ['rebase', 'tdd/root'])).rejects.toBeInstanceOf(GitError);
    expect(existsSync(await git(child, ['rev-parse', '--path-format=absolute', '--git-path', 'rebase-merge']))).toBe(
      true,
    );

    const result = await rebaseOnto({ worktree: child, onto: 'tdd/root' });
    expect(result).toMatchObject({ clean: false, conflictFiles: ['shared.txt'] });
    expect(existsSync(await git(child, ['rev-parse', '--path-format=absolute', '--git-path', 'rebase-merge']))).toBe(
      false,
    );
    expect(await headCommit(child)).toBe(childHead);
    expect(await currentBranch(child)).toBe('tdd/root.child');
  });
});

describe('diffText and changedFiles', () => {
  test('the diff between two commits, its files, and a cut when it is too long', async () => {
    const { repo, initial } = await freshRepo({ 'a.txt': 'a\n' });
    write(repo, 'a.txt', 'a\nmore\n');
    write(repo, 'b/c.txt', `${'x'.repeat(100)}\n`.repeat(50));
    await commitAll({ worktree: repo, message: 'change', opKey: 'd/1' });

    const diff = await diffText({ worktree: repo, base: initial });
    expect(diff.truncated).toBe(false);
    expect(diff.files).toEqual(['a.txt', 'b/c.txt']);
    expect(diff.text).toContain('diff --git a/a.txt b/a.txt');
    expect(diff.text).toContain('+more');

    const cut = await diffText({ worktree: repo, base: initial, head: 'HEAD', maxBytes: 500 });
    expect(cut.truncated).toBe(true);
    expect(Buffer.byteLength(cut.text)).toBeLessThanOrEqual(500);
    expect(cut.text.endsWith('\n')).toBe(true);
    expect(diff.text.startsWith(cut.text)).toBe(true);
    expect(cut.files).toEqual(['a.txt', 'b/c.txt']);
  });

  test('reviewDiff: the whole diff with binary files as git shows them, or cut with a final line saying so', async () => {
    const { repo, initial } = await freshRepo({ 'a.txt': 'a\n' });
    write(repo, 'a.txt', 'a\nmore\n');
    writeFileSync(path.join(repo, 'logo.bin'), Buffer.from([0, 1, 2, 255, 0, 7]));
    write(repo, 'big.txt', `${'y'.repeat(99)}\n`.repeat(30));
    await commitAll({ worktree: repo, message: 'change', opKey: 'rd/1' });

    const whole = await reviewDiff(repo, initial);
    expect(whole).toContain('+more\n');
    expect(whole).toContain('Binary files /dev/null and b/logo.bin differ\n');
    expect(whole).not.toContain('diff cut');
    expect(whole.endsWith('\n')).toBe(true);

    const cut = await reviewDiff(repo, initial, 700);
    expect(cut.endsWith('\n… diff cut at 700 bytes\n')).toBe(true);
    expect(Buffer.byteLength(cut)).toBeLessThanOrEqual(700 + '… diff cut at 700 bytes\n'.length + 1);
    expect(whole.startsWith(cut.slice(0, cut.lastIndexOf('… diff cut')))).toBe(true);
  });

  test('changedFiles counts committed, modified and untracked files since base', async () => {
    const { repo, initial } = await freshRepo({ 'a.txt': 'a\n', 'keep.txt': 'k\n', '.gitignore': 'ignored.log\n' });
    write(repo, 'committed.txt', 'c\n');
    await commitAll({ worktree: repo, message: 'c', opKey: 'cf/1' });
    write(repo, 'a.txt', 'modified\n');
    write(repo, 'new/untracked.txt', 'u\n');
    write(repo, 'ignored.log', 'noise\n');
    expect(await changedFiles(repo, initial)).toEqual(['a.txt', 'committed.txt', 'new/untracked.txt']);
  });
});

describe('restoreFromHead', () => {
  test('puts changed, deleted, staged and new files under the paths back as HEAD has them; other changes stay', async () => {
    const { repo } = await freshRepo({
      'test/a.test.js': 'a\n',
      'test/b.test.js': 'b\n',
      'api.js': 'api\n',
      'src/x.js': 'x\n',
    });
    write(repo, 'test/a.test.js', 'rigged\n');
    unlinkSync(path.join(repo, 'test', 'b.test.js'));
    write(repo, 'test/new.test.js', 'planted\n');
    write(repo, 'test/staged.test.js', 'staged\n');
    await git(repo, ['add', 'test/staged.test.js']);
    write(repo, 'api.js', 'changed\n');
    write(repo, 'src/x.js', 'mine\n');

    expect(await restoreFromHead(repo, ['test', 'api.js'])).toEqual([
      'api.js',
      'test/a.test.js',
      'test/b.test.js',
      'test/new.test.js',
      'test/staged.test.js',
    ]);
    expect(readFileSync(path.join(repo, 'test', 'a.test.js'), 'utf8')).toBe('a\n');
    expect(readFileSync(path.join(repo, 'test', 'b.test.js'), 'utf8')).toBe('b\n');
    expect(readFileSync(path.join(repo, 'api.js'), 'utf8')).toBe('api\n');
    expect(existsSync(path.join(repo, 'test', 'new.test.js'))).toBe(false);
    expect(existsSync(path.join(repo, 'test', 'staged.test.js'))).toBe(false);
    expect(await git(repo, ['status', '--porcelain'])).toBe(' M src/x.js');
    // Nothing left to put back.
    expect(await restoreFromHead(repo, ['test', 'api.js'])).toEqual([]);
    expect(await restoreFromHead(repo, [])).toEqual([]);
  });
});

describe('removeWorktree', () => {
  test('removes a worktree with its changes, and is a no-op the second time', async () => {
    const { repo, worktreesDir } = await freshRepo();
    const made = await ensureWorktree({ repo, worktreesDir, branch: 'gone', base: 'main' });
    write(made.path, 'uncommitted.txt', 'x');
    await removeWorktree(repo, made.path);
    expect(existsSync(made.path)).toBe(false);
    expect(await git(repo, ['worktree', 'list', '--porcelain'])).not.toContain(made.path);
    await removeWorktree(repo, made.path);
    // The branch stays: only its checkout is gone.
    expect(await branchExists(repo, 'gone')).toBe(true);

    // A worktree whose folder was deleted behind git's back is unregistered.
    const deleted = await ensureWorktree({ repo, worktreesDir, branch: 'deleted', base: 'main' });
    rmSync(deleted.path, { recursive: true, force: true });
    await removeWorktree(repo, deleted.path);
    expect(await git(repo, ['worktree', 'list', '--porcelain'])).not.toContain(deleted.path);
  });

  test('leaves a folder that is not a worktree alone', async () => {
    const { repo } = await freshRepo();
    const other = path.join(dir, `not-a-worktree-${++counter}`);
    write(other, 'precious.txt', 'keep me');
    await expect(removeWorktree(repo, other)).rejects.toThrow(/not a worktree/);
    expect(readFileSync(path.join(other, 'precious.txt'), 'utf8')).toBe('keep me');
  });
});
