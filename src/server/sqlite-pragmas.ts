/**
 * The SQLite settings of every dev server Treadle starts. The default, WAL with synchronous=NORMAL, keeps
 * the database consistent when the server or the machine crashes (NORMAL may lose the last transactions on
 * power loss, never the file) at about three times the throughput of SQLite's default rollback journal.
 */

/** What every dev server runs with unless `TREADLE_SQLITE_PRAGMAS` or the caller says otherwise. */
export const DEFAULT_SQLITE_PRAGMAS: Readonly<Record<string, string>> = { journal_mode: 'WAL', synchronous: 'NORMAL' };

/** The environment variable that overrides the defaults, e.g. `journal_mode=WAL,synchronous=FULL`. */
export const SQLITE_PRAGMAS_ENV = 'TREADLE_SQLITE_PRAGMAS';

const NAME = /^[A-Za-z_]+$/;
const VALUE = /^[A-Za-z0-9_-]+$/;

/**
 * Parses `name=value` pairs separated by commas (spaces around them allowed). Throws one line naming the
 * variable and the offending pair when the text is malformed; an empty text is no pragmas.
 */
export function parseSqlitePragmas(text: string, source = SQLITE_PRAGMAS_ENV): Record<string, string> {
  const pragmas: Record<string, string> = {};
  for (const pair of text
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p !== '')) {
    const [name, value, ...rest] = pair.split('=').map((p) => p.trim());
    if (!name || !value || rest.length > 0 || !NAME.test(name) || !VALUE.test(value)) {
      throw new Error(
        `${source} must be comma-separated name=value pairs such as "journal_mode=WAL,synchronous=NORMAL"; "${pair}" is not one`,
      );
    }
    pragmas[name.toLowerCase()] = value;
  }
  return pragmas;
}

/**
 * The pragmas a server starts with: the defaults, overridden pragma by pragma by `TREADLE_SQLITE_PRAGMAS`,
 * then by the caller's own (benchmarks pin theirs so their records stay true whatever the environment).
 */
export function resolveSqlitePragmas(
  explicit: Record<string, string> = {},
  env: NodeJS.ProcessEnv = process.env,
): Record<string, string> {
  const fromEnv = env[SQLITE_PRAGMAS_ENV] ? parseSqlitePragmas(env[SQLITE_PRAGMAS_ENV]) : {};
  const fromCaller = parseSqlitePragmas(
    Object.entries(explicit)
      .map(([name, value]) => `${name}=${value}`)
      .join(','),
    'sqlitePragmas',
  );
  return { ...DEFAULT_SQLITE_PRAGMAS, ...fromEnv, ...fromCaller };
}

/** The `--sqlite-pragma` arguments of `temporal server start-dev` for these pragmas. */
export function sqlitePragmaArgs(pragmas: Record<string, string>): string[] {
  return Object.entries(pragmas).flatMap(([name, value]) => ['--sqlite-pragma', `${name}=${value}`]);
}
