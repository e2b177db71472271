/**
 * Model usage of a work item: totals of call records, the call batches activities report (their totals,
 * their records inline or by reference), per stage and in total with an estimated cost, and the token-budget
 * check. Pure: the workflow, activities and the CLI all use it.
 */
import { MAX_INLINE_CALL_ERROR_CHARS, MAX_INLINE_CALL_RECORDS, truncateText } from '../model/limits';
import { estimateCost } from '../model/pricing';
import type { CallRecord } from '../model/shapes';
import type { CallBatch, KeptCalls, StageState, StoredCalls, UsageSummary, UsageTotals } from '../model/state';

export type { CallBatch, UsageSummary, UsageTotals };

const NO_CALLS: UsageTotals = {
  calls: 0,
  errors: 0,
  inputTokens: 0,
  outputTokens: 0,
  cacheReadTokens: 0,
  latencyMs: 0,
  estimatedCostUsd: 0,
};

/** USD rounded to a millionth of a dollar, as every total reports it. */
function roundCost(cost: number | null): number | null {
  return cost === null ? null : Math.round(cost * 1_000_000) / 1_000_000;
}

/** Sums calls. */
export function totalsOf(calls: readonly CallRecord[]): UsageTotals {
  let cost: number | null = 0;
  const totals = { calls: calls.length, errors: 0, inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, latencyMs: 0 };
  for (const call of calls) {
    if (call.status !== 'success') totals.errors++;
    totals.inputTokens += call.inputTokens;
    totals.outputTokens += call.outputTokens;
    totals.cacheReadTokens += call.cacheReadTokens;
    totals.latencyMs += call.latencyMs;
    const c = estimateCost(call);
    cost = cost === null || c === null ? null : cost + c;
  }
  return { ...totals, estimatedCostUsd: roundCost(cost) };
}

/** The sum of totals (parts that are undefined count as none); a cost is unknown (null) when any part's is. */
export function addTotals(...parts: readonly (UsageTotals | undefined)[]): UsageTotals {
  const sum = { ...NO_CALLS };
  let cost: number | null = 0;
  for (const p of parts) {
    if (p === undefined) continue;
    sum.calls += p.calls;
    sum.errors += p.errors;
    sum.inputTokens += p.inputTokens;
    sum.outputTokens += p.outputTokens;
    sum.cacheReadTokens += p.cacheReadTokens;
    sum.latencyMs += p.latencyMs;
    cost = cost === null || p.estimatedCostUsd === null ? null : cost + p.estimatedCostUsd;
  }
  return { ...sum, estimatedCostUsd: roundCost(cost) };
}

/** `whole` less `part` (the totals of calls known only by their totals); a cost is unknown when either is. */
export function subtractTotals(whole: UsageTotals, part: UsageTotals): UsageTotals {
  const cost =
    whole.estimatedCostUsd === null || part.estimatedCostUsd === null
      ? null
      : whole.estimatedCostUsd - part.estimatedCostUsd;
  return {
    calls: Math.max(0, whole.calls - part.calls),
    errors: Math.max(0, whole.errors - part.errors),
    inputTokens: Math.max(0, whole.inputTokens - part.inputTokens),
    outputTokens: Math.max(0, whole.outputTokens - part.outputTokens),
    cacheReadTokens: Math.max(0, whole.cacheReadTokens - part.cacheReadTokens),
    latencyMs: Math.max(0, whole.latencyMs - part.latencyMs),
    estimatedCostUsd: cost === null ? null : roundCost(Math.max(0, cost)),
  };
}

/** A call record as it travels inline: its error text cut short (the stored record keeps it whole). */
export function inlineRecord(call: CallRecord): CallRecord {
  return call.error !== undefined && call.error.length > MAX_INLINE_CALL_ERROR_CHARS
    ? { ...call, error: truncateText(call.error, MAX_INLINE_CALL_ERROR_CHARS) }
    : call;
}

/**
 * The batch of some calls: inline when there are at most MAX_INLINE_CALL_RECORDS, else `stored` (where the
 * caller has put all of them) or, when it could not store them, only their totals and how many were omitted.
 */
export function callBatch(calls: readonly CallRecord[], stored?: StoredCalls): CallBatch {
  const usage = totalsOf(calls);
  if (calls.length <= MAX_INLINE_CALL_RECORDS) return { usage, records: calls.map(inlineRecord) };
  if (stored) return { usage, stored };
  return { usage, omitted: calls.length };
}

/**
 * A batch as an activity reported it, whatever its age: a {@link CallBatch}, or the plain array of records
 * that histories recorded before batches carry (totalled here exactly as then). Undefined for anything else.
 */
export function callBatchOf(raw: unknown): CallBatch | undefined {
  if (Array.isArray(raw)) return { usage: totalsOf(raw as CallRecord[]), records: raw as CallRecord[] };
  if (typeof raw !== 'object' || raw === null) return undefined;
  const batch = raw as Partial<CallBatch>;
  if (typeof batch.usage !== 'object' || batch.usage === null || typeof batch.usage.calls !== 'number')
    return undefined;
  return batch as CallBatch;
}

/**
 * Adds an activity's calls (a batch, or a legacy array of records) to what an attempt keeps: their totals,
 * the records that came inline and the references of stored ones.
 */
export function keepCalls(kept: KeptCalls, raw: unknown): void {
  const batch = callBatchOf(raw);
  if (!batch || batch.usage.calls === 0) return;
  kept.usage = addTotals(usageOf(kept), batch.usage);
  if (batch.records && batch.records.length > 0) kept.calls = [...(kept.calls ?? []), ...batch.records];
  if (batch.stored) kept.storedCalls = [...(kept.storedCalls ?? []), batch.stored];
}

/** The totals of what an attempt keeps (records kept before totals were: summed from them). */
export function usageOf(kept: KeptCalls): UsageTotals {
  return kept.usage ?? totalsOf(kept.calls ?? []);
}

/** Usage per stage and in total. */
export function summarizeUsage(stages: Record<string, Pick<StageState, 'attempts' | 'contractUsage'>>): UsageSummary {
  const perStage: Record<string, UsageTotals> = {};
  const all: UsageTotals[] = [];
  for (const [name, stage] of Object.entries(stages)) {
    // A stage's contracts (seed 002) validate its input with calls of their own: its usage too.
    const totals = addTotals(...stage.attempts.map(usageOf), stage.contractUsage);
    perStage[name] = totals;
    all.push(totals);
  }
  return { total: addTotals(...all), stages: perStage };
}

/** Tokens counted against a budget: input plus output (cache reads are billed but not "new" work). */
export function tokensSpent(stages: Record<string, Pick<StageState, 'attempts' | 'contractUsage'>>): number {
  const { total } = summarizeUsage(stages);
  return total.inputTokens + total.outputTokens;
}
