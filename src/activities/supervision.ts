/**
 * Supervision of a long activity body: heartbeats so that cancellation (attempt timeout, item cancelled)
 * reaches it, a grace period for it to stop, and the model calls it makes, carried on heartbeats, results and
 * failures as a {@link CallBatch}: their totals, and the records inline when few, else in the blob store.
 */
import { Context, log as activityLog } from '@temporalio/activity';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { CallRecordSchema, type CallRecord, type Json } from '../model/shapes';
import type { CallBatch, StoredCalls, UsageTotals } from '../model/state';
import { MAX_INLINE_CALL_RECORDS } from '../model/limits';
import { addTotals, callBatch, callBatchOf, inlineRecord, subtractTotals, totalsOf } from '../engine/usage';
import { readJson, storeJson, type BlobStore } from '../storage/blob-store';
import { callRecordsOf } from '../agents/recording';

/** How long a cancelled implementation may take to stop before the cancellation is reported anyway. */
const CANCEL_GRACE_MS = 10_000;

/**
 * Heartbeat at least this often, and at least three times per heartbeat timeout. A cancellation (the item
 * cancelled, `treadle cancel`) reaches an activity only as the answer to a heartbeat, so this, plus the worker's
 * 1-s heartbeat throttle, is how long a running step may take to hear it: within 5 s (issue 40).
 */
const MAX_HEARTBEAT_INTERVAL_MS = 2_000;

/** Fields each supervised activity execution adds to its heartbeats (a capacity wait), and its beat. */
const heartbeatExtras = new WeakMap<Context, { fields: Record<string, unknown>; beat: () => void }>();

/** The fields a supervised execution adds to its heartbeats (none yet), `beat` sending one at once. */
function heartbeatExtrasOf(context: Context, beat: () => void): { fields: Record<string, unknown>; beat: () => void } {
  const extra = { fields: {}, beat };
  heartbeatExtras.set(context, extra);
  return extra;
}

/**
 * Sets fields every heartbeat of the current activity carries beside its calls (an undefined value removes
 * one) and heartbeats at once: a model call waiting for capacity says so (`CapacityWaitDetails`) where
 * `treadle status` reads it. Outside a supervised activity the fields are heartbeated alone; outside any
 * activity nothing happens.
 */
export function heartbeatWith(fields: Record<string, unknown>): void {
  let context: Context;
  try {
    context = Context.current();
  } catch {
    return;
  }
  const extra = heartbeatExtras.get(context);
  if (!extra) return context.heartbeat(fields);
  for (const [name, value] of Object.entries(fields)) {
    if (value === undefined) delete extra.fields[name];
    else extra.fields[name] = value;
  }
  extra.beat();
}

/** Unstored records a heartbeat carries inline at most (beyond, their totals): the store is behind. */
const MAX_HEARTBEAT_TAIL = 16;

/** What supervision gives an activity body: cancellation, the call log, and progress heartbeats. */
export interface Supervision {
  signal: AbortSignal;
  /** Every model call of this activity so far, the earlier executions' included; agents append to it. */
  calls: CallRecord[];
  /** What the previous execution of this activity last reported with `heartbeat(details)`. */
  previousProgress: unknown;
  heartbeat(details?: unknown): void;
  /** Reported with a failure or a cancellation next to the calls (the stage activity's `previousLog`). */
  report: Record<string, Json>;
  /** The totals of every call of this activity, earlier executions' included (also those whose records are lost). */
  usage(): UsageTotals;
  /**
   * The calls as the result carries them: inline when few, else stored in the blob store first (only their
   * totals when the store fails); undefined when there are none.
   */
  callBatch(): Promise<CallBatch | undefined>;
}

/** What supervision needs besides the body. */
export interface SupervisionOptions {
  /** Where call records go when an activity made more than fit inline. */
  blobs: BlobStore;
  /**
   * Gets the calls when the body ends, however it ends (the cross-run call log), and is awaited before the
   * activity reports; what it throws or rejects with is logged, never the activity's failure.
   */
  onCalls?: ((calls: CallRecord[]) => void | Promise<void>) | undefined;
}

/**
 * Runs an implementation under the activity's supervision: heartbeats so that cancellation (attempt
 * timeout, item cancelled) reaches it, and stops waiting for it as soon as cancellation arrives. Model
 * calls are collected in `calls`; they ride on heartbeats so a retried execution still reports the calls
 * of the executions before it, and on the failure when the activity gives up.
 */
