/**
 * The behaviour every BlobStore must have, as a reusable suite (memory and file stores in
 * test/unit/storage-blob-store.test.ts, the S3 store in test/integration/s3-blob-store.test.ts).
 * Cases: content addressing (ref = sha256 of the bytes, dedupe, binary-safe), missing and malformed refs,
 * names (unset, set, replaced, any characters), compare-and-swap (create-if-absent, stale and right
 * expectations, concurrent writers with one expectation: exactly one wins), and ConversationStore appends
 * from concurrent writers all landing, and what garbage collection needs: list, delete and the names' targets.
 */
import { createHash, randomUUID } from 'node:crypto';
import { BlobNotFoundError, type BlobStore } from '../../src/storage/blob-store';
import { ConversationStore } from '../../src/storage/conversation';

/** Declares the contract's tests for a store; `store()` is called inside each test. */
export function describeBlobStoreContract(label: string, store: () => BlobStore): void {
  describe(`${label}: the BlobStore contract`, () => {
    it('addresses blobs by the sha256 of their bytes, binary-safe, and stores the same bytes once', async () => {
      const blobs = store();
      const bytes = Buffer.from([0, 255, 10, 13, ...Buffer.from(`é ${randomUUID()}`)]);
      const ref = await blobs.put(bytes, 'application/octet-stream', 'some bytes');
      expect(ref).toEqual({
        ref: `sha256:${createHash('sha256').update(bytes).digest('hex')}`,
        bytes: bytes.length,
        mediaType: 'application/octet-stream',
        summary: 'some bytes',
      });
      expect(await blobs.put(Buffer.from(bytes), 'text/plain', 'again')).toMatchObject({ ref: ref.ref });
      expect((await blobs.get(ref.ref)).equals(bytes)).toBe(true);
    });

    it('throws BlobNotFoundError for a missing blob and refuses what is not a reference', async () => {
      const blobs = store();
      const missing = `sha256:${createHash('sha256').update(randomUUID()).digest('hex')}`;
      await expect(blobs.get(missing)).rejects.toBeInstanceOf(BlobNotFoundError);
      await expect(blobs.get('sha256:../../etc/passwd')).rejects.toThrow(/not a blob reference/);
    });

    it('points names at references; setName replaces; any string is a name', async () => {
      const blobs = store();
      const name = `conversation:${randomUUID()}/../../x é`;
      expect(await blobs.getName(name)).toBeUndefined();
      await blobs.setName(name, 'sha256:aa');
      expect(await blobs.getName(name)).toBe('sha256:aa');
      await blobs.setName(name, 'sha256:bb');
      expect(await blobs.getName(name)).toBe('sha256:bb');
      expect(await blobs.getName(`${name}-other`)).toBeUndefined();
    });

    it('compare-and-set: creates only when unset, replaces only the expected reference', async () => {
      const blobs = store();
      const name = `cas:${randomUUID()}`;
      expect(await blobs.compareAndSetName(name, 'sha256:aa', 'sha256:bb')).toBe(false);
      expect(await blobs.getName(name)).toBeUndefined();
      expect(await blobs.compareAndSetName(name, undefined, 'sha256:aa')).toBe(true);
      expect(await blobs.compareAndSetName(name, undefined, 'sha256:zz')).toBe(false);
      expect(await blobs.getName(name)).toBe('sha256:aa');
      expect(await blobs.compareAndSetName(name, 'sha256:stale', 'sha256:zz')).toBe(false);
      expect(await blobs.compareAndSetName(name, 'sha256:aa', 'sha256:bb')).toBe(true);
      expect(await blobs.getName(name)).toBe('sha256:bb');
      // The old expectation is stale now.
      expect(await blobs.compareAndSetName(name, 'sha256:aa', 'sha256:cc')).toBe(false);
      expect(await blobs.getName(name)).toBe('sha256:bb');
    });

    it('compare-and-set: of concurrent writers with the same expectation exactly one wins, and its value stays', async () => {
      const blobs = store();
      for (const start of [undefined, 'sha256:start']) {
        const name = `race:${randomUUID()}`;
        if (start !== undefined) await blobs.setName(name, start);
        const writers = Array.from({ length: 12 }, (_, i) => `sha256:writer-${i}`);
        const won = await Promise.all(writers.map((next) => blobs.compareAndSetName(name, start, next)));
        const winners = writers.filter((_, i) => won[i]);
        expect(winners).toHaveLength(1);
        expect(await blobs.getName(name)).toBe(winners[0]);
      }
    });

    it('ConversationStore: concurrent appends to one conversation all land, each once', async () => {
      const blobs = store();
      const id = `conv-${randomUUID()}`;
      await new ConversationStore(blobs).append(id, {
        correlationId: 'first',
        messages: [{ role: 'user', content: 'hello' }],
      });
      // Separate ConversationStore objects, as separate activities (or workers) would have.
      const ids = Array.from({ length: 10 }, (_, i) => `call-${i}`);
      await Promise.all(
        ids.map((c) =>
          new ConversationStore(blobs).append(id, { correlationId: c, messages: [{ role: 'user', content: c }] }),
        ),
      );
      const turns = await new ConversationStore(blobs).turns(id);
      expect(turns[0]!.correlationId).toBe('first');
      expect(turns.map((t) => t.correlationId).sort()).toEqual(['first', ...ids].sort());
    });

    it("lists its blobs with their sizes and times, deletes one (a missing one quietly), and lists the names' targets", async () => {
      const blobs = store();
      const before = Date.now() - 5_000; // S3 keeps whole seconds
      const kept = await blobs.put(Buffer.from(`kept ${randomUUID()}`), 'text/plain', 'kept');
      const gone = await blobs.put(Buffer.from(`gone ${randomUUID()}`), 'text/plain', 'gone');
      const named = await blobs.put(Buffer.from(`named ${randomUUID()}`), 'text/plain', 'named');
      await blobs.setName(`name ${randomUUID()}`, named.ref);
      const listed = async (): Promise<Map<string, { bytes: number; modified: Date }>> => {
        const all = new Map<string, { bytes: number; modified: Date }>();
        for await (const blob of blobs.list!()) all.set(blob.ref, blob);
        return all;
      };
      const first = await listed();
      for (const ref of [kept, gone, named]) {
        expect(first.get(ref.ref)?.bytes).toBe(ref.bytes);
        expect(first.get(ref.ref)!.modified.getTime()).toBeGreaterThan(before);
        expect(first.get(ref.ref)!.modified.getTime()).toBeLessThan(Date.now() + 5_000);
      }
      await blobs.delete!(gone.ref);
      await blobs.delete!(gone.ref);
      await expect(blobs.get(gone.ref)).rejects.toBeInstanceOf(BlobNotFoundError);
      const second = await listed();
      expect(second.has(gone.ref)).toBe(false);
      expect(second.has(kept.ref)).toBe(true);
      const targets: string[] = [];
      for await (const ref of blobs.namedRefs!()) targets.push(ref);
      expect(targets).toContain(named.ref);
      await expect(blobs.delete!('sha256:nope')).rejects.toThrow('not a blob reference');
    });
  });
}
