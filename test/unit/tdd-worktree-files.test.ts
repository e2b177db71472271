/**
 * Agents' file access confined to their worktree, on a real folder. Cases: paths that leave the root
 * (`..`, absolute POSIX and Windows paths, NUL, backslashes), `.git` (the worktree's and a nested one), a
 * symlink out of the root, a symlinked parent folder, a symlink into `.git` and a dangling one are all
 * refused; symlinks that stay inside are followed for reading but never written through; read-only files
 * and folder prefixes refuse writes and deletions (also through a symlink); applyFileWrites writes nothing
 * when one path is bad; reading caps the size; listing is sorted, recursive and skips `.git` and
 * `node_modules`.
 */
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  PathEscapeError,
  ReadOnlyPathError,
  applyFileWrites,
  deleteFileInside,
  listFilesInside,
  readFileInside,
  resolveInside,
  writeFileInside,
} from '../../src/agents/worktree-files';

let base: string;
let root: string;
let outside: string;
let counter = 0;

beforeAll(() => {
  base = mkdtempSync(path.join(tmpdir(), 'treadle-tdd-files-'));
});
afterAll(() => {
  rmSync(base, { recursive: true, force: true });
});
beforeEach(() => {
  // A fresh worktree-like folder (with a `.git` file, as worktrees have) and a folder outside it.
  root = path.join(base, `wt-${++counter}`);
  outside = path.join(base, `outside-${counter}`);
  mkdirSync(path.join(root, 'src'), { recursive: true });
  mkdirSync(outside);
  writeFileSync(path.join(root, '.git'), 'gitdir: /somewhere/.git/worktrees/x\n');
  writeFileSync(path.join(root, 'src', 'a.ts'), 'export const a = 1;\n');
  writeFileSync(path.join(outside, 'secret.txt'), 'secret');
});

function refusal(run: () => unknown): PathEscapeError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(PathEscapeError);
    return error as PathEscapeError;
  }
  throw new Error('expected a PathEscapeError');
}

describe('resolveInside', () => {
  test('resolves relative paths inside the root, normalised', () => {
    expect(resolveInside(root, 'src/a.ts')).toBe(path.join(root, 'src', 'a.ts'));
    expect(resolveInside(root, './src/../src/new/b.ts')).toBe(path.join(root, 'src', 'new', 'b.ts'));
    expect(resolveInside(root, '.')).toBe(root);
  });

  test.each([
    ['', /empty/],
    ['   ', /empty/],
    ['../x.ts', /outside the worktree/],
    ['src/../../x.ts', /outside the worktree/],
    ['..', /outside the worktree/],
    ['/etc/passwd', /relative/],
    ['C:\\Windows\\system.ini', /relative/],
    ['C:/Windows', /relative/],
    ['c:relative', /relative/],
    ['\\\\server\\share', /relative/],
    ['src\\..\\..\\x', /"\/"/],
    ['src/a.ts\0.png', /NUL/],
    ['.git', /\.git/],
    ['.git/config', /\.git/],
    ['.GIT/hooks/pre-commit', /\.git/],
    ['vendor/lib/.git/config', /\.git/],
  ])('refuses %j', (requested, reason) => {
    const error = refusal(() => resolveInside(root, requested));
    expect(error.requested).toBe(requested);
    expect(error.message).toMatch(reason);
  });

  test('refuses a symlink that leads out of the root, as the file or as a parent folder', () => {
    symlinkSync(tmpdir(), path.join(root, 'tmp-link'));
    symlinkSync(outside, path.join(root, 'src', 'linked-dir'));
    symlinkSync(path.join(outside, 'secret.txt'), path.join(root, 'secret-link.txt'));
    expect(refusal(() => resolveInside(root, 'tmp-link')).message).toMatch(/symlink on the way leads outside/);
    expect(refusal(() => resolveInside(root, 'tmp-link/anything.txt')).message).toMatch(/symlink/);
    expect(refusal(() => resolveInside(root, 'src/linked-dir/secret.txt')).message).toMatch(/symlink/);
    expect(refusal(() => resolveInside(root, 'src/linked-dir/new/deeper.txt')).message).toMatch(/symlink/);
    expect(refusal(() => resolveInside(root, 'secret-link.txt')).message).toMatch(/symlink/);
  });

  test('refuses a symlink into .git and a dangling symlink', () => {
    mkdirSync(path.join(root, 'nested', '.git'), { recursive: true });
    symlinkSync(path.join(root, 'nested', '.git'), path.join(root, 'innocent'));
    symlinkSync(path.join(root, 'does-not-exist'), path.join(root, 'dangling'));
    expect(refusal(() => resolveInside(root, 'innocent/config')).message).toMatch(/into \.git/);
    expect(refusal(() => resolveInside(root, 'dangling')).message).toMatch(/does not exist/);
  });

  test('a symlink that stays inside the root is allowed', () => {
    symlinkSync(path.join(root, 'src'), path.join(root, 'alias'));
    expect(resolveInside(root, 'alias/a.ts')).toBe(path.join(root, 'alias', 'a.ts'));
  });
});