export async function supervise<T>(
  run: (supervision: Supervision) => Promise<T>,
  options: SupervisionOptions,
): Promise<T> {
  const { blobs, onCalls } = options;
  const context = Context.current();
  const previous = context.info.heartbeatDetails as { calls?: unknown; progress?: unknown } | undefined;
  const journal = await CallJournal.resume(blobs, previous?.calls);
  const calls = journal.calls;
  let progress: unknown = previous?.progress;
  const extra = heartbeatExtrasOf(context, () => beatNow());
  const beatNow = (): void => context.heartbeat({ ...extra.fields, calls: journal.heartbeatBatch(), progress });
  const supervision: Supervision = {
    signal: context.cancellationSignal,
    calls,
    previousProgress: previous?.progress,
    report: {},
    heartbeat: (details?: unknown) => {
      if (details !== undefined) progress = details;
      beatNow();
    },
    usage: () => journal.usage(),
    callBatch: () => journal.seal(),
  };
  const timeout = context.info.heartbeatTimeoutMs;
  const every = Math.min(
    MAX_HEARTBEAT_INTERVAL_MS,
    timeout ? Math.max(100, Math.floor(timeout / 3)) : MAX_HEARTBEAT_INTERVAL_MS,
  );
  const beat = setInterval(beatNow, every);
  const work = run(supervision);
  try {
    return await Promise.race([work, context.cancelled]);
  } catch (error) {
    if (error instanceof CancelledFailure) {
      // The attempt timed out or the item was cancelled. The implementation saw the abort signal; wait
      // (briefly) until it has stopped, so the next attempt never overlaps it, then report the calls it
      // made, including the one cut off, with the cancellation.
      let grace: NodeJS.Timeout | undefined;
      const stopped = await Promise.race([
        work.then(
          () => true,
          () => true,
        ),
        new Promise<false>((r) => (grace = setTimeout(() => r(false), CANCEL_GRACE_MS))),
      ]);
      // Left pending, the grace timer would keep a stopping worker (or Jest) alive for up to 10 s more.
      clearTimeout(grace);
      if (!stopped)
        activityLog.warn('implementation did not stop within the grace period after cancellation', {
          graceMs: CANCEL_GRACE_MS,
        });
      throw new CancelledFailure(error.message, [{ ...(await callsOf(supervision)), ...supervision.report }]);
    }
    beatNow();
    // Every failure carries the calls made so far, so the workflow can log them when Temporal gives up.
    // Errors are recognised by shape, not `instanceof Error`: Node's own (fs, net) come from another realm
    // wherever activities run in a VM context (Jest's, for one), and anything thrown must carry the calls.
    const failure = error instanceof ApplicationFailure ? error : undefined;
    const errorLike = isErrorLike(error);
    throw ApplicationFailure.create({
      message: errorLike ? error.message : String(error),
      type: failure?.type ?? (errorLike ? error.name : 'Error'),
      nonRetryable: failure?.nonRetryable === true,
      details: [{ ...(await callsOf(supervision)), ...supervision.report }],
      ...(failure?.nextRetryDelay ? { nextRetryDelay: failure.nextRetryDelay } : {}),
      ...(errorLike ? { cause: withoutCallRecords(error) } : {}),
    });
  } finally {
    // The heartbeat goes on while the call log is written (a PostgreSQL append can wait seconds for a
    // connection): a finished step that stopped beating could miss its heartbeat timeout and run again.
    try {
      if (onCalls && calls.length > 0) await onCalls(calls);
    } catch (error) {
      activityLog.warn('could not write the call log', { error: (error as Error).message });
    } finally {
      clearInterval(beat);
    }
  }
}

/**
 * Runs a short activity body (git, files, a queue command) heartbeating as {@link supervise} does, without its
 * call log: so that the step's heartbeat timeout notices a lost worker quickly and never cuts a slow body off.
 */
export async function withHeartbeats<T>(run: () => Promise<T>): Promise<T> {
  const context = Context.current();
  const timeout = context.info.heartbeatTimeoutMs;
  const beat = setInterval(
    () => context.heartbeat(),
    Math.min(MAX_HEARTBEAT_INTERVAL_MS, timeout ? Math.max(100, Math.floor(timeout / 3)) : MAX_HEARTBEAT_INTERVAL_MS),
  );
  try {
    return await run();
  } finally {
    clearInterval(beat);
  }
}

/** An Error by its shape (a name and a message), whichever realm made it. */
function isErrorLike(value: unknown): value is Error {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as Error).name === 'string' &&
    typeof (value as Error).message === 'string'
  );
}

/** The activity's calls for its result or failure: `{ calls }` (inline, or stored by reference), or nothing when it made none. */
export async function callsOf(supervision: Supervision): Promise<{ calls?: CallBatch }> {
  const calls = await supervision.callBatch();
  return calls ? { calls } : {};
}

/**
 * An activity's call records and where they are stored. Agents append to `calls`. Heartbeats carry the
 * records stored so far by reference plus the ones made since inline, and start storing them all once more
 * than fit inline are unstored; should the store lag far behind (or fail), a heartbeat carries the totals
 * of the unstored ones and no more than {@link MAX_HEARTBEAT_TAIL} records, so it stays small whatever
 * happens. Calls of an earlier execution whose records could not be read back count by their totals.
 */
