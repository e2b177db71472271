/**
 * Where Treadle keeps its local state (issue 26 §3): one home folder, `TREADLE_HOME`, else a per-user one, so
 * every command and worker finds the same blobs, call log and task list whatever directory it runs in. The
 * settings that name a place in it take relative values from the home, never from the working directory.
 * Only node:os and node:path: the CLI reads this at start.
 */
import os from 'node:os';
import path from 'node:path';

/** The folder Treadle keeps its local state in. */
export const HOME_ENV = 'TREADLE_HOME';

/**
 * The settings that name a place under the home, each with its default there: the file blob store, the call
 * log, the example task list, the loop workspace, the TDD repositories and the scripted replies.
 */
export const HOME_SETTINGS = {
  TREADLE_BLOB_DIR: 'blobs',
  TREADLE_CALL_LOG: 'calls.sqlite',
  TREADLE_TASKS_FILE: 'tasks.json',
  TREADLE_LOOP_WORKSPACE: 'workspace',
  TREADLE_TDD_REPOS: 'repos',
  TREADLE_REPLIES_DIR: 'replies',
} as const;

/** A setting whose value is a place under the home. */
export type HomeSetting = keyof typeof HOME_SETTINGS;

/** The `treadle dev` server's database in the home. */
export const DEV_DATABASE = 'temporal.sqlite';

/**
 * The home, absolute: `TREADLE_HOME` (a relative value is taken from the working directory, as a shell would),
 * else per user: `$XDG_STATE_HOME/treadle` or `~/.local/state/treadle` on Linux and other Unixes,
 * `~/Library/Application Support/treadle` on macOS, `%LOCALAPPDATA%\treadle` on Windows.
 */
export function treadleHome(
  env: NodeJS.ProcessEnv = process.env,
  platform: NodeJS.Platform = process.platform,
): string {
  const configured = env[HOME_ENV]?.trim();
  if (configured) return path.resolve(configured);
  if (platform === 'win32') {
    const local =
      env.LOCALAPPDATA?.trim() || path.win32.join(env.USERPROFILE?.trim() || os.homedir(), 'AppData', 'Local');
    return path.win32.join(local, 'treadle');
  }
  const home = env.HOME?.trim() || os.homedir();
  if (platform === 'darwin') return path.posix.join(home, 'Library', 'Application Support', 'treadle');
  // The XDG spec says to ignore a relative XDG_STATE_HOME.
  const state = env.XDG_STATE_HOME?.trim();
  return path.posix.join(
    state && path.posix.isAbsolute(state) ? state : path.posix.join(home, '.local', 'state'),
    'treadle',
  );
}

/** The absolute path a setting names: its value, a relative one taken from the home; unset or blank, its default there. */
export function homeLocation(setting: HomeSetting, env: NodeJS.ProcessEnv = process.env): string {
  const given = env[setting]?.trim();
  return path.resolve(treadleHome(env), given || HOME_SETTINGS[setting]);
}

/** The same for a setting listing several folders (separated by `path.delimiter`), each taken from the home. */
export function homeLocations(setting: HomeSetting, env: NodeJS.ProcessEnv = process.env): string[] {
  const listed = (env[setting] ?? '').split(path.delimiter).filter((p) => p.trim() !== '');
  const home = treadleHome(env);
  return (listed.length > 0 ? listed : [HOME_SETTINGS[setting]]).map((p) => path.resolve(home, p.trim()));
}

/** The `treadle dev` / `demo` database when `--db` is not given. */
export function devDatabaseFile(env: NodeJS.ProcessEnv = process.env): string {
  return path.join(treadleHome(env), DEV_DATABASE);
}

/** What an older Treadle kept under `./.treadle/`: a folder holding any of these is old state, not a loop's runs. */
const OLD_STATE = ['blobs', 'calls.sqlite', 'tasks.json', 'temporal.sqlite'];

/**
 * The one-line warning for state an older version left in `<cwd>/.treadle/`, which this version no longer
 * reads unless `TREADLE_HOME` points there; undefined when there is none or `TREADLE_HOME` is set.
 */
export function oldStateWarning(
  env: NodeJS.ProcessEnv,
  cwd: string,
  exists: (file: string) => boolean,
): string | undefined {
  if (env[HOME_ENV]?.trim()) return undefined;
  const old = path.join(cwd, '.treadle');
  if (!OLD_STATE.some((entry) => exists(path.join(old, entry)))) return undefined;
  return `treadle: ${old} holds state from an older version, which now keeps it in ${treadleHome(env)}; to keep using it, set TREADLE_HOME=${old}`;
}
