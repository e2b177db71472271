/**
 * The cross-run LLM call log (seed 003's `llm_call_log`): every model call any worker on this machine made,
 * queryable across runs by time, pipeline, model and provider (`treadle calls`). Each attempt's calls are
 * also in its work item's history and `state`; this store is for questions across runs ("what did the
 * triage pipeline cost this week, per model?").
 *
 * The store is an embedded SQLite file (better-sqlite3, WAL): no server to run, one file that any number of
 * worker and CLI processes on the machine share safely, and readable with any sqlite client. Workers on
 * several machines each keep their own file unless `TREADLE_CALL_LOG` points them at shared storage; the
 * `CallLog` interface is what another store (a server database) would implement. Prompts are never stored,
 * only their hashes.
 *
 * Rows are keyed by the call itself (workflow, run, activity, start time, prompt hash, attempt correlation):
 * a retried activity reports the calls of the executions before it again (they ride on its heartbeats),
 * and inserting them again changes nothing.
 */
import Database from 'better-sqlite3';
import { createHash } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { CallRecord } from '../model/shapes';
import type * as ActivityModule from '@temporalio/activity';
import { estimateCost } from '../model/pricing';

/** Where a call was made: the activity's workflow, run and id, the pipeline and the stage. */
export interface CallOrigin {
  workflowId: string;
  runId: string;
  activityId: string;
  activityType: string;
  pipeline?: string;
  stage?: string;
}

/** One row of the log: the call record and where it was made. */
export interface CallLogRow extends CallRecord, CallOrigin {
  id: string;
}

export interface CallFilter {
  /** Calls that started at or after this time. */
  since?: Date;
  pipeline?: string;
}

export type CallGrouping = 'model' | 'provider' | 'pipeline' | 'stage';

/** Totals of one group of calls. */
export interface CallSummary {
  group: string;
  calls: number;
  errors: number;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  latencyMs: { p50: number; p95: number; max: number };
  /** USD from list prices; null when a model's price is unknown. */
  estimatedCostUsd: number | null;
}

/** What a call log store does. */
export interface CallLog {
  /** Appends the calls made by one activity; calls already logged are left as they are. */
  append(origin: CallOrigin, calls: readonly CallRecord[]): void;
  query(filter?: CallFilter): CallLogRow[];
  summarize(by: CallGrouping, filter?: CallFilter): { groups: CallSummary[]; total: CallSummary };
  close(): void;
}

const COLUMNS = [
  'id',
  'workflow_id',
  'run_id',
  'activity_id',
  'activity_type',
  'pipeline',
  'stage',
  'correlation_id',
  'run_correlation_id',
  'provider',
  'model',
  'prompt_hash',
  'input_tokens',
  'output_tokens',
  'cache_read_tokens',
  'latency_ms',
  'status',
  'error',
  'created_at',
] as const;

/** The SQLite call log. */
export class SqliteCallLog implements CallLog {
  private readonly db: Database.Database;
  private readonly insert: Database.Statement;

  constructor(readonly file: string) {
    if (file !== ':memory:') mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
    this.db = new Database(file);
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
      `INSERT OR IGNORE INTO llm_call_log (${COLUMNS.join(', ')}) VALUES (${COLUMNS.map((c) => `@${c}`).join(', ')})`,
    );
  }

  append(origin: CallOrigin, calls: readonly CallRecord[]): void {
    if (calls.length === 0) return;
    const rows = calls.map((call) => ({
      id: callId(origin, call),
      workflow_id: origin.workflowId,
      run_id: origin.runId,
      activity_id: origin.activityId,
      activity_type: origin.activityType,
      pipeline: origin.pipeline ?? null,
      stage: origin.stage ?? null,
      correlation_id: call.correlationId,
      run_correlation_id: call.runCorrelationId ?? null,
      provider: call.provider,
      model: call.model,
      prompt_hash: call.promptHash,
      input_tokens: call.inputTokens,
      output_tokens: call.outputTokens,
      cache_read_tokens: call.cacheReadTokens,
      latency_ms: call.latencyMs,
      status: call.status,
      error: call.error ?? null,
      created_at: call.at,
    }));
    this.db.transaction(() => {
      for (const row of rows) this.insert.run(row);
    })();
  }

  query(filter: CallFilter = {}): CallLogRow[] {
    const { where, params } = whereOf(filter);
    const rows = this.db.prepare(`SELECT * FROM llm_call_log ${where} ORDER BY created_at, id`).all(params) as Record<
      string,
      unknown
    >[];
    return rows.map(rowToCall);
  }

  summarize(by: CallGrouping, filter: CallFilter = {}): { groups: CallSummary[]; total: CallSummary } {
    const rows = this.query(filter);
    const groups = new Map<string, CallLogRow[]>();
    for (const row of rows) {
      const key =
        (by === 'model'
          ? row.model
          : by === 'provider'
            ? row.provider
            : by === 'pipeline'
              ? row.pipeline
              : row.stage) ?? '(none)';
      groups.set(key, [...(groups.get(key) ?? []), row]);
    }
    return {
      groups: [...groups.entries()]
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([group, calls]) => summarizeRows(group, calls)),
      total: summarizeRows('total', rows),
    };
  }

  close(): void {
    this.db.close();
  }
}

