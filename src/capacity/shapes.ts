/**
 * Model capacity as a shared resource (issue 39): the zod-free shapes of the limits file and of the limiter
 * workflow's messages, shared by the limits parser (`limits.ts`), the pure allocator, the limiter workflow and
 * the worker's capacity gate. Plain JSON only: these travel in workflow input, updates, signals and queries.
 */

/** The limits of one scope: a provider, a model (or `*`, every model of the provider) and an API key. */
export interface CapacityLimit {
  /** The provider (`anthropic`). */
  provider: string;
  /** A model name, or `*` for every model of the provider that no limit names. */
  model: string;
  /** The environment variable holding the API key these limits belong to (the provider's usual one by default). */
  key: string;
  /** Calls in flight at once. */
  concurrency?: number;
  /** Requests started per minute. */
  requestsPerMinute?: number;
  /** Input plus output tokens per minute. */
  tokensPerMinute?: number;
  inputTokensPerMinute?: number;
  outputTokensPerMinute?: number;
  /** How long a grant is held without a renewal before the limiter takes it back (a dead worker's capacity). */
  leaseMs: number;
}

/** How capacity is shared between fairness keys (tenants, teams) of the same priority. */
export interface FairnessSettings {
  /** A fairness key's share relative to the others: `{ acme: 3, beta: 1 }` gives acme three calls for beta's one. */
  weights: Record<string, number>;
  /** The weight of a key that `weights` does not name. */
  defaultWeight: number;
}

/** The limits file, canonical: camelCase, durations in milliseconds, defaults filled in. */
export interface CapacityLimits {
  limits: CapacityLimit[];
  fairness: FairnessSettings;
}

/** A lease's bound when the file gives none: a worker that dies holding capacity gives it back within this. */
export const DEFAULT_LEASE_MS = 60_000;
/** The usual API-key variable of each provider, the default of a limit's `key`. */
export const PROVIDER_KEY_ENV: Readonly<Record<string, string>> = {
  anthropic: 'ANTHROPIC_API_KEY',
};
/** Priorities run from 1 (most urgent) to 5; work that names none has {@link DEFAULT_PRIORITY}. */
export const MIN_PRIORITY = 1;
export const MAX_PRIORITY = 5;
export const DEFAULT_PRIORITY = 3;
/** The fairness key of work that names none. */
export const DEFAULT_FAIRNESS_KEY = '';

/** The numbers a limiter enforces for one scope (a {@link CapacityLimit} without its name). */
export type ScopeLimits = Pick<
  CapacityLimit,
  'concurrency' | 'requestsPerMinute' | 'tokensPerMinute' | 'inputTokensPerMinute' | 'outputTokensPerMinute' | 'leaseMs'
>;

/** The numbers of `limit` alone (what a limiter is sent), without its provider, model and key. */
export function scopeLimits(limit: ScopeLimits): ScopeLimits {
  const { concurrency, requestsPerMinute, tokensPerMinute, inputTokensPerMinute, outputTokensPerMinute, leaseMs } =
    limit;
  const rates = { concurrency, requestsPerMinute, tokensPerMinute, inputTokensPerMinute, outputTokensPerMinute };
  const set = Object.entries(rates).filter(([, value]) => value !== undefined);
  return { ...Object.fromEntries(set), leaseMs };
}

/** Which limit holds a call back (the names are the limits file's). */
export type BindingLimit =
  | 'concurrency'
  | 'requests_per_minute'
  | 'tokens_per_minute'
  | 'input_tokens_per_minute'
  | 'output_tokens_per_minute'
  /** A provider's 429/529 asked for a pause. */
  | 'throttle'
  /** Capacity is free but goes to higher-priority work or to another fairness key's share first. */
  | 'queue';

/** Who is asking: a priority and a fairness key with its weight. */
export interface CapacityClass {
  /** 1 (most urgent) to 5. */
  priority: number;
  fairnessKey: string;
  weight: number;
}

/** A worker process's waiting calls of one class, with the tokens one call is expected to use. */
export interface DemandEntry extends CapacityClass {
  /** Calls of this class waiting in the process. */
  calls: number;
  /** Estimated input tokens of one call (from the prompt). */
  inputTokens: number;
  /** Estimated output tokens of one call (its `max_tokens`). */
  outputTokens: number;
}

/** Tokens a call used (from the reply's `usage`). */
export interface TokenUsage {
  inputTokens: number;
  outputTokens: number;
}

/** Capacity for one call, held until released or until `expiresAt` passes without a renewal. */
export interface Grant extends CapacityClass {
  leaseId: string;
  holder: string;
  /** Tokens reserved for the call until it is released. */
  inputTokens: number;
  outputTokens: number;
  /** Epoch ms. */
  expiresAt: number;
}

/** A process's long-poll for capacity: its whole demand now (it replaces what the process sent before). */
export interface AcquireInput {
  /** The worker process (unique per process and start). */
  holder: string;
  demand: DemandEntry[];
  /** How long the limiter may hold the update open waiting for capacity (at most {@link MAX_ACQUIRE_WAIT_MS}). */
  waitMs?: number;
  /**
   * The limits as this process's file says: a limiter adopts the newest it is sent, so an edited limits file takes
   * effect as the workers restart with it (processes with different files take turns: keep one file).
   */
  limits?: ScopeLimits;
}

