/**
 * How one Anthropic model call waits out the provider's pushback (issue 39): a 429 rate limit or a 529
 * overload is reported to the throttle (so every call of the scope holds off), waited out (`retry-after`,
 * else a capped exponential backoff with jitter), recorded as a `throttled` try, and the call is sent again,
 * all inside the same activity: no stage retry, no failed attempt. The activity heartbeats meanwhile (the
 * agent's own heartbeat and the activity's supervision run on timers), and an abort ends the wait as the
 * attempt's cancellation. A wait that would pass the attempt's end or `maxWaitMs` gives up with the
 * retryable failure the error maps to.
 */
import { CancelledFailure, ApplicationFailure } from '@temporalio/common';
import { ANTHROPIC_RETRYABLE, mapAnthropicError, pushbackOf } from './anthropic-errors';
import { failureDetails } from './call-record';
import {
  backoffMs,
  sleep,
  type Backoff,
  type CallLease,
  type CallThrottle,
  type CallTokens,
  type ThrottleScope,
} from './call-throttle';
import type { CallRecord } from './types';

/** Longest a call waits out 429s and 529s in all, when the attempt's own end does not come first. */
export const MAX_THROTTLE_WAIT_MS = 10 * 60_000;
/** A wait that would end closer than this to the attempt's end is not started: the call gives up instead. */
export const ATTEMPT_END_MARGIN_MS = 2_000;

/** An agent's settings for waiting out pushback. */
export interface PushbackPolicy {
  throttle: CallThrottle;
  maxWaitMs: number;
  backoff: Backoff;
  /** When the attempt ends (epoch ms), or undefined when it has no end. */
  attemptEnd: () => number | undefined;
}

/** The pushback waits of one model call: every try of it, until one is answered or it gives up. */
export class PushbackWaits {
  private readonly began = Date.now();
  private readonly giveUpAt: number;
  private readonly bound: string;
  private pushbacks = 0;

  constructor(
    private readonly policy: PushbackPolicy,
    private readonly scope: ThrottleScope,
    private readonly signal: AbortSignal | undefined,
    /** The request's calls so far: throttled tries are added here, and every failure carries them. */
    private readonly calls: CallRecord[],
  ) {
    const byMax = this.began + policy.maxWaitMs;
    const end = policy.attemptEnd();
    const byEnd = end === undefined ? Infinity : end - ATTEMPT_END_MARGIN_MS;
    this.giveUpAt = Math.min(byMax, byEnd);
    this.bound = byEnd < byMax ? "the attempt's end" : `maxThrottleWaitMs (${policy.maxWaitMs} ms)`;
  }

  /**
   * Before each try: waits while the throttle holds the scope off (another call's 429 may), then, when the
   * throttle has a shared limiter, for capacity for `estimate`: the lease to release once the try ends. A wait
   * past the give-up time fails the call as retryable; an abort is the attempt's cancellation.
   */
  async beforeTry(estimate?: CallTokens): Promise<CallLease | undefined> {
    const { throttle } = this.policy;
    const wait = {
      ...(this.signal ? { signal: this.signal } : {}),
      ...(Number.isFinite(this.giveUpAt) ? { until: this.giveUpAt } : {}),
    };
    let ready = true;
    try {
      if (throttle.waitForCapacity) ready = await throttle.waitForCapacity(this.scope, wait);
    } catch (error) {
      throw this.abortedOr(error);
    }
    if (!ready) {
      const message = `anthropic ${this.scope.model} is held off by an earlier 429 or 529 past ${this.bound}: gave up waiting`;
      throw this.givingUp(message);
    }
    if (!throttle.acquire || !estimate) return undefined;
    try {
      return await throttle.acquire(this.scope, { ...wait, estimate });
    } catch (error) {
      const why = (error as Error).message;
      throw this.abortedOr(error, `anthropic ${this.scope.model} waited for capacity until ${this.bound}: ${why}`);
    }
  }

  /** The attempt's cancellation when aborted; else a retryable give-up with `message`, or `error` itself. */
  private abortedOr(error: unknown, message?: string): unknown {
    if (this.signal?.aborted) {
      const waiting = message === undefined ? 'waiting out a rate limit' : 'waiting for capacity';
      const text = `anthropic call aborted while ${waiting}: the attempt timed out or the work item was cancelled`;
      return new CancelledFailure(text, failureDetails(undefined, this.calls));
    }
    return message === undefined ? error : this.givingUp(message);
  }

  private givingUp(message: string): ApplicationFailure {
    return ApplicationFailure.create({
      message,
      type: ANTHROPIC_RETRYABLE,
      nonRetryable: false,
      details: failureDetails(undefined, this.calls),
    });
  }

  /**
   * After a try failed with `error` (`failed` its record): resolves once a pushback is waited out, the try
   * recorded as `throttled`, for the caller to send the call again. Throws the mapped failure for any other
   * error, for pushback it gives up on, and a `CancelledFailure` when aborted while waiting.
   */
  async afterError(error: unknown, failed: CallRecord): Promise<void> {
    const pushback = this.signal?.aborted ? undefined : pushbackOf(error);
    if (!pushback) throw mapAnthropicError(error, failed, this.calls);
    const delay = pushback.retryAfterMs ?? backoffMs(this.pushbacks, this.policy.backoff);
    this.pushbacks += 1;
    // Every call of the scope holds off, whether or not this one goes on waiting.
    this.policy.throttle.reportRetryAfter(this.scope, delay);
    const waitStarted = Date.now();
    if (waitStarted + delay > this.giveUpAt) {
      const note = `gave up waiting: ${delay} ms more would pass ${this.bound}, after ${waitStarted - this.began} ms of waiting`;
      throw mapAnthropicError(error, failed, this.calls, note);
    }
    const why = pushback.retryAfterMs === undefined ? 'backoff' : 'retry-after';
    try {
      await sleep(delay, this.signal);
    } catch {
      const text = `${pushback.message}; cancelled after waiting ${Date.now() - waitStarted} of ${delay} ms (${why})`;
      const message =
        'anthropic call aborted while waiting out a rate limit: the attempt timed out or the work item was cancelled';
      throw new CancelledFailure(message, failureDetails({ ...failed, status: 'throttled', error: text }, this.calls));
    }
    this.calls.push({ ...failed, status: 'throttled', error: `${pushback.message}; waited ${delay} ms (${why})` });
  }
}
