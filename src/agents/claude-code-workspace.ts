/**
 * What the Claude Code CLI may touch and see: its working directories (one per attempt under a work root,
 * leased per call and removed after unless kept) and its environment (an allow-list of the worker's variables).
 */
import { createHash } from 'node:crypto';
import { lstatSync, mkdirSync, rmSync, rmdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AgentContext } from './providers';

/** Environment variable naming the root of the working directories. */
export const WORK_DIR_ENV = 'TREADLE_WORK_DIR';
/** Environment variable that keeps working directories after their calls (`1` or `true`). */
export const KEEP_WORK_DIRS_ENV = 'TREADLE_KEEP_WORK_DIRS';
/** Environment variable adding names (comma-separated, `PREFIX_*` allowed) to the CLI's environment allow-list. */
export const CLAUDE_ENV_ENV = 'TREADLE_CLAUDE_ENV';

/**
 * The worker's environment variables the CLI sees by default: what a process needs to run (PATH, HOME, user,
 * locale, time zone, temp folder, shell for its Bash tool), Claude's own settings and credentials
 * (`ANTHROPIC_*`, `CLAUDE_CODE_*`, `CLAUDE_CONFIG_DIR`), and the proxy and CA settings needed to reach the API.
 */
export const CLAUDE_CODE_ENV_ALLOW_LIST: readonly string[] = [
  'PATH',
  'HOME',
  'USER',
  'LOGNAME',
  'SHELL',
  'LANG',
  'LANGUAGE',
  'LC_*',
  'TZ',
  'TMPDIR',
  'ANTHROPIC_*',
  'CLAUDE_CODE_*',
  'CLAUDE_CONFIG_DIR',
  'HTTP_PROXY',
  'HTTPS_PROXY',
  'NO_PROXY',
  'http_proxy',
  'https_proxy',
  'no_proxy',
  'NODE_EXTRA_CA_CERTS',
];

/** The root of the working directories: `TREADLE_WORK_DIR`, else `treadle-work` in the system temp folder. */
export function claudeCodeWorkRoot(env: NodeJS.ProcessEnv = process.env): string {
  // Outside any project by default: the CLI looks for CLAUDE.md, settings and git repositories in the
  // parents of its working directory, and must not find the worker's.
  return path.resolve(env[WORK_DIR_ENV] || path.join(os.tmpdir(), 'treadle-work'));
}

/** Whether working directories are kept after their calls: `TREADLE_KEEP_WORK_DIRS` is `1` or `true`. */
export function claudeCodeKeepWorkDirs(env: NodeJS.ProcessEnv = process.env): boolean {
  return /^(1|true|yes)$/i.test(env[KEEP_WORK_DIRS_ENV] ?? '');
}

/** The default allow-list plus the names in `TREADLE_CLAUDE_ENV`. */
export function claudeCodeEnvAllowList(env: NodeJS.ProcessEnv = process.env): string[] {
  const extra = (env[CLAUDE_ENV_ENV] ?? '')
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '');
  return [...CLAUDE_CODE_ENV_ALLOW_LIST, ...extra];
}

/**
 * The CLI's whole environment: the variables of `from` whose names the allow-list matches (a name exactly,
 * or a `PREFIX_*` pattern by prefix), then `extra` over them.
 */
export function cliEnvironment(
  from: NodeJS.ProcessEnv,
  allowList: readonly string[],
  extra: NodeJS.ProcessEnv = {},
): NodeJS.ProcessEnv {
  const names = new Set(allowList.filter((name) => !name.endsWith('*')));
  const prefixes = allowList.filter((name) => name.endsWith('*')).map((name) => name.slice(0, -1));
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(from)) {
    if (value !== undefined && (names.has(name) || prefixes.some((prefix) => name.startsWith(prefix))))
      env[name] = value;
  }
  for (const [name, value] of Object.entries(extra)) if (value !== undefined) env[name] = value;
  return env;
}

/**
 * The working directory of an attempt: `<root>/<item>/<stage>/attempt-<n>`, shared by the attempt's calls
 * (its stage's and its gate's). Item ids and stage names become safe folder names: other characters turn
 * into `_`, and a name that had to change gets a short hash so that two names never share a folder.
 */
export function attemptWorkDir(root: string, ctx: Pick<AgentContext, 'itemId' | 'stage' | 'attempt'>): string {
  return path.join(root, folderName(ctx.itemId), folderName(ctx.stage), `attempt-${ctx.attempt}`);
}

/** At most this many characters of a name are kept in a folder name. */
const MAX_FOLDER_NAME_CHARS = 80;

function folderName(name: string): string {
  const safe = name
    .replace(/[^A-Za-z0-9_.-]/g, '_')
    .replace(/^\.+/, '_')
    .slice(0, MAX_FOLDER_NAME_CHARS);
  if (safe === name && safe !== '') return safe;
  return `${safe}-${createHash('sha256').update(name).digest('hex').slice(0, 8)}`;
}

/** A working directory lent to one call; `release` when the call is over. */
export interface WorkDirLease {
  path: string;
  /** The caller's directory (the request's `workdir` or the `cwd` option), not one made here. */
  given: boolean;
  release(): void;
}

/** Calls of this process running in each owned working directory, so one call never removes another's. */
const callsInWorkDir = new Map<string, number>();

/**
 * Creates the root if needed and checks that it is a directory of this user that no one else can write to:
 * in a shared temp folder, someone else could otherwise plant a symlink that leads the CLI elsewhere.
 */
export function ensurePrivateRoot(root: string): void {
  mkdirSync(root, { recursive: true, mode: 0o700 });
  const stat = lstatSync(root);
  const uid = process.getuid?.();
  if (!stat.isDirectory() || (uid !== undefined && stat.uid !== uid) || (stat.mode & 0o022) !== 0) {
    throw new Error(
      `${root} must be a directory of this user that no one else can write to (set ${WORK_DIR_ENV} to another one)`,
    );
  }
}

/** Creates (if needed) and lends an attempt's working directory. */
export function leaseWorkDir(dir: string, keep: boolean): WorkDirLease {
  for (let tries = 1; ; tries++) {
    try {
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      break;
    } catch (error) {
      // Another worker process on this machine may have just removed an empty parent on the way.
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT' || tries >= 3) throw error;
    }
  }
  callsInWorkDir.set(dir, (callsInWorkDir.get(dir) ?? 0) + 1);
  let released = false;
  return {
    path: dir,
    given: false,
    release: () => {
      if (released) return;
      released = true;
      const left = (callsInWorkDir.get(dir) ?? 1) - 1;
      if (left > 0) {
        callsInWorkDir.set(dir, left);
        return;
      }
      callsInWorkDir.delete(dir);
      if (keep) return;
      removeQuietly(dir);
      // Leave no empty item and stage folders behind (a folder still in use is not empty and stays).
      for (const parent of [path.dirname(dir), path.dirname(path.dirname(dir))]) {
        try {
          rmdirSync(parent);
        } catch {
          break;
        }
      }
    },
  };
}

/** Removes a directory tree; a failure to clean up is not the call's failure. */
export function removeQuietly(dir: string): void {
  try {
    rmSync(dir, { recursive: true, force: true, maxRetries: 2 });
  } catch {
    /* left for the operator; the next call of the attempt recreates or reuses it */
  }
}
