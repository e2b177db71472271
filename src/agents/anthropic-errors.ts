/**
 * Anthropic SDK errors mapped to Temporal activity failures, once, here. Request errors (4xx) and exhausted
 * spend limits fail the activity for good; server errors and connection errors are retried by Temporal (the
 * SDK client runs with `maxRetries: 0`, so retries do not multiply). A rate limit (429) or overload (529) is
 * pushback ({@link pushbackOf}): the agent waits it out and sends the call again itself, and maps it here
 * only when it gives up waiting.
 *
 * Contract: every failure thrown by the Anthropic agent carries the record of the failed call as its first
 * detail (`failure.details[0]`), so the caller logs failed calls like successful ones. `callRecordOf` reads
 * it back, on the worker and, after the failure converter, in the workflow.
 */
import {
  AnthropicError,
  APIConnectionError,
  APIConnectionTimeoutError,
  APIError,
  APIUserAbortError,
  ConflictError,
  InternalServerError,
  PaymentRequiredError,
  RateLimitError,
  RequestTimeoutError,
} from '@anthropic-ai/sdk';
import { ApplicationFailure, CancelledFailure, TemporalFailure } from '@temporalio/common';
import { failureDetails } from './call-record';
import type { CallRecord } from './types';

/** Failure type of a request the API refused (400, 401, 403, 404, 413, 422, …): retrying cannot help. */
export const ANTHROPIC_REQUEST_ERROR = 'AnthropicRequestError';
/** Failure type of an exhausted spend limit or credit balance: retrying burns the budget for nothing. */
export const ANTHROPIC_SPEND_LIMIT = 'AnthropicSpendLimit';
/** Failure type of a transient failure (429, 5xx, 529 overloaded, connection, timeout): Temporal retries it. */
export const ANTHROPIC_RETRYABLE = 'AnthropicRetryable';

/** Error codes (`error.details.error_code`) of a 429 that is a spend limit rather than a rate limit. */
const SPEND_LIMIT_CODES: ReadonlySet<string> = new Set([
  'contract_spend_limit_reached',
  'enforced_spend_limit_reached',
]);
/** Fallback for 429s without an error code; the SDK warns the wording can change, so codes come first. */
const SPEND_LIMIT_WORDING = /spend limit|credit balance|usage limit|billing/i;
/** Longest API message quoted in a failure, so a verbose error cannot swamp the workflow history. */
const MAX_QUOTED_MESSAGE = 500;

/**
 * Maps an error thrown by an Anthropic call to the failure the activity throws, with `call` (status and
 * error filled in here) as the failure's first detail:
 * - aborted by our signal (attempt timeout, cancellation) → `CancelledFailure`, call status `timeout`;
 * - SDK timeout → retryable, call status `timeout`; connection error → retryable;
 * - 429 naming a spend limit, 402 → non-retryable `AnthropicSpendLimit`;
 * - other 429, 408, 409, 5xx, 529 → retryable `AnthropicRetryable`, `nextRetryDelay` from `retry-after-ms` /
 *   `retry-after` when the API sent one (else Temporal's backoff applies); the agent maps a 429 or 529 only
 *   once it gives up waiting it out;
 * - any other 4xx, or a request the SDK refused to send → non-retryable `AnthropicRequestError`.
 * A Temporal failure passes through unchanged (it is already mapped). `earlierCalls`, the request's calls
 * before this one (rounds of a tool loop), ride along after the failed call (`failureDetails`). `note`, when
 * given, ends an API error's message in brackets (why the agent gave up waiting out a 429 or 529).
 */