function callId(origin: CallOrigin, call: CallRecord): string {
  return createHash('sha256')
    .update(
      [
        origin.workflowId,
        origin.runId,
        origin.activityId,
        call.at,
        call.promptHash,
        call.correlationId,
        call.provider,
      ].join('\0'),
    )
    .digest('hex')
    .slice(0, 32);
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

function rowToCall(row: Record<string, unknown>): CallLogRow {
  const text = (key: string): string | undefined => (typeof row[key] === 'string' ? (row[key] as string) : undefined);
  return {
    id: row.id as string,
    workflowId: row.workflow_id as string,
    runId: row.run_id as string,
    activityId: row.activity_id as string,
    activityType: row.activity_type as string,
    ...(text('pipeline') !== undefined ? { pipeline: text('pipeline')! } : {}),
    ...(text('stage') !== undefined ? { stage: text('stage')! } : {}),
    correlationId: row.correlation_id as string,
    ...(text('run_correlation_id') !== undefined ? { runCorrelationId: text('run_correlation_id')! } : {}),
    provider: row.provider as string,
    model: row.model as string,
    promptHash: row.prompt_hash as string,
    inputTokens: row.input_tokens as number,
    outputTokens: row.output_tokens as number,
    cacheReadTokens: row.cache_read_tokens as number,
    latencyMs: row.latency_ms as number,
    status: row.status as CallRecord['status'],
    ...(text('error') !== undefined ? { error: text('error')! } : {}),
    at: row.created_at as string,
  };
}

/** Totals, latency percentiles (nearest rank) and cost of some calls. */
export function summarizeRows(group: string, rows: readonly CallRecord[]): CallSummary {
  const latencies = rows.map((r) => r.latencyMs).sort((a, b) => a - b);
  const rank = (p: number): number =>
    latencies.length === 0
      ? 0
      : latencies[Math.min(latencies.length - 1, Math.ceil((p / 100) * latencies.length) - 1)]!;
  let cost: number | null = 0;
  for (const r of rows) {
    const one = estimateCost(r);
    cost = cost === null || one === null ? null : cost + one;
  }
  return {
    group,
    calls: rows.length,
    errors: rows.filter((r) => r.status !== 'success').length,
    inputTokens: rows.reduce((s, r) => s + r.inputTokens, 0),
    outputTokens: rows.reduce((s, r) => s + r.outputTokens, 0),
    cacheReadTokens: rows.reduce((s, r) => s + r.cacheReadTokens, 0),
    latencyMs: {
      p50: Math.round(rank(50)),
      p95: Math.round(rank(95)),
      max: Math.round(latencies[latencies.length - 1] ?? 0),
    },
    estimatedCostUsd: cost === null ? null : Math.round(cost * 1e6) / 1e6,
  };
}

/** The `onCalls` of an activity's supervision: appends its calls to the log with where they were made. */
export function callLogWriter(
  log: CallLog | undefined,
  where: { pipeline?: string; stage?: string },
): ((calls: CallRecord[]) => void) | undefined {
  if (!log) return undefined;
  return (calls) => {
    // Loaded only when a call is logged: this module is also used where no activity runs (the CLI).
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { Context } = require('@temporalio/activity') as typeof ActivityModule;
    const info = Context.current().info;
    log.append(
      {
        workflowId: info.workflowExecution?.workflowId ?? '(standalone)',
        runId: info.workflowExecution?.runId ?? '',
        activityId: info.activityId,
        activityType: info.activityType,
        ...(where.pipeline !== undefined ? { pipeline: where.pipeline } : {}),
        ...(where.stage !== undefined ? { stage: where.stage } : {}),
      },
      calls,
    );
  };
}
