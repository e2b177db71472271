/**
 * Garbage collection of the blob store (`treadle blobs gc`): blobs are immutable and content-addressed, so
 * nothing else ever deletes one. Mark: every `sha256:` reference found in the roots (the retained executions'
 * histories and memos, which the CLI passes in), in the targets of the store's names, and, transitively, inside
 * every marked blob (a stored list of calls, a conversation turn). Sweep: unmarked blobs stored longer ago than
 * the grace period, which covers a blob an activity has put but whose reference is not in a history yet.
 */
import { BlobNotFoundError, type BlobStore, type StoredBlob } from './blob-store';

/** A blob reference anywhere in text or bytes. */
const REF = /sha256:[0-9a-f]{64}/g;

/** What a collection found and did. */
export interface BlobCollection {
  /** The unreferenced blobs older than the grace period: deleted, or (dry run) to be deleted. */
  unreferenced: StoredBlob[];
  /** How many blobs are kept because something references them, and their bytes. */
  referenced: { blobs: number; bytes: number };
  /** How many unreferenced blobs are kept because they are younger than the grace period, and their bytes. */
  young: { blobs: number; bytes: number };
  dryRun: boolean;
}

/** What to collect and how. */
export interface BlobCollectionOptions {
  /** The texts to look for references in: each execution's history and memo, as bytes. */
  roots: AsyncIterable<Buffer | string>;
  /** Unreferenced blobs stored less than this long ago are kept. */
  graceMs: number;
  dryRun: boolean;
  now?: Date;
}

/** Marks the referenced blobs and deletes (or, dry run, lists) the unreferenced ones older than the grace period. */
export async function collectBlobs(blobs: BlobStore, options: BlobCollectionOptions): Promise<BlobCollection> {
  if (!blobs.list || !blobs.delete || !blobs.namedRefs)
    throw new Error(
      'this blob store cannot list or delete its blobs: bound it by its own means (an S3 lifecycle rule)',
    );
  // Listed before marking: a blob put during the mark is not in the sweep, whatever its age.
  const stored: StoredBlob[] = [];
  for await (const blob of blobs.list()) stored.push(blob);
  const present = new Set(stored.map((b) => b.ref));

  const marked = new Set<string>();
  const pending: string[] = [];
  const mark = (text: string): void => {
    for (const [ref] of text.matchAll(REF))
      if (!marked.has(ref)) {
        marked.add(ref);
        pending.push(ref);
      }
  };
  for await (const root of options.roots) mark(typeof root === 'string' ? root : root.toString('latin1'));
  for await (const ref of blobs.namedRefs()) mark(ref);
  // Transitively: a marked blob's own references (JSON holding refs). A missing one has nothing to follow.
  while (pending.length > 0) {
    const ref = pending.pop()!;
    if (!present.has(ref)) continue;
    try {
      mark((await blobs.get(ref)).toString('latin1'));
    } catch (error) {
      // Deleted since the listing (another collection): it is not swept again, and has nothing to follow.
      if (!(error instanceof BlobNotFoundError)) throw error;
    }
  }

  const cutoff = (options.now ?? new Date()).getTime() - options.graceMs;
  const result: BlobCollection = {
    unreferenced: [],
    referenced: { blobs: 0, bytes: 0 },
    young: { blobs: 0, bytes: 0 },
    dryRun: options.dryRun,
  };
  for (const blob of stored) {
    if (marked.has(blob.ref)) {
      result.referenced.blobs++;
      result.referenced.bytes += blob.bytes;
    } else if (blob.modified.getTime() > cutoff) {
      result.young.blobs++;
      result.young.bytes += blob.bytes;
    } else {
      result.unreferenced.push(blob);
      if (!options.dryRun) await blobs.delete(blob.ref);
    }
  }
  return result;
}