describe('reading', () => {
  test('reads a file, through an inside symlink too, and caps the size', async () => {
    symlinkSync(path.join(root, 'src', 'a.ts'), path.join(root, 'a-link.ts'));
    expect(await readFileInside(root, 'src/a.ts')).toBe('export const a = 1;\n');
    expect(await readFileInside(root, 'a-link.ts')).toBe('export const a = 1;\n');
    await expect(readFileInside(root, 'src/a.ts', { maxBytes: 5 })).rejects.toThrow(
      'src/a.ts is 20 bytes, more than the 5 bytes that may be read',
    );
    await expect(readFileInside(root, 'src/missing.ts')).rejects.toThrow('src/missing.ts does not exist');
    await expect(readFileInside(root, 'src')).rejects.toThrow('src is not a file');
    await expect(readFileInside(root, `../outside-${counter}/secret.txt`)).rejects.toBeInstanceOf(PathEscapeError);
  });
});

describe('writing and deleting', () => {
  test('writes a file, making its folders', async () => {
    await writeFileInside(root, 'src/deep/er/b.ts', 'export const b = 2;\n');
    expect(readFileSync(path.join(root, 'src', 'deep', 'er', 'b.ts'), 'utf8')).toBe('export const b = 2;\n');
    await writeFileInside(root, 'src/a.ts', 'replaced\n');
    expect(readFileSync(path.join(root, 'src', 'a.ts'), 'utf8')).toBe('replaced\n');
  });

  test('never writes through a symlink, not even one that stays inside', async () => {
    symlinkSync(path.join(root, 'src', 'a.ts'), path.join(root, 'a-link.ts'));
    symlinkSync(path.join(outside, 'secret.txt'), path.join(root, 'secret-link.txt'));
    await expect(writeFileInside(root, 'a-link.ts', 'x')).rejects.toThrow(/symlink/);
    await expect(writeFileInside(root, 'secret-link.txt', 'pwned')).rejects.toBeInstanceOf(PathEscapeError);
    symlinkSync(outside, path.join(root, 'out-dir'));
    await expect(writeFileInside(root, 'out-dir/new.txt', 'pwned')).rejects.toBeInstanceOf(PathEscapeError);
    expect(readFileSync(path.join(root, 'src', 'a.ts'), 'utf8')).toBe('export const a = 1;\n');
    expect(readFileSync(path.join(outside, 'secret.txt'), 'utf8')).toBe('secret');
    expect(existsSync(path.join(outside, 'new.txt'))).toBe(false);
  });

  test('refuses .git and paths outside for writes and deletions', async () => {
    await expect(writeFileInside(root, '.git', 'gitdir: /elsewhere')).rejects.toBeInstanceOf(PathEscapeError);
    await expect(writeFileInside(root, '../escape.txt', 'x')).rejects.toBeInstanceOf(PathEscapeError);
    await expect(deleteFileInside(root, '.git')).rejects.toBeInstanceOf(PathEscapeError);
    await expect(deleteFileInside(root, `../outside-${counter}/secret.txt`)).rejects.toBeInstanceOf(PathEscapeError);
    expect(readFileSync(path.join(root, '.git'), 'utf8')).toBe('gitdir: /somewhere/.git/worktrees/x\n');
    expect(existsSync(path.join(base, 'escape.txt'))).toBe(false);
    expect(existsSync(path.join(outside, 'secret.txt'))).toBe(true);
  });

  test('read-only files and folder prefixes refuse writes and deletions', async () => {
    const readOnly = ['src/a.ts', 'interfaces/', './contracts'];
    mkdirSync(path.join(root, 'interfaces'));
    writeFileSync(path.join(root, 'interfaces', 'api.ts'), 'export interface Api {}\n');
    for (const target of [
      'src/a.ts',
      './src/a.ts',
      'interfaces/api.ts',
      'interfaces/new.ts',
      'contracts/suite.test.ts',
      'src/../interfaces/api.ts',
    ]) {
      const error = await writeFileInside(root, target, 'changed', { readOnly }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ReadOnlyPathError);
      expect((error as ReadOnlyPathError).requested).toBe(target);
      expect((error as Error).message).toMatch(/is read-only/);
    }
    await expect(deleteFileInside(root, 'interfaces/api.ts', { readOnly })).rejects.toBeInstanceOf(ReadOnlyPathError);
    // A name that only starts like a read-only one is not read-only.
    await writeFileInside(root, 'src/a.ts.bak', 'ok', { readOnly });
    await writeFileInside(root, 'interfaces-old/x.ts', 'ok', { readOnly });
    expect(readFileSync(path.join(root, 'src', 'a.ts'), 'utf8')).toBe('export const a = 1;\n');
    expect(readFileSync(path.join(root, 'interfaces', 'api.ts'), 'utf8')).toBe('export interface Api {}\n');
    expect(existsSync(path.join(root, 'interfaces', 'new.ts'))).toBe(false);
  });

  test('a read-only folder stays read-only through a symlink to it', async () => {
    mkdirSync(path.join(root, 'interfaces'));
    symlinkSync(path.join(root, 'interfaces'), path.join(root, 'alias'));
    await expect(writeFileInside(root, 'alias/api.ts', 'sneaky', { readOnly: ['interfaces'] })).rejects.toBeInstanceOf(
      ReadOnlyPathError,
    );
    expect(existsSync(path.join(root, 'interfaces', 'api.ts'))).toBe(false);
  });

  test('deletes a file; deleting a missing one is a no-op', async () => {
    await deleteFileInside(root, 'src/a.ts');
    expect(existsSync(path.join(root, 'src', 'a.ts'))).toBe(false);
    await deleteFileInside(root, 'src/a.ts');
    await expect(deleteFileInside(root, 'src')).rejects.toThrow(/folder/);
  });

  test('deleting an inside symlink removes the link, not its target', async () => {
    symlinkSync(path.join(root, 'src', 'a.ts'), path.join(root, 'a-link.ts'));
    expect(readlinkSync(path.join(root, 'a-link.ts'))).toBe(path.join(root, 'src', 'a.ts'));
    await deleteFileInside(root, 'a-link.ts');
    expect(existsSync(path.join(root, 'a-link.ts'))).toBe(false);
    expect(readFileSync(path.join(root, 'src', 'a.ts'), 'utf8')).toBe('export const a = 1;\n');
  });
});

