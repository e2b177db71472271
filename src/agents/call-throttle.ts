/**
 * Provider feedback (issue 39): when the provider answers a call 429 (rate limit) or 529 (overloaded), the call
 * waits its `retry-after` and goes again inside the same activity, and every other call to the same provider,
 * model and key holds off until then too. A {@link CallThrottle} is where that feedback goes and where a call
 * waits before it is sent. The default, {@link PROCESS_THROTTLE}, shares it within this worker process; a
 * limiter shared by every worker (src/capacity) plugs in through the same interface.
 */
import { Context } from '@temporalio/activity';
import { capacityKeyId } from '../capacity/worker/key-id';

/** What one set of provider limits applies to: a provider, a model, an API key (by a hash, never the key). */
export interface ThrottleScope {
  provider: string;
  model: string;
  /** {@link keyIdOf} the API key. */
  keyId: string;
}

/** How long a wait before a call may last. */
export interface CapacityWait {
  /** Aborts the wait (attempt timeout, cancellation): the promise rejects. */
  signal?: AbortSignal;
  /** Epoch ms: a wait that would end after this does not start, and the promise resolves `false`. */
  until?: number;
}

/**
 * Where a model call waits for capacity and reports the provider's pushback. Implementations are shared by
 * every call of a process (or of a deployment); they must never hold the call's data.
 */
export interface CallThrottle {
  /**
   * Resolves `true` when a call to `scope` may be sent now, after whatever hold-off the provider asked for;
   * `false`, at once, when that would be after `wait.until`; rejects when `wait.signal` aborts. Optional: a
   * throttle without it only hears the reports, and each call then waits its own retry-after.
   */
  waitForCapacity?(scope: ThrottleScope, wait?: CapacityWait): Promise<boolean>;
  /** The provider asked callers of `scope` to wait `retryAfterMs` (a 429 or 529): hold every call off that long. */
  reportRetryAfter(scope: ThrottleScope, retryAfterMs: number): void;
  /**
   * Capacity for one try of a call to `scope`, from a limiter shared by every worker (src/worker/capacity.ts):
   * resolves with a lease once the call may be sent, to be released with the reply's usage (zero when the try
   * failed); resolves undefined when no limit applies; rejects when `request.signal` aborts or the wait would
   * pass `request.until`. Optional: without it a call is sent as soon as {@link CallThrottle.waitForCapacity} lets it.
   */
  acquire?(scope: ThrottleScope, request: CallCapacityRequest): Promise<CallLease | undefined>;
}

/** What a call asks a shared limiter for: its tokens as estimated before it is sent. */
export interface CallCapacityRequest extends CapacityWait {
  estimate: CallTokens;
}

/** Input and output tokens of one call. */
export interface CallTokens {
  inputTokens: number;
  outputTokens: number;
}

/** Capacity held by one call until released. */
export interface CallLease {
  /** Ends the hold: `usage` (the reply's) replaces the estimate; zero for a try that failed. */
  release(usage: CallTokens): void;
}

/**
 * A call's tokens before it is sent: input about one token per four characters of everything sent (system,
 * messages, tools), rounded up; output its `max_tokens`, the most the reply may use.
 */
export function estimateCallTokens(
  sent: { system?: unknown; messages: unknown; tools?: unknown },
  maxTokens: number,
): CallTokens {
  const chars = JSON.stringify([sent.system ?? '', sent.messages, sent.tools ?? []]).length;
  return { inputTokens: Math.ceil(chars / 4), outputTokens: maxTokens };
}

/** A process-local {@link CallThrottle}: after a report, calls to its scope wait until the retry-after passes. */
export class ProcessThrottle implements CallThrottle {
  /** Epoch ms until which each scope is held off; entries in the past are dropped as they are read. */
  private readonly holds = new Map<string, number>();

  constructor(private readonly now: () => number = Date.now) {}

  reportRetryAfter(scope: ThrottleScope, retryAfterMs: number): void {
    const key = scopeKey(scope);
    const until = this.now() + Math.max(0, retryAfterMs);
    if (until > (this.holds.get(key) ?? 0)) this.holds.set(key, until);
  }

  async waitForCapacity(scope: ThrottleScope, wait: CapacityWait = {}): Promise<boolean> {
    const key = scopeKey(scope);
    // Again after each sleep: another call may have reported a longer hold-off meanwhile.
    for (;;) {
      wait.signal?.throwIfAborted();
      const held = this.heldUntil(key);
      if (held === undefined) return true;
      if (wait.until !== undefined && held > wait.until) return false;
      await sleep(held - this.now(), wait.signal);
    }
  }

  /** When `scope` may be called again, or undefined when it may be called now. */
  heldUntil(scopeOrKey: ThrottleScope | string): number | undefined {
    const key = typeof scopeOrKey === 'string' ? scopeOrKey : scopeKey(scopeOrKey);
    const until = this.holds.get(key);
    if (until === undefined) return undefined;
    if (until > this.now()) return until;
    this.holds.delete(key);
    return undefined;
  }
}

/** The throttle every Anthropic agent of this process shares unless it is given another. */
export const PROCESS_THROTTLE = new ProcessThrottle();

/** A short, stable id of an API key: names a scope without holding the key (the limiter's own, `capacityKeyId`). */
export const keyIdOf: (apiKey: string) => string = capacityKeyId;

/** How long to wait after the `n`th pushback in a row (from 0) that named no retry-after. */
export interface Backoff {
  /** The first wait, in ms. */
  initialMs: number;
  /** No wait is longer, in ms. */
  maxMs: number;
}

/** 1 s, 2 s, 4 s, … up to 30 s, each with jitter. */
export const DEFAULT_BACKOFF: Backoff = { initialMs: 1_000, maxMs: 30_000 };

/**
 * A capped exponential backoff with jitter: between half and all of `initialMs × 2^n` (at most `maxMs`), so
 * that calls pushed back together do not all come back together.
 */
export function backoffMs(n: number, backoff: Backoff = DEFAULT_BACKOFF, random: () => number = Math.random): number {
  const ceiling = Math.min(backoff.maxMs, backoff.initialMs * 2 ** Math.min(n, 30));
  return Math.round(ceiling * (0.5 + random() / 2));
}

/** Resolves after `ms`; rejects with the signal's reason as soon as it aborts (the timer is cleared). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason as Error);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal!.reason as Error);
    };
    const timer = setTimeout(
      () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      },
      Math.max(0, ms),
    );
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function scopeKey(scope: ThrottleScope): string {
  return `${scope.provider}\0${scope.model}\0${scope.keyId}`;
}

/** Each activity execution, by its context, and when a model call first saw it: about when it started. */
const firstSeen = new WeakMap<object, number>();

/**
 * When the Temporal activity this code runs in must end (epoch ms), or undefined outside an activity or
 * without a timeout. Its start-to-close timeout counts from when it started, which the activity's info does
 * not say, so from the first time this is asked in the execution (a little late, never early); its
 * schedule-to-close bound is exact.
 */
export function activityAttemptEnd(): number | undefined {
  let context: Context;
  try {
    context = Context.current();
  } catch {
    return undefined;
  }
  const { info } = context;
  const seen = firstSeen.get(context) ?? Date.now();
  firstSeen.set(context, seen);
  const end = Math.min(
    info.startToCloseTimeoutMs ? seen + info.startToCloseTimeoutMs : Infinity,
    info.scheduleToCloseTimeoutMs ? info.scheduledTimestampMs + info.scheduleToCloseTimeoutMs : Infinity,
  );
  return Number.isFinite(end) ? end : undefined;
}
