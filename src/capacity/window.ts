/**
 * The limiter's memory of the last minute and of the provider's slow-downs, both bounded whatever the traffic:
 * requests and tokens in per-second buckets (at most {@link WINDOW_BUCKETS}), and one throttle record. Pure:
 * time is passed in.
 */

/** The rate limits' window. */
export const WINDOW_MS = 60_000;
const BUCKET_MS = 1_000;
/** Buckets the window holds at most: one per second of the last minute, plus the one being filled. */
export const WINDOW_BUCKETS = WINDOW_MS / BUCKET_MS + 1;

/** Requests and tokens charged in one second (epoch second `second`). */
export interface WindowBucket {
  second: number;
  requests: number;
  inputTokens: number;
  outputTokens: number;
}

/** What the window holds: requests and tokens charged in the last minute. */
export interface WindowTotals {
  requests: number;
  inputTokens: number;
  outputTokens: number;
}

/**
 * Whether a bucket still counts at `now`. A bucket counts while any instant of its second is inside the last
 * minute, so a charge made at `t` counts until `t + 60 s` at least: per-second buckets only ever over-count.
 */
function counts(bucket: WindowBucket, now: number): boolean {
  return (bucket.second + 1) * BUCKET_MS + WINDOW_MS > now;
}

/** The requests and tokens charged in the last minute at `now`. */
export function windowTotals(window: readonly WindowBucket[], now: number): WindowTotals {
  const totals = { requests: 0, inputTokens: 0, outputTokens: 0 };
  for (const bucket of window) {
    if (!counts(bucket, now)) continue;
    totals.requests += bucket.requests;
    totals.inputTokens += bucket.inputTokens;
    totals.outputTokens += bucket.outputTokens;
  }
  return totals;
}

/** Adds a charge at `now` (a request at grant, tokens at release) and drops buckets that no longer count. */
export function charge(window: WindowBucket[], now: number, add: Partial<WindowTotals>): void {
  pruneWindow(window, now);
  const second = Math.floor(now / BUCKET_MS);
  let last = window[window.length - 1];
  // Workflow time never goes back; a charge stamped earlier than the last bucket joins it (counted longer).
  if (!last || last.second < second) {
    last = { second, requests: 0, inputTokens: 0, outputTokens: 0 };
    window.push(last);
  }
  last.requests += add.requests ?? 0;
  last.inputTokens += add.inputTokens ?? 0;
  last.outputTokens += add.outputTokens ?? 0;
}

/** Drops the buckets that no longer count at `now` (the oldest come first). */
export function pruneWindow(window: WindowBucket[], now: number): void {
  let drop = 0;
  while (drop < window.length && !counts(window[drop]!, now)) drop++;
  if (drop > 0) window.splice(0, drop);
}

/** When the oldest counting bucket stops counting (the window frees capacity), or undefined when it is empty. */
export function windowFreesAt(window: readonly WindowBucket[], now: number): number | undefined {
  const oldest = window.find((bucket) => counts(bucket, now));
  return oldest ? (oldest.second + 1) * BUCKET_MS + WINDOW_MS : undefined;
}

/**
 * A provider's slow-down: no grants before `until`, then the limits at `percent` % of what the file says,
 * recovering by {@link RECOVERY_PERCENT} points every {@link RECOVERY_STEP_MS} (additive increase after a
 * multiplicative decrease, as TCP does, so a limit set too high settles just under the provider's).
 */
export interface Throttle {
  until: number;
  percent: number;
}

/** No slow-down. */
export const NO_THROTTLE: Throttle = { until: 0, percent: 100 };
/** A 429 halves the rate, never below this. */
export const MIN_RATE_PERCENT = 10;
export const RECOVERY_PERCENT = 10;
export const RECOVERY_STEP_MS = 5_000;

/** The rate (percent of the limits) at `now`: 0 while paused, then recovering step by step to 100. */
export function ratePercentAt(throttle: Throttle, now: number): number {
  if (now < throttle.until) return 0;
  const steps = Math.floor((now - throttle.until) / RECOVERY_STEP_MS);
  return Math.min(100, throttle.percent + steps * RECOVERY_PERCENT);
}

/**
 * The throttle after a 429/529 asking to wait `retryAfterMs` at `now`. Calls in flight together all see the
 * same 429: while paused, another report only extends the pause, so a burst halves the rate once.
 */
export function throttled(throttle: Throttle, retryAfterMs: number, now: number): Throttle {
  const until = now + Math.max(0, retryAfterMs);
  if (now < throttle.until) return { until: Math.max(throttle.until, until), percent: throttle.percent };
  const percent = Math.max(MIN_RATE_PERCENT, Math.floor(ratePercentAt(throttle, now) / 2));
  return { until, percent };
}

/** When the throttle next changes (the pause ends, or the next recovery step), or undefined when it is over. */
export function throttleChangesAt(throttle: Throttle, now: number): number | undefined {
  if (now < throttle.until) return throttle.until;
  if (ratePercentAt(throttle, now) >= 100) return undefined;
  const steps = Math.floor((now - throttle.until) / RECOVERY_STEP_MS);
  return throttle.until + (steps + 1) * RECOVERY_STEP_MS;
}

/** `limit` at `percent` %, at least 1 (a limit slowed to nothing would never recover by a grant). */
export function scaled(limit: number, percent: number): number {
  return Math.max(1, Math.floor((limit * percent) / 100));
}
