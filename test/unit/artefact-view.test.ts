/**
 * Artefacts as the detail view shows them: media types inferred or from the ref, blobs read back, the 2 MB cut;
 * utf8Cut, the cut every reviewer-facing text shares (diffs, progress.md, test output, artefacts).
 */
import { artefactView, blobView } from '../../src/client/artefact-view';
import { REVIEW_TEXT_MAX_BYTES, utf8Cut } from '../../src/model/limits';
import { MemoryBlobStore } from '../../src/storage/blob-store';

it('inline: a string is markdown, anything else JSON as is; nothing is undefined', async () => {
  const blobs = new MemoryBlobStore();
  expect(await artefactView('# Title', blobs)).toEqual({ mediaType: 'text/markdown', bytes: 7, content: '# Title' });
  expect(await artefactView({ a: [1, 'é'] }, blobs)).toEqual({
    mediaType: 'application/json',
    bytes: Buffer.byteLength('{"a":[1,"é"]}'),
    content: { a: [1, 'é'] },
  });
  expect(await artefactView(undefined, blobs)).toBeUndefined();
});

it('a blob reference is read from the store with its media type and ref', async () => {
  const blobs = new MemoryBlobStore();
  const ref = await blobs.put(Buffer.from('{"x":1}'), 'application/json', 'x');
  expect(await artefactView(ref, blobs)).toEqual({
    mediaType: 'application/json',
    bytes: 7,
    content: { x: 1 },
    ref: ref.ref,
  });
  const diff = await blobs.put(Buffer.from('+a\n-b\n'), 'text/x-diff', 'diff');
  expect(await blobView(blobs, diff.ref, 'text/x-diff')).toEqual({
    mediaType: 'text/x-diff',
    bytes: 6,
    content: '+a\n-b\n',
    ref: diff.ref,
  });
});

it('content over the limit is cut (whole size kept, truncated JSON shown as text, no split character)', async () => {
  const blobs = new MemoryBlobStore();
  const ref = await blobs.put(Buffer.from(JSON.stringify({ text: 'ééééé' })), 'application/json', 'big');
  const view = await artefactView(ref, blobs, 12);
  expect(view).toEqual({
    mediaType: 'application/json',
    bytes: ref.bytes,
    content: '{"text":"é',
    truncated: true,
    ref: ref.ref,
  });
  expect(REVIEW_TEXT_MAX_BYTES).toBe(2 * 1024 * 1024);
  const whole = await artefactView('x'.repeat(REVIEW_TEXT_MAX_BYTES + 1), blobs);
  expect(whole).toMatchObject({ bytes: REVIEW_TEXT_MAX_BYTES + 1, truncated: true });
  expect((whole!.content as string).length).toBe(REVIEW_TEXT_MAX_BYTES);
});

it('a blob the store no longer has is a notice, not a failure', async () => {
  const missing = `sha256:${'0'.repeat(64)}`;
  expect(await blobView(new MemoryBlobStore(), missing, 'text/plain')).toEqual({
    mediaType: 'text/plain',
    bytes: 0,
    content: `blob ${missing} is not in the blob store`,
    ref: missing,
  });
});

it('utf8Cut never splits a character: a head drops the one cut short, a tail starts after it', () => {
  const bytes = Buffer.from('aé€😀b'); // 1, 2, 3, 4 and 1 bytes: characters start at 0, 1, 3, 6, 10
  const heads = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 99].map((at) => utf8Cut(bytes, at, 'head'));
  expect(heads).toEqual([0, 1, 1, 3, 3, 3, 6, 6, 6, 6, 10, 11, 11]);
  const tails = [-5, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11].map((at) => utf8Cut(bytes, at, 'tail'));
  expect(tails).toEqual([0, 0, 1, 3, 3, 6, 6, 6, 10, 10, 10, 10, 11]);
  // A head already cut off (no byte after it to look at) is judged by its own last character.
  expect(utf8Cut(bytes.subarray(0, 8), 8, 'head')).toBe(6);
  expect(utf8Cut(bytes.subarray(0, 10), 10, 'head')).toBe(10);
});
