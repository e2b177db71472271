/**
 * Storage: the blob stores and what is kept in them. `createBlobStore` turns the configured settings
 * (`loadConfig().blobStore`) into a store, so the worker, the client and the CLI all build the same one.
 */
import { FileBlobStore, type BlobStore } from './blob-store';
import { S3BlobStore } from './s3-blob-store';

export * from './blob-store';
export {
  S3BlobStore,
  ConditionalWritesUnsupportedError,
  type S3BlobStoreOptions,
  type S3Credentials,
} from './s3-blob-store';
export {
  ConversationStore,
  ConversationConflictError,
  type ConversationTurn,
  type ConversationContext,
  type ProviderSession,
} from './conversation';

/** Which blob store to use: a folder (one machine, or a shared filesystem), or an S3-compatible bucket. */
export type BlobStoreSettings =
  | { kind: 'file'; dir: string }
  | { kind: 's3'; bucket: string; prefix: string; endpoint?: string; region?: string; forcePathStyle?: boolean };

/** Builds the configured blob store; nothing is contacted until it is first used. */
export function createBlobStore(settings: BlobStoreSettings): BlobStore {
  if (settings.kind === 'file') return new FileBlobStore(settings.dir);
  const { kind: _kind, ...s3 } = settings;
  return new S3BlobStore(s3);
}
