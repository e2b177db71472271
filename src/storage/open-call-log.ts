/**
 * Which call log a setting names (`TREADLE_CALL_LOG`): a `postgres://` or `postgresql://` URL is a shared
 * PostgreSQL database, anything else a SQLite file. Each backend is loaded only when chosen (the SQLite one is a
 * native module): the configuration, which the CLI reads at start, uses this module's checks.
 */
import type { CallLog } from './call-log';
import { load } from './lazy-modules';

/** Whether a `TREADLE_CALL_LOG` value is a PostgreSQL URL rather than a file. */
export function isPostgresUrl(setting: string): boolean {
  return /^postgres(ql)?:\/\//i.test(setting.trim());
}

/** The setting as it may be shown: a URL without its password, a file as it is. */
export function describeCallLog(setting: string): string {
  if (!isPostgresUrl(setting)) return setting;
  return redactedUrl(setting.trim());
}

/** A PostgreSQL URL with its password replaced by `***`, for messages and logs. */
export function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    for (const key of [...parsed.searchParams.keys()])
      if (key.toLowerCase() === 'password') parsed.searchParams.set(key, '***');
    return parsed.toString();
  } catch {
    return url.replace(/\/\/[^@/]*@/, '//***@');
  }
}

/** Opens the call log a setting names (an absolute file path, or a PostgreSQL URL). */
export function openCallLog(setting: string): CallLog {
  if (isPostgresUrl(setting)) {
    const { PostgresCallLog } = load.postgresCallLog();
    return new PostgresCallLog(setting.trim());
  }
  const { SqliteCallLog } = load.sqliteCallLog();
  return new SqliteCallLog(setting);
}
