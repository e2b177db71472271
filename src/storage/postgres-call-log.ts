/**
 * The call log (call-log.ts) in PostgreSQL (node-postgres), for workers on several machines sharing one log:
 * `TREADLE_CALL_LOG=postgres://user:password@host/db`. The table is the SQLite one's (`llm_call_log`, the same
 * columns, `created_at` the same ISO text so both order and filter alike), created with its indexes when
 * missing; appends are one multi-row `INSERT … ON CONFLICT (id) DO NOTHING`; summaries are computed from the
 * rows as SQLite's are (call-log.ts), so both give identical numbers.
 */
import type * as Pg from 'pg';
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
import { redactedUrl } from './open-call-log';
import { loadOptional } from '../config/optional-packages';
import { load } from './lazy-modules';

/** Rows per INSERT: PostgreSQL takes at most 65,535 parameters in one statement. */
const ROWS_PER_INSERT = 1_000;

const SCHEMA = `CREATE TABLE IF NOT EXISTS llm_call_log (
  id TEXT PRIMARY KEY,
  workflow_id TEXT NOT NULL, run_id TEXT NOT NULL, activity_id TEXT NOT NULL, activity_type TEXT NOT NULL,
  pipeline TEXT, stage TEXT,
  correlation_id TEXT NOT NULL, run_correlation_id TEXT,
  provider TEXT NOT NULL, model TEXT NOT NULL, prompt_hash TEXT,
  input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL, cache_read_tokens INTEGER NOT NULL,
  latency_ms DOUBLE PRECISION NOT NULL, status TEXT NOT NULL, error TEXT, created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS llm_call_log_created ON llm_call_log (created_at);
CREATE INDEX IF NOT EXISTS llm_call_log_pipeline ON llm_call_log (pipeline, created_at);
CREATE INDEX IF NOT EXISTS llm_call_log_correlation ON llm_call_log (run_correlation_id);`;

/** Pool settings of a {@link PostgresCallLog}; Treadle's own names, so its types need no `@types/pg`. */
export interface PostgresCallLogOptions {
  /** Connections at most (default 4). */
  maxConnections?: number;
  /** How long to wait for a connection (default 10 s). */
  connectionTimeoutMs?: number;
  /** How long one statement may run (default 30 s). */
  queryTimeoutMs?: number;
}

/**
 * The PostgreSQL call log: a small connection pool, the table made on first use. The constructor throws a
 * configuration error when `pg` (an optional peer dependency) is not installed.
 */
export class PostgresCallLog implements CallLog {
  private readonly pool: Pg.Pool;
  private schema: Promise<void> | undefined;

  constructor(
    readonly url: string,
    options: PostgresCallLogOptions = {},
  ) {
    // pg loads with the first log opened: `require('treadle')` alone does not load it, and it is an optional
    // peer dependency (a configuration error names it when it is missing).
    const { Pool } = loadOptional('postgres', load.pg);
    this.pool = new Pool({
      connectionString: url,
      max: options.maxConnections ?? 4,
      // A database that is down must not hold an activity's end for long: the supervision logs the failure.
      connectionTimeoutMillis: options.connectionTimeoutMs ?? 10_000,
      query_timeout: options.queryTimeoutMs ?? 30_000,
      // The worker never closes its log: idle connections must not keep a stopping process alive.
      allowExitOnIdle: true,
    });
    // An idle connection the server drops is reported here; without a listener it would end the process.
    this.pool.on('error', () => undefined);
  }

  /** Where this log is, without the password. */
  get location(): string {
    return redactedUrl(this.url);
  }

  async append(origin: CallOrigin, calls: readonly CallRecord[]): Promise<void> {
    if (calls.length === 0) return;
    await this.ready();
    const rows = callLogColumns(origin, calls);
    for (let start = 0; start < rows.length; start += ROWS_PER_INSERT) {
      const chunk = rows.slice(start, start + ROWS_PER_INSERT);
      const values: (string | number | null)[] = [];
      const tuples = chunk.map((row) => {
        const placeholders = CALL_LOG_COLUMNS.map((column) => {
          values.push(row[column]);
          return `$${values.length}`;
        });
        return `(${placeholders.join(', ')})`;
      });
      await this.run(
        `INSERT INTO llm_call_log (${CALL_LOG_COLUMNS.join(', ')}) VALUES ${tuples.join(', ')} ON CONFLICT (id) DO NOTHING`,
        values,
      );
    }
  }

  async query(filter: CallFilter = {}): Promise<CallLogRow[]> {
    await this.ready();
    const clauses: string[] = [];
    const values: string[] = [];
    if (filter.since) {
      values.push(filter.since.toISOString());
      clauses.push(`created_at >= $${values.length}`);
    }
    if (filter.pipeline !== undefined) {
      values.push(filter.pipeline);
      clauses.push(`pipeline = $${values.length}`);
    }
    const where = clauses.length > 0 ? `WHERE ${clauses.join(' AND ')}` : '';
    // COLLATE "C": byte order, as SQLite sorts, whatever the database's locale.
    const result = await this.run(
      `SELECT * FROM llm_call_log ${where} ORDER BY created_at COLLATE "C", id COLLATE "C"`,
      values,
    );
    return result.rows.map(rowToCall);
  }

  async summarize(by: CallGrouping, filter: CallFilter = {}): Promise<CallLogSummary> {
    return summarizeCalls(by, await this.query(filter));
  }

  async prune(before: Date): Promise<number> {
    await this.ready();
    const result = await this.run('DELETE FROM llm_call_log WHERE created_at < $1', [before.toISOString()]);
    return result.rowCount ?? 0;
  }

  async close(): Promise<void> {
    await this.pool.end();
  }

  /** Creates the table and indexes once; an advisory lock keeps two workers starting together from colliding. */
  private ready(): Promise<void> {
    this.schema ??= (async () => {
      const client = await this.pool.connect().catch((error: unknown) => {
        throw this.failure(error);
      });
      try {
        await client.query('BEGIN');
        await client.query("SELECT pg_advisory_xact_lock(hashtext('treadle.llm_call_log'))");
        await client.query(SCHEMA);
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw this.failure(error);
      } finally {
        client.release();
      }
    })().catch((error: unknown) => {
      this.schema = undefined; // the next call tries again: the database may be back
      throw error;
    });
    return this.schema;
  }

  private async run(
    sql: string,
    values: unknown[],
  ): Promise<{ rows: Record<string, unknown>[]; rowCount: number | null }> {
    try {
      return await this.pool.query(sql, values);
    } catch (error) {
      throw this.failure(error);
    }
  }

  /** An error naming the log (without its password) and what PostgreSQL said. */
  private failure(error: unknown): Error {
    const message = error instanceof Error ? error.message : String(error);
    return new Error(`call log ${this.location}: ${message.split(this.url).join(this.location)}`, { cause: error });
  }
}