export function mapAnthropicError(
  error: unknown,
  call: CallRecord,
  earlierCalls: readonly CallRecord[] = [],
  note?: string,
): Error {
  if (error instanceof TemporalFailure) return error;
  const failed = (status: CallRecord['status'], message: string): unknown[] =>
    failureDetails({ ...call, status, error: message }, earlierCalls);

  if (error instanceof APIUserAbortError) {
    const message = 'anthropic call aborted: the attempt timed out or the work item was cancelled';
    return new CancelledFailure(message, failed('timeout', message), error);
  }
  if (error instanceof APIConnectionTimeoutError) {
    const message = `anthropic timeout: ${causeChain(error)}`;
    return retryable(message, failed('timeout', message), error);
  }
  if (error instanceof APIConnectionError) {
    const message = `anthropic connection error: ${causeChain(error)}`;
    return retryable(message, failed('error', message), error);
  }
  if (error instanceof APIError) {
    const message = describeStatusError(error) + (note ? ` (${note})` : '');
    const details = failed('error', message);
    if ((error instanceof RateLimitError && isSpendLimit(error)) || error instanceof PaymentRequiredError) {
      return ApplicationFailure.create({
        message,
        type: ANTHROPIC_SPEND_LIMIT,
        nonRetryable: true,
        details,
        cause: error,
      });
    }
    // InternalServerError covers every 5xx, OverloadedError (529) included; 408 and 409 are transient too
    // (the SDK's own retry policy retries them); an APIError without a status is not the request's fault.
    if (
      error.status === undefined ||
      error instanceof RateLimitError ||
      error instanceof InternalServerError ||
      error instanceof RequestTimeoutError ||
      error instanceof ConflictError
    ) {
      return retryable(message, details, error, retryAfterMs(error.headers));
    }
    return ApplicationFailure.create({
      message,
      type: ANTHROPIC_REQUEST_ERROR,
      nonRetryable: true,
      details,
      cause: error,
    });
  }
  if (error instanceof AnthropicError) {
    // Raised before sending, e.g. a max_tokens too large for a non-streaming call: the request itself is wrong.
    const message = oneLine(`anthropic request refused by the SDK: ${error.message}`);
    return ApplicationFailure.create({
      message,
      type: ANTHROPIC_REQUEST_ERROR,
      nonRetryable: true,
      details: failed('error', message),
      cause: error,
    });
  }
  const cause = error instanceof Error ? error : new Error(String(error));
  const message = oneLine(`anthropic call failed: ${cause.message}`);
  return ApplicationFailure.create({
    message,
    type: cause.name,
    nonRetryable: false,
    details: failed('error', message),
    cause,
  });
}

/**
 * The provider's pushback, when `error` is one: a rate limit (429 that is not a spend limit) or an overload
 * (529), with the delay the API asked for (undefined when it named none). Undefined for any other error,
 * which keeps its mapping.
 */
export function pushbackOf(error: unknown): { retryAfterMs: number | undefined; message: string } | undefined {
  if (!(error instanceof APIError)) return undefined;
  const rateLimit = error instanceof RateLimitError && !isSpendLimit(error);
  if (!rateLimit && error.status !== 529) return undefined;
  return { retryAfterMs: retryAfterMs(error.headers), message: describeStatusError(error) };
}

/** Failures from every provider carry their call record the same way; read it with `callRecordOf`. */
export { callRecordOf } from './recording';

/**
 * The delay the API asked for before retrying, in ms: `retry-after-ms`, else `retry-after` as seconds or an
 * HTTP date. Undefined when absent, unreadable or not in the future, so Temporal's own backoff applies.
 */
export function retryAfterMs(headers: Headers | undefined, now: number = Date.now()): number | undefined {
  const millis = headers?.get('retry-after-ms');
  if (millis) {
    const value = Number(millis.trim());
    if (Number.isFinite(value) && value > 0) return value;
  }
  const after = headers?.get('retry-after')?.trim();
  if (!after) return undefined;
  const delay = /^\d+(\.\d+)?$/.test(after) ? Number(after) * 1000 : Date.parse(after) - now;
  return Number.isFinite(delay) && delay > 0 ? Math.round(delay) : undefined;
}

function retryable(message: string, details: unknown[], cause: Error, nextRetryDelay?: number): ApplicationFailure {
  return ApplicationFailure.create({
    message,
    type: ANTHROPIC_RETRYABLE,
    nonRetryable: false,
    details,
    cause,
    nextRetryDelay,
  });
}

function isSpendLimit(error: APIError): boolean {
  if (error.errorCode !== null && SPEND_LIMIT_CODES.has(error.errorCode)) return true;
  return SPEND_LIMIT_WORDING.test(error.apiMessage ?? error.message);
}

/** `anthropic 400 invalid_request_error: max_tokens: must be ≤ 8192`, on one line. */
function describeStatusError(error: APIError): string {
  const status = error.status ?? 'error';
  // Without a body message the SDK's own message starts with the status; do not repeat it.
  const text = error.apiMessage ?? error.message.replace(/^\d{3} /, '');
  return oneLine(`anthropic ${status}${error.type ? ` ${error.type}` : ''}: ${text}`);
}

/**
 * The SDK's connection errors say only "Connection error."; the reason is down the cause chain
 * (`fetch failed` → `other side closed`). Duck-typed: undici's errors may come from another realm.
 */
function causeChain(error: Error): string {
  const reasons: string[] = [];
  let current: unknown = error.cause;
  for (let depth = 0; typeof current === 'object' && current !== null && depth < 3; depth += 1) {
    const { message, cause } = current as { message?: unknown; cause?: unknown };
    if (typeof message === 'string' && message && !reasons.includes(message)) reasons.push(message);
    current = cause;
  }
  return oneLine(reasons.length ? `${error.message} (${reasons.join(': ')})` : error.message);
}

function oneLine(text: string): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > MAX_QUOTED_MESSAGE ? `${line.slice(0, MAX_QUOTED_MESSAGE - 1)}…` : line;
}
