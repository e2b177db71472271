/**
 * List prices of the models Treadle knows, and a call's estimated cost from them. Pure data shared by the
 * engine's usage totals and the call log's reports, so both estimate the same way.
 */
import type { CallRecord } from './shapes';

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
