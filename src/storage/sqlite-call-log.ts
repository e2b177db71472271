/**
 * The call log (call-log.ts) in an embedded SQLite file (better-sqlite3, WAL): the default, with no server
 * to run, one file that any number of worker and CLI processes on the machine share safely, and readable
 * with any sqlite client. Workers on several machines share one log through PostgreSQL instead
 * (postgres-call-log.ts).
 */
import type Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { CallRecord } from '../model/shapes';
import {
  CALL_LOG_COLUMNS,
  callLogColumns,
  rowToCall,
  summarizeCalls,
  type CallFilter,
  type CallGrouping,
  type CallLog,
  type CallLogRow,
  type CallLogSummary,
  type CallOrigin,
} from './call-log';
import { load } from './lazy-modules';

/** The SQLite call log. Its work is synchronous; the methods return promises to fit {@link CallLog}. */
export class SqliteCallLog implements CallLog {
  private readonly db: Database.Database;
  private readonly insert: Database.Statement;

  constructor(readonly file: string) {
    if (file !== ':memory:') mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
    // The native module loads with the first log opened: `require('treadle')` alone does not load it.
    const Sqlite = load.betterSqlite3();
    this.db = new Sqlite(file);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('busy_timeout = 5000');
    this.db.pragma('synchronous = NORMAL');
    this.db.exec(`CREATE TABLE IF NOT EXISTS llm_call_log (
      id TEXT PRIMARY KEY,
      workflow_id TEXT NOT NULL, run_id TEXT NOT NULL, activity_id TEXT NOT NULL, activity_type TEXT NOT NULL,
      pipeline TEXT, stage TEXT,
      correlation_id TEXT NOT NULL, run_correlation_id TEXT,
      provider TEXT NOT NULL, model TEXT NOT NULL, prompt_hash TEXT,
      input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL, cache_read_tokens INTEGER NOT NULL,
      latency_ms REAL NOT NULL, status TEXT NOT NULL, error TEXT, created_at TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS llm_call_log_created ON llm_call_log (created_at);
    CREATE INDEX IF NOT EXISTS llm_call_log_pipeline ON llm_call_log (pipeline, created_at);
    CREATE INDEX IF NOT EXISTS llm_call_log_correlation ON llm_call_log (run_correlation_id);`);
    this.insert = this.db.prepare(
      `INSERT OR IGNORE INTO llm_call_log (${CALL_LOG_COLUMNS.join(', ')}) VALUES (${CALL_LOG_COLUMNS.map((c) => `@${c}`).join(', ')})`,
    );
  }

  append(origin: CallOrigin, calls: readonly CallRecord[]): Promise<void> {
    if (calls.length === 0) return Promise.resolve();
    const rows = callLogColumns(origin, calls);
    this.db.transaction(() => {
      for (const row of rows) this.insert.run(row);
    })();
    return Promise.resolve();
  }

  query(filter: CallFilter = {}): Promise<CallLogRow[]> {
    const { where, params } = whereOf(filter);
    const rows = this.db.prepare(`SELECT * FROM llm_call_log ${where} ORDER BY created_at, id`).all(params) as Record<
      string,
      unknown
    >[];
    return Promise.resolve(rows.map(rowToCall));
  }

  async summarize(by: CallGrouping, filter: CallFilter = {}): Promise<CallLogSummary> {
    return summarizeCalls(by, await this.query(filter));
  }

  prune(before: Date): Promise<number> {
    const result = this.db.prepare('DELETE FROM llm_call_log WHERE created_at < ?').run(before.toISOString());
    return Promise.resolve(result.changes);
  }

  close(): Promise<void> {
    this.db.close();
    return Promise.resolve();
  }
}

function whereOf(filter: CallFilter): { where: string; params: Record<string, string> } {
  const clauses: string[] = [];
  const params: Record<string, string> = {};
  if (filter.since) {
    clauses.push('created_at >= @since');
    params.since = filter.since.toISOString();
  }
  if (filter.pipeline !== undefined) {
    clauses.push('pipeline = @pipeline');
    params.pipeline = filter.pipeline;
  }
  return { where: clauses.length > 0 ? `WHERE ${clauses.join(' AND ')}` : '', params };
}