describe('applyFileWrites', () => {
  test('writes and deletes, returning the normalised paths', async () => {
    const result = await applyFileWrites(root, { './src/b.ts': 'b\n', 'test/b.test.ts': 't\n', 'src/a.ts': null });
    expect(result).toEqual({ written: ['src/b.ts', 'test/b.test.ts'], deleted: ['src/a.ts'] });
    expect(readFileSync(path.join(root, 'src', 'b.ts'), 'utf8')).toBe('b\n');
    expect(readFileSync(path.join(root, 'test', 'b.test.ts'), 'utf8')).toBe('t\n');
    expect(existsSync(path.join(root, 'src', 'a.ts'))).toBe(false);
  });

  test.each([
    ['a path outside', { '../escape.txt': 'x' }, PathEscapeError],
    ['a .git path', { '.git/hooks/post-commit': '#!/bin/sh\n' }, PathEscapeError],
    ['a read-only path', { 'interfaces/api.ts': 'changed' }, ReadOnlyPathError],
    ['a folder', { src: 'not a file' }, Error],
  ])('writes nothing when one path is bad: %s', async (_label, bad, errorType) => {
    const writes: Record<string, string | null> = {
      'src/first.ts': 'first\n',
      'new-folder/second.ts': 'second\n',
      'src/a.ts': null,
      ...bad,
    };
    await expect(applyFileWrites(root, writes, { readOnly: ['interfaces'] })).rejects.toBeInstanceOf(errorType);
    expect(existsSync(path.join(root, 'src', 'first.ts'))).toBe(false);
    expect(existsSync(path.join(root, 'new-folder'))).toBe(false);
    expect(existsSync(path.join(root, 'src', 'a.ts'))).toBe(true);
    expect(existsSync(path.join(base, 'escape.txt'))).toBe(false);
  });
});

describe('listFilesInside', () => {
  test('lists files recursively, sorted, skipping .git and node_modules, without following symlinks', async () => {
    mkdirSync(path.join(root, 'node_modules', 'dep'), { recursive: true });
    writeFileSync(path.join(root, 'node_modules', 'dep', 'index.js'), '');
    mkdirSync(path.join(root, 'vendor', '.git'), { recursive: true });
    writeFileSync(path.join(root, 'vendor', '.git', 'HEAD'), '');
    writeFileSync(path.join(root, 'vendor', 'lib.ts'), '');
    writeFileSync(path.join(root, 'README.md'), '');
    mkdirSync(path.join(root, 'src', 'z'));
    writeFileSync(path.join(root, 'src', 'z', 'last.ts'), '');
    symlinkSync(outside, path.join(root, 'outside-link'));
    expect(await listFilesInside(root)).toEqual([
      'README.md',
      'outside-link',
      'src/a.ts',
      'src/z/last.ts',
      'vendor/lib.ts',
    ]);
    expect(await listFilesInside(root, 'src')).toEqual(['src/a.ts', 'src/z/last.ts']);
    expect(await listFilesInside(root, 'src/a.ts')).toEqual(['src/a.ts']);
    expect(await listFilesInside(root, 'missing')).toEqual([]);
    await expect(listFilesInside(root, '..')).rejects.toBeInstanceOf(PathEscapeError);
  });

  test('returns at most maxEntries', async () => {
    for (let i = 0; i < 30; i++) writeFileSync(path.join(root, 'src', `f${String(i).padStart(2, '0')}.ts`), '');
    const listed = await listFilesInside(root, '.', { maxEntries: 10 });
    expect(listed).toHaveLength(10);
    expect(listed[0]).toBe('src/a.ts');
    expect(listed.slice(1)).toEqual([
      'src/f00.ts',
      'src/f01.ts',
      'src/f02.ts',
      'src/f03.ts',
      'src/f04.ts',
      'src/f05.ts',
      'src/f06.ts',
      'src/f07.ts',
      'src/f08.ts',
    ]);
  });
});
