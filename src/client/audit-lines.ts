/**
 * The audit's lines for an activity's model calls (inline, or stored in the blob store and read back) and for
 * contract rounds (seed 002), and how a line names its step: apart from audit.ts, which walks the history.
 */
import { callBatchOf } from '../engine/usage';
import type { CallRecord } from '../model/shapes';
import type { StoredCalls } from '../model/state';
import { readJson, type BlobStore } from '../storage/blob-store';
import type { AuditEntry } from './audit';

/** A scheduled activity as the audit knows it: its type, step, attempt, input and contract call. */
export type Activity = { type: string; step?: string; attempt?: number; input: unknown; contract?: ContractCallLabel };
/** An audit line before its time and workflow are added. */
export type Entry = Omit<AuditEntry, 'at' | 'workflowId'>;

/**
 * The lines for an activity's calls: one per inline record (batches, and the plain arrays of older
 * histories), and one for the records it stored, with their totals and reference, which `audit` replaces.
 */
export function modelCalls(activity: Activity | undefined, raw: unknown): Omit<AuditEntry, 'at' | 'workflowId'>[] {
  const batch = callBatchOf(raw);
  if (!batch) return [];
  const lines = (batch.records ?? []).map((call) => modelCall(activity, call));
  const { usage } = batch;
  const unlisted = usage.calls - (batch.records?.length ?? 0);
  if (batch.stored) {
    lines.unshift({
      kind: 'model_call',
      ...where(activity),
      message: storedMessage(batch.stored, usage),
      stored: batch.stored,
    });
  } else if (unlisted > 0) {
    lines.push({
      kind: 'model_call',
      ...where(activity),
      message: `${unlisted} more model calls whose records were not stored (${usage.calls} in all: ${usage.inputTokens} in + ${usage.outputTokens} out tokens, ${usage.errors} errors)`,
    });
  }
  return lines;
}

function storedMessage(
  stored: StoredCalls,
  usage: { calls: number; inputTokens: number; outputTokens: number; errors: number },
): string {
  return `${stored.count} model calls, records in the blob store as ${stored.ref} (${usage.calls} in all: ${usage.inputTokens} in + ${usage.outputTokens} out tokens, ${usage.errors} errors)`;
}

/** The audit with every stored-calls line replaced by a line per call read from `blobs`; lines it cannot read stay. */
export async function withStoredCalls(entries: AuditEntry[], blobs: BlobStore | undefined): Promise<AuditEntry[]> {
  if (!blobs || !entries.some((e) => e.stored)) return entries;
  const out: AuditEntry[] = [];
  for (const entry of entries) {
    if (!entry.stored) {
      out.push(entry);
      continue;
    }
    let records: CallRecord[];
    try {
      records = await readJson<CallRecord[]>(blobs, entry.stored.ref);
    } catch (error) {
      out.push({ ...entry, message: `${entry.message}; not readable: ${(error as Error).message}` });
      continue;
    }
    const { stored: _stored, ...base } = entry;
    for (const call of records) out.push({ ...base, message: modelCall(undefined, call).message });
  }
  return out;
}

function modelCall(activity: Activity | undefined, raw: unknown): Omit<AuditEntry, 'at' | 'workflowId'> {
  const c = (raw ?? {}) as {
    provider?: string;
    model?: string;
    inputTokens?: number;
    outputTokens?: number;
    latencyMs?: number;
    status?: string;
    error?: string;
    promptHash?: string;
  };
  return {
    kind: 'model_call',
    ...where(activity),
    message: `${c.provider}/${c.model}: ${c.status}${c.error ? ` (${c.error})` : ''}, ${c.inputTokens ?? 0} in + ${c.outputTokens ?? 0} out tokens, ${Math.round(c.latencyMs ?? 0)} ms, prompt ${String(c.promptHash ?? '').slice(0, 19)}`,
  };
}

export function where(activity: Activity | undefined): Pick<AuditEntry, 'step' | 'attempt'> {
  return {
    ...(activity?.step !== undefined ? { step: activity.step } : {}),
    ...(activity?.attempt !== undefined ? { attempt: activity.attempt } : {}),
  };
}

export function label(activity: Activity | undefined): string {
  if (!activity) return 'activity';
  if (activity.contract) return contractLabel(activity.contract);
  return activity.step ? stepLabel(activity, activity.type) : activity.type;
}

