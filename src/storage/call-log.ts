/**
 * The cross-run LLM call log (seed 003's `llm_call_log`): every model call any worker made, queryable across
 * runs by time, pipeline, model and provider (`treadle calls`). Each attempt's calls are also in its work
 * item's history and `state`; this store is for questions across runs ("what did the triage pipeline cost
 * this week, per model?"). Prompts are never stored, only their hashes.
 *
 * This module is the store's contract and what every backend shares: the row's columns and id, and the
 * summaries, computed here from the rows so that the embedded SQLite file (sqlite-call-log.ts) and a shared
 * PostgreSQL database (postgres-call-log.ts) give identical numbers. `openCallLog` (open-call-log.ts) picks one.
 *
 * Rows are keyed by the call itself (workflow, run, activity, start time, prompt hash, attempt correlation):
 * a retried activity reports the calls of the executions before it again (they ride on its heartbeats),
 * and inserting them again changes nothing.
 */
import { createHash } from 'node:crypto';
import type { CallRecord } from '../model/shapes';
import { estimateCost } from '../model/pricing';
import { load } from './lazy-modules';

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

/** Which calls a query or summary covers. */
export interface CallFilter {
  /** Calls that started at or after this time. */
  since?: Date;
  pipeline?: string;
}

/** What `treadle calls --by` groups on. */
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

/** The groups of a summary, sorted by name, and their total. */
export interface CallLogSummary {
  groups: CallSummary[];
  total: CallSummary;
}

/** What a call log store does. Every method may reach a server, so each returns a promise. */
export interface CallLog {
  /** Appends the calls made by one activity; calls already logged are left as they are. */
  append(origin: CallOrigin, calls: readonly CallRecord[]): Promise<void>;
  /** The calls the filter covers, oldest first. */
  query(filter?: CallFilter): Promise<CallLogRow[]>;
  summarize(by: CallGrouping, filter?: CallFilter): Promise<CallLogSummary>;
  /** Deletes the calls that started before `before`; returns how many it deleted. */
  prune(before: Date): Promise<number>;
  close(): Promise<void>;
}

/** The table's columns, in the order every backend inserts them. */
export const CALL_LOG_COLUMNS = [
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

/** One row as the table stores it. */
export type CallLogColumns = Record<(typeof CALL_LOG_COLUMNS)[number], string | number | null>;

/** The rows to insert for one activity's calls, each with its id. */
export function callLogColumns(origin: CallOrigin, calls: readonly CallRecord[]): CallLogColumns[] {
  return calls.map((call) => ({
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

/** A stored row as a call: the table's columns back to the record's fields. */
export function rowToCall(row: Record<string, unknown>): CallLogRow {
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
    inputTokens: Number(row.input_tokens),
    outputTokens: Number(row.output_tokens),
    cacheReadTokens: Number(row.cache_read_tokens),
    latencyMs: Number(row.latency_ms),
    status: row.status as CallRecord['status'],
    ...(text('error') !== undefined ? { error: text('error')! } : {}),
    at: row.created_at as string,
  };
}

/** The summary of some calls grouped by `by`: the same computation whichever store the rows came from. */
export function summarizeCalls(by: CallGrouping, rows: readonly CallLogRow[]): CallLogSummary {
  const groups = new Map<string, CallLogRow[]>();
  for (const row of rows) {
    const key =
      (by === 'model' ? row.model : by === 'provider' ? row.provider : by === 'pipeline' ? row.pipeline : row.stage) ??
      '(none)';
    const group = groups.get(key);
    if (group) group.push(row);
    else groups.set(key, [row]);
  }
  return {
    groups: [...groups.entries()]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([group, calls]) => summarizeRows(group, calls)),
    total: summarizeRows('total', rows),
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
): ((calls: CallRecord[]) => Promise<void>) | undefined {
  if (!log) return undefined;
  return (calls) => {
    // Loaded only when a call is logged: this module is also used where no activity runs (the CLI).
    const { Context } = load.activity();
    const info = Context.current().info;
    return log.append(
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