class CallJournal {
  private stored: StoredCalls | undefined;
  private storing: Promise<void> | undefined;

  private constructor(
    private readonly blobs: BlobStore,
    readonly calls: CallRecord[],
    /** The totals of an earlier execution's calls whose records are lost (not stored, or not readable). */
    private readonly unread: UsageTotals | undefined,
  ) {}

  /** The journal of a retried execution: the calls on the previous one's last heartbeat, its stored ones read back. */
  static async resume(blobs: BlobStore, beat: unknown): Promise<CallJournal> {
    const batch = callBatchOf(beat);
    if (!batch) return new CallJournal(blobs, [], undefined);
    let stored: unknown[] = [];
    if (batch.stored) {
      try {
        stored = await readJson<unknown[]>(blobs, batch.stored.ref);
      } catch (error) {
        activityLog.warn('could not read the call records of the earlier execution; their totals still count', {
          ref: batch.stored.ref,
          error: (error as Error).message,
        });
      }
    }
    const calls = [...stored, ...(batch.records ?? [])].filter(
      (c) => CallRecordSchema.safeParse(c).success,
    ) as CallRecord[];
    const unread = batch.usage.calls > calls.length ? subtractTotals(batch.usage, totalsOf(calls)) : undefined;
    return new CallJournal(blobs, calls, unread);
  }

  usage(): UsageTotals {
    return this.unread ? addTotals(totalsOf(this.calls), this.unread) : totalsOf(this.calls);
  }

  /** What a heartbeat carries now (synchronous: heartbeats are). */
  heartbeatBatch(): CallBatch {
    const { calls, stored, unread } = this;
    if (calls.length <= MAX_INLINE_CALL_RECORDS && !unread) return callBatch(calls);
    const tail = calls.slice(stored?.count ?? 0);
    if (tail.length > MAX_INLINE_CALL_RECORDS) this.storeSoon();
    const inline = tail.length <= MAX_HEARTBEAT_TAIL;
    const omitted = (inline ? 0 : tail.length) + (unread?.calls ?? 0);
    return {
      usage: this.usage(),
      ...(stored ? { stored } : {}),
      ...(inline && tail.length > 0 ? { records: tail.map(inlineRecord) } : {}),
      ...(omitted > 0 ? { omitted } : {}),
    };
  }

  /** The calls for a result or a failure: inline when few, else all of them stored; only their totals when the store fails. */
  async seal(): Promise<CallBatch | undefined> {
    const { calls, unread } = this;
    if (calls.length === 0 && !unread) return undefined;
    const withUnread = (batch: CallBatch): CallBatch =>
      unread ? { ...batch, usage: this.usage(), omitted: (batch.omitted ?? 0) + unread.calls } : batch;
    if (calls.length <= MAX_INLINE_CALL_RECORDS) return withUnread(callBatch(calls));
    if (this.stored?.count === calls.length) return withUnread(callBatch(calls, this.stored));
    try {
      return withUnread(
        callBatch(calls, {
          ref: await storeJson(this.blobs, calls, `${calls.length} model calls`),
          count: calls.length,
        }),
      );
    } catch (error) {
      activityLog.warn(
        'could not store the call records; the activity reports their totals only (the call log has them)',
        { error: (error as Error).message },
      );
      return withUnread(callBatch(calls));
    }
  }

  private storeSoon(): void {
    if (this.storing) return;
    const snapshot = [...this.calls];
    this.storing = storeJson(this.blobs, snapshot, `${snapshot.length} model calls`)
      .then((ref) => {
        if (snapshot.length > (this.stored?.count ?? 0)) this.stored = { ref, count: snapshot.length };
      })
      .catch((error: unknown) =>
        activityLog.warn('could not store the call records for a heartbeat', { error: (error as Error).message }),
      )
      .finally(() => {
        this.storing = undefined;
      });
  }
}

/**
 * A provider's failure without the call records in its details (the supervision's own details carry them
 * all, stored or inline): the cause stays in the failure for its message, type and stack, not to repeat them.
 */
function withoutCallRecords(error: Error): Error {
  if (!(error instanceof ApplicationFailure) || callRecordsOf(error).length === 0) return error;
  const copy = ApplicationFailure.create({
    message: error.message,
    ...(error.type ? { type: error.type } : {}),
    nonRetryable: error.nonRetryable === true,
    ...(error.nextRetryDelay ? { nextRetryDelay: error.nextRetryDelay } : {}),
    ...(error.cause ? { cause: error.cause } : {}),
  });
  copy.stack = error.stack;
  return copy;
}
