/**
 * Artefacts as the review inbox's detail view shows them (issue 27): inline JSON as it is, offloaded ones read
 * back from the blob store, each cut at {@link REVIEW_TEXT_MAX_BYTES} (the page links the raw bytes for the rest)
 * with its whole size and blob reference kept.
 */
import type { Json } from '../model/shapes';
import type { ArtefactView } from '../model/decisions';
import { REVIEW_TEXT_MAX_BYTES, utf8Cut } from '../model/limits';
import { BlobNotFoundError, isBlobRef, type BlobStore } from '../storage/blob-store';

/** The view of the bytes `bytes` of media type `mediaType`, JSON parsed when it is whole and JSON. */
function viewOfBytes(bytes: Buffer, mediaType: string, ref?: string, limit = REVIEW_TEXT_MAX_BYTES): ArtefactView {
  const truncated = bytes.length > limit;
  const text = bytes.subarray(0, truncated ? utf8Cut(bytes, limit, 'head') : bytes.length).toString('utf8');
  const content = mediaType === 'application/json' && !truncated ? (JSON.parse(text) as unknown) : text;
  return {
    mediaType,
    bytes: bytes.length,
    content,
    ...(truncated ? { truncated: true as const } : {}),
    ...(ref ? { ref } : {}),
  };
}

/**
 * The blob `ref` as a view of media type `mediaType`. A blob the store no longer has (collected, another store)
 * is shown as a notice rather than failing the whole detail.
 */
export async function blobView(
  blobs: BlobStore,
  ref: string,
  mediaType: string,
  limit = REVIEW_TEXT_MAX_BYTES,
): Promise<ArtefactView> {
  try {
    return viewOfBytes(await blobs.get(ref), mediaType, ref, limit);
  } catch (error) {
    if (!(error instanceof BlobNotFoundError)) throw error;
    return { mediaType: 'text/plain', bytes: 0, content: `blob ${ref} is not in the blob store`, ref };
  }
}

/**
 * An artefact (inline JSON or a blob reference) as a view: a blob's media type is its reference's; inline, a
 * string is markdown and anything else JSON. Undefined when there is no artefact.
 */
export async function artefactView(
  artefact: Json | undefined,
  blobs: BlobStore,
  limit = REVIEW_TEXT_MAX_BYTES,
): Promise<ArtefactView | undefined> {
  if (artefact === undefined) return undefined;
  if (isBlobRef(artefact)) return blobView(blobs, artefact.ref, artefact.mediaType, limit);
  if (typeof artefact === 'string')
    return viewOfBytes(Buffer.from(artefact, 'utf8'), 'text/markdown', undefined, limit);
  const bytes = Buffer.from(JSON.stringify(artefact), 'utf8');
  return bytes.length > limit
    ? viewOfBytes(bytes, 'application/json', undefined, limit)
    : { mediaType: 'application/json', bytes: bytes.length, content: artefact };
}