/** `<step> attempt n (<what>)`: how a step's lines name it. */
export function stepLabel(activity: Activity, what: string): string {
  return `${activity.step}${activity.attempt ? ` attempt ${activity.attempt}` : ''} (${what})`;
}

// ---------------------------------------------------------------------------------------------------------
// Contract rounds (seed 002): which contract and round a call served, and what the round counted.

/** Which contract call an activity is: the consuming stage, the edge when known, the round, and what it did. */
export interface ContractCallLabel {
  stage: string;
  edge?: string;
  round: number;
  what: string;
}

const CONTRACT_ACTIVITIES: Record<string, string> = {
  'treadle.contractValidate': 'validate',
  'treadle.contractRevise': 'revise',
  'treadle.contractFinalize': 'finalize',
};

/**
 * The contract call behind a scheduled activity: from its summary (`<stage> · contract <from>→<to> · round n
 * · <what>`), or, in histories recorded before summaries, from its input (the consumer, the round, the edge
 * in round 0) and the last contract call before it.
 */
export function contractCall(
  type: string,
  summary: string | undefined,
  input: unknown,
  last: ContractCallLabel | undefined,
): ContractCallLabel | undefined {
  const what = CONTRACT_ACTIVITIES[type];
  if (what === undefined) return undefined;
  const named = summary !== undefined ? /^(.+?) · contract (.+?) · round (\d+)(?: · (.+))?$/.exec(summary) : null;
  if (named) return { stage: named[1]!, edge: named[2]!, round: Number(named[3]), what: named[4] ?? what };
  const i = (input ?? {}) as {
    consumer?: unknown;
    round?: unknown;
    retries?: unknown;
    contract?: { from?: unknown; to?: unknown };
  };
  // Finalize's input names only the state and the rounds it took.
  if (typeof i.consumer !== 'string') {
    return last && typeof i.retries === 'number' ? { ...last, round: i.retries, what } : undefined;
  }
  const from = i.contract?.from;
  const sameStage = last?.stage === i.consumer ? last.edge : undefined;
  const edge = typeof from === 'string' ? `${from}→${String(i.contract?.to)}` : sameStage;
  const round = typeof i.round === 'number' ? i.round : 0;
  return { stage: i.consumer, ...(edge !== undefined ? { edge } : {}), round, what };
}

function contractLabel(c: ContractCallLabel): string {
  return `contract${c.edge ? ` ${c.edge}` : ''} round ${c.round}`;
}

/** A contract call's line: a round's counts (validated, accepted, rejected, revised), a revision, or the final list. */
export function contractLine(activity: Activity, c: ContractCallLabel, r: Record<string, unknown>): Entry {
  const base = { kind: 'step' as const, ...where(activity) };
  switch (activity.type) {
    case 'treadle.contractValidate': {
      if (r.ok === false) {
        const problems = (r.problems as string[] | undefined)?.join('; ');
        return { ...base, message: `${contractLabel(c)}: the items cannot be validated: ${problems}` };
      }
      const revisions = (activity.input as { revisions?: { revisedRef: unknown }[] } | undefined)?.revisions;
      const made = Array.isArray(revisions) ? revisions.filter((x) => x.revisedRef !== null).length : undefined;
      const revised = made !== undefined ? `${made} revised, ` : '';
      const detail = typeof r.fallbackDetail === 'string' ? ` (${r.fallbackDetail})` : '';
      const fallback = typeof r.fallback === 'string' ? `; fallback: ${r.fallback}${detail}` : '';
      const counts = `${num(r.validated)} validated, ${num(r.accepted)} accepted, ${num(r.rejectedNow)} rejected`;
      return { ...base, message: `${contractLabel(c)}: ${revised}${counts}${fallback}` };
    }
    case 'treadle.contractRevise': {
      const unusable = `${contractLabel(c)}: revision of ${String(r.id)} unusable: ${String(r.error ?? '?')}`;
      return { ...base, message: r.ok === false ? unusable : `${contractLabel(c)}: ${String(r.id)} revised` };
    }
    default:
      return { ...base, message: `${contractLabel(c)}: final list: ${String(r.summary ?? '')}` };
  }
}

function num(value: unknown): string {
  return typeof value === 'number' ? String(value) : '?';
}
