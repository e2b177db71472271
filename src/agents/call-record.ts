/** Building call-log records the same way in every provider. */
import type { CallRecord } from '../model/shapes';
import { promptHash } from './prompt-hash';
import type { AgentRequest, AgentUsage } from './types';

/** No tokens: calls that failed before the provider answered. */
export const NO_USAGE: AgentUsage = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0 };

/**
 * Starts the record of one call now; the returned function completes it with the outcome, measuring the
 * latency from this moment. The prompt is hashed, never kept.
 */
export function startCallRecord(
  request: AgentRequest,
  provider: string,
  model: string,
): (status: CallRecord['status'], usage?: AgentUsage, error?: string) => CallRecord {
  const started = Date.now();
  const base = {
    correlationId: request.correlationId,
    provider,
    model,
    promptHash: promptHash(request),
    at: new Date(started).toISOString(),
  };
  return (status, usage = NO_USAGE, error) => ({
    ...base,
    ...usage,
    latencyMs: Date.now() - started,
    status,
    ...(error === undefined ? {} : { error }),
  });
}

/**
 * The details of a failure that ends a request after several model calls: the failed call's record first
 * (`details[0]`, where every provider puts it), then `{ earlierCalls }`, the request's calls before it, so
 * none of them is lost from the call log (`callRecordsOf` reads both back).
 */
export function failureDetails(failed: CallRecord | undefined, earlierCalls: readonly CallRecord[] = []): unknown[] {
  return [...(failed ? [failed] : []), ...(earlierCalls.length > 0 ? [{ earlierCalls: [...earlierCalls] }] : [])];
}
