/**
 * The limiter workflow's messages (`treadleLimiter`, workflow.ts), and the checks of what they carry: a worker
 * process asks for capacity with the `acquire` update and reports the rest with signals.
 *
 * - `acquire` is an update: the process needs the answer (its grants), and the validator refuses a malformed
 *   request before it reaches the history. It long-polls: the handler waits up to {@link MAX_ACQUIRE_WAIT_MS}.
 * - `release`, `renew`, `throttle` and `demand` are signals: nothing is answered, they are batched by the
 *   process, and a signal costs the limiter one history event where an update costs two.
 * - `usage` is a query: `treadle limits`, `treadle status` and the inbox read each limit's use now.
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import { MAX_DEMAND_ENTRIES } from './allocator';
import {
  MAX_ACQUIRE_WAIT_MS,
  MAX_PRIORITY,
  MIN_PRIORITY,
  type AcquireInput,
  type AcquireResult,
  type DemandEntry,
  type DemandInput,
  type ReleaseInput,
  type RenewInput,
  type ThrottleInput,
  type UsageSnapshot,
} from './shapes';

/** Capacity for a process's waiting calls: its grants, or "nothing yet" and what holds them back. */
export const acquireUpdate = defineUpdate<AcquireResult, [AcquireInput]>('acquire');
/** Calls that ended, with the tokens they used. */
export const releaseSignal = defineSignal<[ReleaseInput]>('release');
/** Leases still in use. */
export const renewSignal = defineSignal<[RenewInput]>('renew');
/** A provider's 429/529 with its retry-after: slows the limiter for everyone. */
export const throttleSignal = defineSignal<[ThrottleInput]>('throttle');
/** A process's whole demand now, between acquires. */
export const demandSignal = defineSignal<[DemandInput]>('demand');
/** Each limit's use as of the limiter's last activation. */
export const usageQuery = defineQuery<UsageSnapshot>('usage');

/** Longest holder names, fairness keys and lease ids accepted (they are kept in the limiter's state). */
const MAX_NAME_CHARS = 200;
/** Most leases one signal may release or renew. */
export const MAX_LEASES_PER_SIGNAL = 1_000;
/** Most calls or tokens one demand entry may state. */
const MAX_COUNT = 100_000_000;

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const isName = (value: unknown): value is string =>
  typeof value === 'string' && value.length > 0 && value.length <= MAX_NAME_CHARS;
const isCount = (value: unknown): value is number =>
  typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= MAX_COUNT;

/** What is wrong with one demand entry, or undefined. */
function demandEntryProblem(entry: unknown, at: string): string | undefined {
  if (!isRecord(entry)) return `${at}: must be an object`;
  const { priority, fairnessKey, weight, calls, inputTokens, outputTokens } = entry as Partial<DemandEntry>;
  if (typeof priority !== 'number' || !Number.isInteger(priority) || priority < MIN_PRIORITY || priority > MAX_PRIORITY)
    return `${at}.priority: must be a whole number from ${MIN_PRIORITY} to ${MAX_PRIORITY}`;
  if (typeof fairnessKey !== 'string' || fairnessKey.length > MAX_NAME_CHARS)
    return `${at}.fairnessKey: must be a string of at most ${MAX_NAME_CHARS} characters`;
  if (typeof weight !== 'number' || !(weight > 0) || weight > 1_000)
    return `${at}.weight: must be more than 0, at most 1000`;
  for (const [name, value] of Object.entries({ calls, inputTokens, outputTokens }))
    if (!isCount(value)) return `${at}.${name}: must be a whole number from 0 to ${MAX_COUNT}`;
  return undefined;
}

/** What is wrong with a process's demand (holder and entries), or undefined. */
export function demandProblem(input: unknown): string | undefined {
  if (!isRecord(input)) return 'must be an object { holder, demand }';
  if (!isName(input.holder)) return `holder: must be a name of 1 to ${MAX_NAME_CHARS} characters`;
  if (!Array.isArray(input.demand) || input.demand.length > MAX_DEMAND_ENTRIES)
    return `demand: must be a list of at most ${MAX_DEMAND_ENTRIES} entries`;
  for (const [i, entry] of input.demand.entries()) {
    const problem = demandEntryProblem(entry, `demand.${i}`);
    if (problem) return problem;
  }
  return undefined;
}

/** The `acquire` update's validator: throws (refusing the update) with what is wrong. */
export function validateAcquire(input: AcquireInput): void {
  const problem = demandProblem(input);
  if (problem) throw new TypeError(`acquire: ${problem}`);
  const { waitMs, limits } = input;
  if (waitMs !== undefined && (typeof waitMs !== 'number' || !(waitMs >= 0) || waitMs > MAX_ACQUIRE_WAIT_MS))
    throw new TypeError(`acquire: waitMs: must be from 0 to ${MAX_ACQUIRE_WAIT_MS}`);
  const limitsIssue = limits === undefined ? undefined : limitsProblem(limits);
  if (limitsIssue) throw new TypeError(`acquire: ${limitsIssue}`);
}

/** What is wrong with a scope's limits as sent by a process, or undefined (the limits file checked them first). */
export function limitsProblem(limits: unknown): string | undefined {
  if (!isRecord(limits)) return 'limits: must be an object';
  const { leaseMs, ...rates } = limits;
  if (typeof leaseMs !== 'number' || !Number.isInteger(leaseMs) || leaseMs < 1_000)
    return 'limits.leaseMs: must be at least 1000';
  for (const [name, value] of Object.entries(rates)) {
    if (!RATE_NAMES.includes(name)) return `limits.${name}: is not a limit`;
    if (value !== undefined && (!isCount(value) || value < 1))
      return `limits.${name}: must be a whole number of 1 or more`;
  }
  return undefined;
}

const RATE_NAMES: readonly string[] = [
  'concurrency',
  'requestsPerMinute',
  'tokensPerMinute',
  'inputTokensPerMinute',
  'outputTokensPerMinute',
];

/** What is wrong with a `release` or `renew` signal's input, or undefined (signals have no validator: checked here). */
export function leasesProblem(input: unknown, field: 'releases' | 'leaseIds'): string | undefined {
  if (!isRecord(input) || !isName(input.holder)) return 'holder: must be a name';
  const list = input[field];
  if (!Array.isArray(list) || list.length > MAX_LEASES_PER_SIGNAL)
    return `${field}: must be a list of at most ${MAX_LEASES_PER_SIGNAL}`;
  for (const item of list) {
    const id = field === 'leaseIds' ? item : isRecord(item) ? item.leaseId : undefined;
    if (!isName(id)) return `${field}: every lease id must be a name`;
    const usage = field === 'releases' && isRecord(item) ? item.usage : undefined;
    if (usage !== undefined && (!isRecord(usage) || !isCount(usage.inputTokens) || !isCount(usage.outputTokens)))
      return `${field}: usage must be { inputTokens, outputTokens }, whole numbers`;
  }
  return undefined;
}

/** The longest pause a `throttle` signal may ask for (a provider's retry-after beyond this is capped). */
export const MAX_RETRY_AFTER_MS = 10 * 60_000;
