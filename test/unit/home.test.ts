/**
 * One home for local state (issue 26 §3, src/home.ts). Cases: TREADLE_HOME wins; the per-user default on Linux
 * (XDG_STATE_HOME, a relative one ignored, else ~/.local/state), macOS and Windows; every setting's default
 * under the home, absolute values as given and relative ones taken from the home, never from the working
 * directory; the configuration, the TDD roots, the loop workspace, the replies folders, the dev database and
 * the file blob store built from it; the missing-blob message naming the folder and the setting; the warning
 * about an older version's `./.treadle/`.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../src/config';
import {
  devDatabaseFile,
  HOME_SETTINGS,
  homeLocation,
  homeLocations,
  oldStateWarning,
  treadleHome,
  type HomeSetting,
} from '../../src/config/home';
import { allowedRepoRoots } from '../../src/kinds/tdd/worker/repo-roots';
import { loopFolders } from '../../src/kinds/loop/worker/run-folder';
import { repliesFolders } from '../../src/agents/scripted';
import { BlobNotFoundError, FileBlobStore } from '../../src/storage/blob-store';

const HOME = { TREADLE_HOME: '/srv/treadle' };

describe('treadleHome', () => {
  it('is TREADLE_HOME when set, made absolute', () => {
    expect(treadleHome({ TREADLE_HOME: ' /srv/treadle ', HOME: '/home/u' }, 'linux')).toBe('/srv/treadle');
    expect(treadleHome({ TREADLE_HOME: '/srv/treadle' }, 'win32')).toBe('/srv/treadle');
    // The one setting a relative value of which cannot be taken from the home: the shell's directory.
    expect(treadleHome({ TREADLE_HOME: 'state' }, 'linux')).toBe(path.resolve('state'));
  });

  it('defaults per user on Linux: $XDG_STATE_HOME/treadle, else ~/.local/state/treadle', () => {
    expect(treadleHome({ HOME: '/home/u', XDG_STATE_HOME: '/var/state/u' }, 'linux')).toBe('/var/state/u/treadle');
    expect(treadleHome({ HOME: '/home/u' }, 'linux')).toBe('/home/u/.local/state/treadle');
    // The XDG spec: a relative XDG_STATE_HOME is ignored; a blank TREADLE_HOME is unset.
    expect(treadleHome({ HOME: '/home/u', XDG_STATE_HOME: 'state', TREADLE_HOME: ' ' }, 'linux')).toBe(
      '/home/u/.local/state/treadle',
    );
    expect(treadleHome({ HOME: '/home/u' }, 'freebsd')).toBe('/home/u/.local/state/treadle');
    expect(treadleHome({}, 'linux')).toBe(path.posix.join(os.homedir(), '.local', 'state', 'treadle'));
  });

  it('defaults to ~/Library/Application Support/treadle on macOS and %LOCALAPPDATA%\\treadle on Windows', () => {
    expect(treadleHome({ HOME: '/Users/u', XDG_STATE_HOME: '/x' }, 'darwin')).toBe(
      '/Users/u/Library/Application Support/treadle',
    );
    expect(treadleHome({ LOCALAPPDATA: 'C:\\Users\\u\\AppData\\Local' }, 'win32')).toBe(
      'C:\\Users\\u\\AppData\\Local\\treadle',
    );
    expect(treadleHome({ USERPROFILE: 'C:\\Users\\u' }, 'win32')).toBe('C:\\Users\\u\\AppData\\Local\\treadle');
  });
});

describe('the settings under the home', () => {
  it('default to their entry in the home', () => {
    const defaults = Object.fromEntries(
      (Object.keys(HOME_SETTINGS) as HomeSetting[]).map((setting) => [setting, homeLocation(setting, HOME)]),
    );
    expect(defaults).toEqual({
      TREADLE_BLOB_DIR: '/srv/treadle/blobs',
      TREADLE_CALL_LOG: '/srv/treadle/calls.sqlite',
      TREADLE_TASKS_FILE: '/srv/treadle/tasks.json',
      TREADLE_LOOP_WORKSPACE: '/srv/treadle/workspace',
      TREADLE_TDD_REPOS: '/srv/treadle/repos',
      TREADLE_REPLIES_DIR: '/srv/treadle/replies',
    });
    expect(devDatabaseFile(HOME)).toBe('/srv/treadle/temporal.sqlite');
  });

  it('take absolute values as given and relative ones from the home, not from the working directory', () => {
    expect(homeLocation('TREADLE_BLOB_DIR', { ...HOME, TREADLE_BLOB_DIR: '/data/blobs' })).toBe('/data/blobs');
    expect(homeLocation('TREADLE_BLOB_DIR', { ...HOME, TREADLE_BLOB_DIR: ' shared/blobs ' })).toBe(
      '/srv/treadle/shared/blobs',
    );
    expect(homeLocation('TREADLE_CALL_LOG', { ...HOME, TREADLE_CALL_LOG: '' })).toBe('/srv/treadle/calls.sqlite');
    const listed = { ...HOME, TREADLE_TDD_REPOS: ['/work/repos', 'mine', ' '].join(path.delimiter) };
    expect(homeLocations('TREADLE_TDD_REPOS', listed)).toEqual(['/work/repos', '/srv/treadle/mine']);
    expect(homeLocations('TREADLE_TDD_REPOS', HOME)).toEqual(['/srv/treadle/repos']);
  });

  it('give the configuration its absolute paths', () => {
    const config = loadConfig({ ...HOME, TREADLE_CALL_LOG: 'logs/calls.sqlite', TREADLE_TASKS_FILE: '/t/tasks.json' });
    expect(config).toMatchObject({
      home: '/srv/treadle',
      blobDir: '/srv/treadle/blobs',
      blobStore: { kind: 'file', dir: '/srv/treadle/blobs' },
      callLog: '/srv/treadle/logs/calls.sqlite',
      tasksFile: '/t/tasks.json',
    });
    expect(loadConfig({ ...HOME, TREADLE_CALL_LOG: 'off' }).callLog).toBeNull();
    expect(loadConfig(HOME).callLog).toBe('/srv/treadle/calls.sqlite');
  });

  it('leave a PostgreSQL call log URL as it is: a database is not a place in the home', () => {
    for (const url of ['postgres://u:p@db:5432/treadle', 'postgresql://db/treadle?sslmode=require', 'POSTGRES://db/x'])
      expect(loadConfig({ ...HOME, TREADLE_CALL_LOG: ` ${url} ` }).callLog).toBe(url);
  });

  it("are where the worker's TDD roots, loop workspace and replies folders are", () => {
    expect(allowedRepoRoots(HOME)).toEqual(['/srv/treadle/repos']);
    expect(allowedRepoRoots({ ...HOME, TREADLE_TDD_REPOS: `/tmp${path.delimiter}code` })).toEqual([
      '/tmp',
      '/srv/treadle/code',
    ]);
    expect(loopFolders(HOME)).toEqual({
      workspace: '/srv/treadle/workspace',
      runs: '/srv/treadle/workspace/.treadle/pipeline-runs',
    });
    expect(loopFolders({ ...HOME, TREADLE_LOOP_WORKSPACE: 'project', TREADLE_LOOP_RUNS: '/runs' })).toEqual({
      workspace: '/srv/treadle/project',
      runs: '/runs',
    });
    expect(repliesFolders(HOME)).toEqual(['/srv/treadle/replies']);
  });
});

describe('the file blob store', () => {
  it('lives in the home by default and names its folder and setting when a blob is missing', async () => {
    // The test setup points TREADLE_HOME at its own folder.
    expect(new FileBlobStore().dir).toBe(homeLocation('TREADLE_BLOB_DIR', process.env));
    expect(new FileBlobStore('relative/blobs').dir).toBe(path.resolve('relative/blobs'));
    const dir = mkdtempSync(path.join(os.tmpdir(), 'home-blobs-'));
    const missing = `sha256:${'a'.repeat(64)}`;
    const error = await new FileBlobStore(dir).get(missing).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BlobNotFoundError);
    expect((error as Error).message).toBe(
      `blob ${missing} not found in ${dir} (TREADLE_BLOB_DIR; the workers and the CLI must share it, or use ` +
        'TREADLE_BLOB_STORE=s3)',
    );
  });
});

describe('oldStateWarning', () => {
  const present =
    (...files: string[]) =>
    (file: string): boolean =>
      files.includes(file);

  it("warns about an older version's state in ./.treadle/ with the line that keeps it", () => {
    for (const entry of ['blobs', 'calls.sqlite', 'tasks.json', 'temporal.sqlite']) {
      expect(oldStateWarning({ HOME: '/home/u' }, '/work/p', present(`/work/p/.treadle/${entry}`))).toBe(
        'treadle: /work/p/.treadle holds state from an older version, which now keeps it in ' +
          '/home/u/.local/state/treadle; to keep using it, set TREADLE_HOME=/work/p/.treadle',
      );
    }
  });

  it('says nothing when TREADLE_HOME is set, or when ./.treadle/ holds only loop runs', () => {
    expect(oldStateWarning(HOME, '/work/p', present('/work/p/.treadle/blobs'))).toBeUndefined();
    expect(oldStateWarning({}, '/work/p', present('/work/p/.treadle/pipeline-runs'))).toBeUndefined();
    expect(oldStateWarning({}, '/work/p', present())).toBeUndefined();
  });
});
