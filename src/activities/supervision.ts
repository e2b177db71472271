/**
 * Supervision of a long activity body: heartbeats so that cancellation (attempt timeout, item cancelled)
 * reaches it, a grace period for it to stop, and the call log carried on heartbeats and failures.
 */
import { Context, log as activityLog } from '@temporalio/activity';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { CallRecordSchema, type CallRecord, type Json } from '../model/shapes';

/** How long a cancelled implementation may take to stop before the cancellation is reported anyway. */
const CANCEL_GRACE_MS = 10_000;

/** Heartbeat at most this often, and at least three times per heartbeat timeout. */
const MAX_HEARTBEAT_INTERVAL_MS = 5_000;

/**
 * Runs an implementation under the activity's supervision: heartbeats so that cancellation (attempt
 * timeout, item cancelled) reaches it, and stops waiting for it as soon as cancellation arrives. Model
 * calls are collected in `calls`; they ride on heartbeats so a retried execution still reports the calls
 * of the executions before it, and on the failure when the activity gives up.
 */
/** What supervision gives an activity body: cancellation, the call log, and progress heartbeats. */
export interface Supervision {
  signal: AbortSignal;
  calls: CallRecord[];
  /** What the previous execution of this activity last reported with `heartbeat(details)`. */
  previousProgress: unknown;
  heartbeat(details?: unknown): void;
  /** Reported with a failure or a cancellation next to the calls (the stage activity's `previousLog`). */
  report: Record<string, Json>;
}

/**
 * `onCalls` gets the calls when the body ends, however it ends (the cross-run call log); what it throws is
 * logged, never the activity's failure.
 */
export async function supervise<T>(run: (supervision: Supervision) => Promise<T>, onCalls?: (calls: CallRecord[]) => void): Promise<T> {
  const context = Context.current();
  const previous = context.info.heartbeatDetails as { calls?: unknown; progress?: unknown } | undefined;
  const calls: CallRecord[] = callsFromHeartbeat(previous);
  let progress: unknown = previous?.progress;
  const beatNow = (): void => context.heartbeat({ calls, progress });
  const supervision: Supervision = {
    signal: context.cancellationSignal,
    calls,
    previousProgress: previous?.progress,
    report: {},
    heartbeat: (details?: unknown) => {
      if (details !== undefined) progress = details;
      beatNow();
    },
  };
  const timeout = context.info.heartbeatTimeoutMs;
  const every = Math.min(MAX_HEARTBEAT_INTERVAL_MS, timeout ? Math.max(100, Math.floor(timeout / 3)) : MAX_HEARTBEAT_INTERVAL_MS);
  const beat = setInterval(beatNow, every);
  const work = run(supervision);
  try {
    return await Promise.race([work, context.cancelled]);
  } catch (error) {
    if (error instanceof CancelledFailure) {
      // The attempt timed out or the item was cancelled. The implementation saw the abort signal; wait
      // (briefly) until it has stopped, so the next attempt never overlaps it, then report the calls it
      // made, including the one cut off, with the cancellation.
      const stopped = await Promise.race([work.then(() => true, () => true), new Promise<false>((r) => setTimeout(() => r(false), CANCEL_GRACE_MS))]);
      if (!stopped) activityLog.warn('implementation did not stop within the grace period after cancellation', { graceMs: CANCEL_GRACE_MS });
      throw new CancelledFailure(error.message, [{ calls, ...supervision.report }]);
    }
    beatNow();
    if (!(error instanceof Error)) throw error;
    // Every failure carries the calls made so far, so the workflow can log them when Temporal gives up.
    const failure = error instanceof ApplicationFailure ? error : undefined;
    throw ApplicationFailure.create({
      message: error.message,
      type: failure?.type ?? error.name,
      nonRetryable: failure?.nonRetryable === true,
      details: [{ calls, ...supervision.report }],
      ...(failure?.nextRetryDelay ? { nextRetryDelay: failure.nextRetryDelay } : {}),
      cause: error,
    });
  } finally {
    clearInterval(beat);
    if (onCalls && calls.length > 0) {
      try {
        onCalls(calls);
      } catch (error) {
        activityLog.warn('could not write the call log', { error: (error as Error).message });
      }
    }
  }
}

function callsFromHeartbeat(details: { calls?: unknown } | undefined): CallRecord[] {
  const calls = details?.calls;
  if (!Array.isArray(calls)) return [];
  return calls.filter((c) => CallRecordSchema.safeParse(c).success) as CallRecord[];
}

