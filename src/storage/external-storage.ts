/**
 * The safety net under DESIGN.md principle 4 ("small history, big blobs elsewhere"): Temporal's own
 * claim-check support (`ExternalStorage` in `@temporalio/common` 1.24, experimental) backed by Treadle's
 * content-addressed {@link BlobStore}.
 *
 * Treadle's artefact references (`offloadArtefact`, `{ ref: 'sha256:…', … }`) stay the primary mechanism:
 * they keep history small *and* keep large values out of workflow memory and out of every query/state
 * read, and they are readable in the Web UI. This layer only catches what slips past them — a 3 MB
 * work-item input, a stage that returns a huge value, a big query result or update argument — and turns it
 * into a reference instead of a failed workflow task or an `RESOURCE_EXHAUSTED` from the server.
 *
 * Wire format (what the history, `temporal workflow show` and the Web UI show for an offloaded payload):
 * a payload with metadata `encoding: json/protobuf`, `messageType: temporal.api.sdk.v1.ExternalStorageReference`,
 * `externalPayloads: [{ sizeBytes }]` and data
 * `{"driverName":"treadle-blobs","claimData":{"ref":"sha256:…","bytes":"…","meta:encoding":"json/plain"}}`.
 * The blob behind `ref` is the payload's `data` bytes exactly (for `json/plain`: the JSON text), so the same
 * value stored as an artefact and offloaded as a payload is one blob.
 */
import { createHash } from 'node:crypto';
import {
  ExternalStorage,
  StorageDriverClaim,
  type Payload,
  type StorageDriver,
  type StorageDriverStoreContext,
} from '@temporalio/common';
import type { BlobStore } from './blob-store';

/** The driver's name: the routing key written into every reference, so it must never change. */
export const BLOB_STORE_DRIVER_NAME = 'treadle-blobs';
/** The driver's implementation id, reported in worker heartbeats. */
export const BLOB_STORE_DRIVER_TYPE = 'treadle.blobstore';
/** Temporal's default threshold, and Treadle's: payloads of this many bytes or more are offloaded. */
export const DEFAULT_EXTERNAL_STORAGE_THRESHOLD_BYTES = 256 * 1024;

const TEXT_META = 'meta:';
const BINARY_META = 'meta64:';

/**
 * A Temporal `StorageDriver` that keeps each offloaded payload's `data` bytes in `blobs` and returns a claim
 * carrying the blob reference plus the payload's metadata.
 *
 * Contract:
 * - `store` writes each payload's `data` with `blobs.put` (content-addressed, so storing twice — a retried
 *   task, a replayed store — is a no-op) and returns, in order, one claim per payload:
 *   `{ ref: 'sha256:<hex>', bytes: '<n>', 'meta:<key>': '<utf8 value>' | 'meta64:<key>': '<base64 value>' }`.
 *   Metadata is small (`encoding`, `messageType`, codec keys) and lives in the claim, so the blob holds
 *   nothing but the value itself.
 * - `retrieve` reads each blob, checks that its sha256 matches the reference (a corrupted or swapped blob
 *   fails loudly rather than feeding different bytes to a replaying workflow) and rebuilds the payload.
 *   A missing blob rejects with the store's `BlobNotFoundError`; in a worker that fails the workflow task
 *   (retried by Temporal until the blob is back) or the activity attempt.
 * - Every process that reads or writes these workflows — workers, clients, the `treadle` CLI, replay
 *   tests — must use a store that sees the same blobs. The Temporal CLI and Web UI cannot resolve them.
 * - The abort signal is honoured between blobs; the {@link BlobStore} interface itself is not cancellable.
 */
export function blobStoreDriver(blobs: BlobStore): StorageDriver {
  return {
    name: BLOB_STORE_DRIVER_NAME,
    type: BLOB_STORE_DRIVER_TYPE,
    async store(context, payloads) {
      return Promise.all(
        payloads.map(async (payload) => {
          context.abortSignal?.throwIfAborted();
          const data = Buffer.from(payload.data ?? new Uint8Array());
          const metadata = payload.metadata ?? {};
          const blob = await blobs.put(data, mediaTypeOf(metadata), summaryOf(context, metadata, data.length));
          const claim: Record<string, string> = { ref: blob.ref, bytes: String(data.length) };
          for (const [key, value] of Object.entries(metadata)) {
            const bytes = Buffer.from(value);
            const text = bytes.toString('utf8');
            if (Buffer.from(text, 'utf8').equals(bytes)) claim[TEXT_META + key] = text;
            else claim[BINARY_META + key] = bytes.toString('base64');
          }
          return new StorageDriverClaim(claim);
        }),
      );
    },
    async retrieve(context, claims) {
      return Promise.all(
        claims.map(async ({ claimData }): Promise<Payload> => {
          context.abortSignal?.throwIfAborted();
          const ref = claimData.ref;
          if (!ref) throw new Error(`${BLOB_STORE_DRIVER_NAME}: claim without a ref: ${JSON.stringify(claimData)}`);
          const data = await blobs.get(ref);
          const actual = `sha256:${createHash('sha256').update(data).digest('hex')}`;
          if (actual !== ref)
            throw new Error(`${BLOB_STORE_DRIVER_NAME}: blob ${ref} has content ${actual}; the store is corrupt`);
          const metadata: Record<string, Uint8Array> = {};
          for (const [key, value] of Object.entries(claimData)) {
            if (key.startsWith(TEXT_META)) metadata[key.slice(TEXT_META.length)] = Buffer.from(value, 'utf8');
            else if (key.startsWith(BINARY_META))
              metadata[key.slice(BINARY_META.length)] = Buffer.from(value, 'base64');
          }
          return { metadata, data };
        }),
      );
    },
  };
}

/**
 * The `ExternalStorage` to put in `dataConverter.externalStorage` of the worker (`Worker.create`), of every
 * `Client`, and of replay workers (`Worker.runReplayHistories`): payloads whose encoded size is at least
 * `thresholdBytes` (default 256 KiB) go to `blobs` through {@link blobStoreDriver}.
 *
 * Keep the threshold well above Treadle's artefact threshold (`TREADLE_BLOB_THRESHOLD`, 2 KiB) so that
 * this stays a safety net, and well below the server's 2 MB per-payload limit. Experimental: the API and
 * the reference wire format follow `@temporalio/common`'s `ExternalStorage`, which may change.
 */
export function treadleExternalStorage(
  blobs: BlobStore,
  thresholdBytes: number = DEFAULT_EXTERNAL_STORAGE_THRESHOLD_BYTES,
): ExternalStorage {
  return new ExternalStorage({ drivers: [blobStoreDriver(blobs)], payloadSizeThreshold: thresholdBytes });
}

function mediaTypeOf(metadata: Record<string, Uint8Array>): string {
  const encoding = metadata.encoding ? Buffer.from(metadata.encoding).toString('utf8') : '';
  return encoding === 'json/plain' || encoding === 'json/protobuf' ? 'application/json' : 'application/octet-stream';
}

function summaryOf(context: StorageDriverStoreContext, metadata: Record<string, Uint8Array>, bytes: number): string {
  const encoding = metadata.encoding ? Buffer.from(metadata.encoding).toString('utf8') : 'unknown encoding';
  const target = context.target;
  const from = target
    ? ` from ${target.kind} ${target.type ?? ''} ${target.id ?? ''}`.replace(/\s+/g, ' ').trimEnd()
    : '';
  return `Temporal payload (${encoding}, ${bytes} bytes)${from}`;
}
