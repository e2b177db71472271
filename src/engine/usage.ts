/**
 * Model usage of a work item, derived from the call records in its attempts: per stage and in total, with
 * an estimated cost, and the token-budget check.
 */
import type { CallRecord } from '../model/shapes';
import type { StageState, UsageSummary, UsageTotals } from '../model/state';

export type { UsageSummary, UsageTotals };

/** USD per million tokens (input, output, cache read), by model-name prefix; local providers cost nothing. */
const PRICES: [prefix: string, input: number, output: number, cacheRead: number][] = [
  ['claude-opus-4', 15, 75, 1.5],
  ['claude-sonnet-4', 3, 15, 0.3],
  ['claude-3-7-sonnet', 3, 15, 0.3],
  ['claude-3-5-sonnet', 3, 15, 0.3],
  ['claude-haiku-4', 1, 5, 0.1],
  ['claude-3-5-haiku', 0.8, 4, 0.08],
  ['claude-3-haiku', 0.25, 1.25, 0.03],
];

/** Estimated cost of one call in USD; 0 for offline providers, null when the model is not in the table. */
export function estimateCost(call: CallRecord): number | null {
  if (call.provider === 'scripted') return 0;
  const price = PRICES.find(([prefix]) => call.model.startsWith(prefix));
  if (!price) return null;
  const [, input, output, cacheRead] = price;
  return (call.inputTokens * input + call.outputTokens * output + call.cacheReadTokens * cacheRead) / 1_000_000;
}

/** Sums calls. */
export function totalsOf(calls: CallRecord[]): UsageTotals {
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
  return { ...totals, estimatedCostUsd: cost === null ? null : Math.round(cost * 1_000_000) / 1_000_000 };
}

/** Usage per stage and in total. */
export function summarizeUsage(stages: Record<string, Pick<StageState, 'attempts' | 'contractCalls'>>): UsageSummary {
  const perStage: Record<string, UsageTotals> = {};
  const all: CallRecord[] = [];
  for (const [name, stage] of Object.entries(stages)) {
    // A stage's contracts (seed 002) validate its input with calls of their own: its usage too.
    const calls = [...stage.attempts.flatMap((a) => a.calls ?? []), ...(stage.contractCalls ?? [])];
    perStage[name] = totalsOf(calls);
    all.push(...calls);
  }
  return { total: totalsOf(all), stages: perStage };
}

/** Tokens counted against a budget: input plus output (cache reads are billed but not "new" work). */
export function tokensSpent(stages: Record<string, Pick<StageState, 'attempts' | 'contractCalls'>>): number {
  const { total } = summarizeUsage(stages);
  return total.inputTokens + total.outputTokens;
}
