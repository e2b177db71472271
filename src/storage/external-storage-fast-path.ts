/**
 * A fast path around `@temporalio/common` 1.24's `ExternalStorageRunner`, for Treadle's own
 * `ExternalStorage` instances only.
 *
 * Why: the SDK's worker and client run every payload they send or receive through the runner
 * (`store` outbound, `retrieve` inbound), and the runner does work before it knows whether there is anything
 * to do. Each call builds an `AbortController` and, since the visitor always passes a signal,
 * `AbortSignal.any([...])` (about 25 µs on Node 20), and `store` protobuf-encodes every payload to learn its
 * size. A ten-stage item makes 56 such calls, none of which offloads anything: measured with the profiling
 * harness, 5–8 ms of worker CPU per item, a third of Treadle's worker overhead over a raw-Temporal worker
 * (BENCHMARKS.md).
 *
 * What: when a call can have no effect, answer it the way the runner would, without the signal:
 * - `store`: every payload is provably below the threshold (an upper bound of its protobuf size, from its
 *   data and metadata lengths, is below it, and it has no `externalPayloads`): the payloads come back as
 *   they are, which is what the runner returns when no payload reaches the threshold.
 * - `retrieve`: no payload is a reference (`isReferencePayload`, the runner's own test): the same.
 * Anything else, including every payload near the threshold, goes to the runner unchanged. Runners of any
 * other `ExternalStorage` (not made by {@link TreadleExternalStorage}) are never touched.
 *
 * The runner is internal to the SDK. If a future SDK moves or renames it, nothing is patched, everything
 * runs the SDK's way, and {@link externalStorageFastPath} reports it (a unit test fails, so an upgrade
 * notices). The fix belongs upstream: skip the signal until a payload needs a driver.
 */
import { ExternalStorage, type Payload } from '@temporalio/common';

/** Marks the `ExternalStorage` instances the fast path may answer for. */
export class TreadleExternalStorage extends ExternalStorage {}

type RunnerMethod = (this: { externalStorage: unknown }, payloads: Payload[], options?: unknown) => Promise<Payload[]>;
interface RunnerPrototype {
  store: RunnerMethod;
  retrieve: RunnerMethod;
}

/** Bytes a protobuf length-delimited field adds at most around its content: one tag byte, a 5-byte length. */
const FIELD_OVERHEAD = 6;

/**
 * An upper bound of `temporal.api.common.v1.Payload`'s encoded size: each metadata entry is a nested message
 * of a key (UTF-8: at most three bytes per UTF-16 code unit) and a value, and `data` is one bytes field.
 * `undefined` when the payload has fields this bound does not know (`externalPayloads`).
 */
export function payloadSizeUpperBound(payload: Payload): number | undefined {
  const extra = (payload as { externalPayloads?: unknown[] | null }).externalPayloads;
  if (extra !== undefined && extra !== null && extra.length > 0) return undefined;
  let size = FIELD_OVERHEAD + (payload.data?.length ?? 0);
  const metadata = payload.metadata;
  if (metadata) {
    for (const key in metadata) {
      if (!Object.prototype.hasOwnProperty.call(metadata, key)) continue;
      const value = metadata[key];
      size += FIELD_OVERHEAD + FIELD_OVERHEAD + 3 * key.length + FIELD_OVERHEAD + (value?.length ?? 0);
    }
  }
  return size;
}

let state: { installed: boolean; reason?: string } | undefined;

/**
 * Installs the fast path once per process (idempotent); returns whether it is active and, if not, why.
 * Called by `treadleExternalStorage()`, so every worker and client of Treadle's gets it.
 */
export function externalStorageFastPath(): { installed: boolean; reason?: string } {
  if (state !== undefined) return state;
  try {
    /* eslint-disable @typescript-eslint/no-require-imports -- internal SDK modules, resolved at run time so a missing one disables the fast path instead of failing */
    const runnerModule = require('@temporalio/common/lib/internal-non-workflow/external-storage-runner') as {
      ExternalStorageRunner?: { prototype: RunnerPrototype };
    };
    const helpers = require('@temporalio/common/lib/internal-non-workflow/extstore-helpers') as {
      isReferencePayload?: (payload: Payload) => boolean;
    };
    /* eslint-enable @typescript-eslint/no-require-imports */
    const prototype = runnerModule.ExternalStorageRunner?.prototype;
    const isReference = helpers.isReferencePayload;
    if (
      !prototype ||
      typeof prototype.store !== 'function' ||
      typeof prototype.retrieve !== 'function' ||
      typeof isReference !== 'function'
    ) {
      state = {
        installed: false,
        reason: "@temporalio/common's ExternalStorageRunner does not have the store/retrieve this fast path wraps",
      };
      return state;
    }
    const store = prototype.store;
    const retrieve = prototype.retrieve;
    prototype.store = function (payloads, options) {
      const storage = this.externalStorage;
      if (
        storage instanceof TreadleExternalStorage &&
        payloads.every((p) => (payloadSizeUpperBound(p) ?? Infinity) < storage.payloadSizeThreshold)
      ) {
        return Promise.resolve(payloads);
      }
      return store.call(this, payloads, options);
    };
    prototype.retrieve = function (payloads, options) {
      if (this.externalStorage instanceof TreadleExternalStorage && !payloads.some((p) => isReference(p)))
        return Promise.resolve(payloads);
      return retrieve.call(this, payloads, options);
    };
    state = { installed: true };
  } catch (error) {
    state = {
      installed: false,
      reason: `@temporalio/common's ExternalStorageRunner could not be loaded: ${(error as Error).message}`,
    };
  }
  return state;
}