/** The limiter's answer: grants (possibly none), and while a class waits, what holds it back. */
export interface AcquireResult {
  grants: Grant[];
  leaseMs: number;
  /** One line per waiting class (`priority 3, acme: 8/8 calls in flight`) when nothing was granted to it. */
  waiting: WaitingClass[];
}

/** The longest an `acquire` update waits before it answers "nothing yet". */
export const MAX_ACQUIRE_WAIT_MS = 10_000;

/** Signal `release`: calls that ended, with the tokens they actually used when known. */
export interface ReleaseInput {
  holder: string;
  releases: { leaseId: string; usage?: TokenUsage }[];
}

/** Signal `renew`: leases still in use (their calls run long). */
export interface RenewInput {
  holder: string;
  leaseIds: string[];
}

/** Signal `throttle`: the provider answered 429/529 asking to wait this long. */
export interface ThrottleInput {
  retryAfterMs: number;
}

/** Signal `demand`: a process's whole demand now, between acquires. */
export interface DemandInput {
  holder: string;
  demand: DemandEntry[];
}

/** A class that has calls waiting, and the limit that holds them back. */
export interface WaitingClass {
  priority: number;
  fairnessKey: string;
  calls: number;
  binds: BindingLimit;
}

/** One limit's use now: `used` of `limit` (the limit after any slow-down), `configured` as written. */
export interface LimitUse {
  used: number;
  limit: number;
  configured: number;
}

/** What `treadle limits`, `treadle status` and the inbox show of a scope. */
export interface UsageSnapshot {
  /** Epoch ms the snapshot was taken at. */
  at: number;
  inFlight: number;
  concurrency?: LimitUse;
  requestsPerMinute?: LimitUse;
  /** Tokens of the last minute plus what calls in flight hold. */
  tokensPerMinute?: LimitUse;
  inputTokensPerMinute?: LimitUse;
  outputTokensPerMinute?: LimitUse;
  /** A provider's slow-down: no grants until `until`, then limits at `ratePercent` % recovering step by step. */
  throttle?: { until: number; ratePercent: number };
  waiting: WaitingClass[];
  holders: number;
}

/** `41k`, `950`, `1.2M`: token counts for one-line displays. */
export function formatCount(n: number): string {
  if (n >= 1_000_000) return `${Math.round(n / 100_000) / 10}M`;
  if (n >= 10_000) return `${Math.round(n / 1_000)}k`;
  if (n >= 1_000) return `${Math.round(n / 100) / 10}k`;
  return String(n);
}

/** "8/8 calls in flight, 41k/60k tokens this minute": every limit of the scope, for status lines. */
export function describeUsage(usage: UsageSnapshot): string {
  const parts: string[] = [];
  const use = (u: LimitUse | undefined, what: string) => {
    if (u) parts.push(`${formatCount(u.used)}/${formatCount(u.limit)} ${what}`);
  };
  use(usage.concurrency, 'calls in flight');
  use(usage.requestsPerMinute, 'requests this minute');
  use(usage.tokensPerMinute, 'tokens this minute');
  use(usage.inputTokensPerMinute, 'input tokens this minute');
  use(usage.outputTokensPerMinute, 'output tokens this minute');
  if (!usage.concurrency) parts.unshift(`${usage.inFlight} calls in flight`);
  if (usage.throttle && usage.throttle.until > usage.at)
    parts.push(`paused by the provider for ${Math.ceil((usage.throttle.until - usage.at) / 1_000)}s`);
  else if (usage.throttle) parts.push(`slowed to ${usage.throttle.ratePercent}% after a 429`);
  return parts.join(', ');
}

/**
 * The limit that applies to a call of `provider`'s `model` with the key in `keyEnv`: the one naming the model,
 * else the provider's `*`; undefined when no limit applies (the call runs unlimited).
 */
export function limitFor(
  limits: CapacityLimits,
  provider: string,
  model: string,
  keyEnv = PROVIDER_KEY_ENV[provider],
): CapacityLimit | undefined {
  const ofKey = limits.limits.filter((l) => l.provider === provider && l.key === keyEnv);
  return ofKey.find((l) => l.model === model) ?? ofKey.find((l) => l.model === '*');
}

/** A fairness key's weight under `fairness`. */
export function fairnessWeight(fairness: FairnessSettings, fairnessKey: string): number {
  return fairness.weights[fairnessKey] ?? fairness.defaultWeight;
}

/**
 * The limiter workflow's id for a scope: `treadle-limiter:<provider>:<model>:<key id>`, the key id a short hash
 * of the API key (never the key). A `*` limit is one scope for every model it covers.
 */
export function limiterWorkflowId(provider: string, model: string, keyId: string): string {
  return `treadle-limiter:${provider}:${model}:${keyId}`;
}
