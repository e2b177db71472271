import { ExternalStorage, StorageDriverClaim, type Payload, type StorageDriver } from '@temporalio/common';
import { ExternalStorageRunner } from '@temporalio/common/lib/internal-non-workflow/external-storage-runner';
import { temporal } from '@temporalio/proto';
import {
  externalStorageFastPath,
  payloadSizeUpperBound,
  TreadleExternalStorage,
} from '../../src/storage/external-storage-fast-path';
import { treadleExternalStorage } from '../../src/storage/external-storage';
import { MemoryBlobStore } from '../../src/storage/blob-store';

const exactSize = (payload: Payload): number => temporal.api.common.v1.Payload.encode(payload).finish().length;
const bytes = (n: number, fill = 120): Uint8Array => new Uint8Array(n).fill(fill);
const json = (text: string): Payload => ({
  metadata: { encoding: Buffer.from('json/plain') },
  data: Buffer.from(text),
});

/** A driver that keeps what it stores in memory and counts its calls. */
function countingDriver(): StorageDriver & { stores: number; retrieves: number } {
  const kept = new Map<string, Payload>();
  const driver = {
    name: 'counting',
    type: 'test.counting',
    stores: 0,
    retrieves: 0,
    async store(_context: unknown, payloads: Payload[]) {
      driver.stores++;
      return payloads.map((payload) => {
        const key = String(kept.size);
        kept.set(key, payload);
        return new StorageDriverClaim({ key });
      });
    },
    async retrieve(_context: unknown, claims: StorageDriverClaim[]) {
      driver.retrieves++;
      return claims.map((claim) => kept.get(claim.claimData.key!)!);
    },
  };
  return driver;
}

describe('the ExternalStorage fast path', () => {
  beforeAll(() => externalStorageFastPath());

  it('is installed on the SDK this project pins (an SDK upgrade that moves the runner fails here)', () => {
    expect(externalStorageFastPath()).toEqual({ installed: true });
  });

  it("never estimates a payload's protobuf size below its real size", () => {
    const payloads: Payload[] = [
      {},
      { data: bytes(0) },
      json('null'),
      json('x'.repeat(127)),
      json('x'.repeat(128)),
      json('x'.repeat(16_383)),
      json('x'.repeat(16_384)),
      {
        metadata: { encoding: Buffer.from('binary/plain'), 'ключ-ü-😀': bytes(200), [''.padEnd(130, 'k')]: bytes(0) },
        data: bytes(2_097_152),
      },
      {
        metadata: {
          encoding: Buffer.from('json/protobuf'),
          messageType: Buffer.from('temporal.api.sdk.v1.ExternalStorageReference'),
        },
        data: bytes(300),
      },
    ];
    for (const payload of payloads) expect(payloadSizeUpperBound(payload)).toBeGreaterThanOrEqual(exactSize(payload));
    // A bound that is loose by more than the per-field overhead would send small payloads to the runner.
    expect(payloadSizeUpperBound(json('x'.repeat(1000)))! - exactSize(json('x'.repeat(1000)))).toBeLessThan(40);
  });

  it('gives up on payloads with external payload details, which the bound does not know', () => {
    expect(
      payloadSizeUpperBound({ ...json('1'), externalPayloads: [{ sizeBytes: 10 }] } as unknown as Payload),
    ).toBeUndefined();
  });

  it("answers calls that cannot offload or resolve anything without building the runner's abort signals", async () => {
    const driver = countingDriver();
    const runner = new ExternalStorageRunner(
      new TreadleExternalStorage({ drivers: [driver], payloadSizeThreshold: 1024 }),
    );
    const small = [json('{"a":1}'), json('x'.repeat(900))];
    const any = jest.spyOn(AbortSignal, 'any');
    try {
      const signal = new AbortController().signal;
      expect(await runner.store(small, { abortSignal: signal })).toBe(small);
      expect(await runner.retrieve(small, { abortSignal: signal })).toBe(small);
      expect(any).not.toHaveBeenCalled();
      expect(driver.stores + driver.retrieves).toBe(0);
    } finally {
      any.mockRestore();
    }
  });

  it('leaves payloads at or near the threshold, and references, to the runner, with the same results as without the fast path', async () => {
    const treadleDriver = countingDriver();
    const plainDriver = countingDriver();
    const fast = new ExternalStorageRunner(
      new TreadleExternalStorage({ drivers: [treadleDriver], payloadSizeThreshold: 1024 }),
    );
    const plain = new ExternalStorageRunner(
      new ExternalStorage({ drivers: [plainDriver], payloadSizeThreshold: 1024 }),
    );
    // Around the threshold: the bound says "maybe", the runner measures exactly and decides.
    for (const length of [990, 1000, 1010, 1011, 1012, 1020, 1024, 5000]) {
      const payloads = [json('1'), json('x'.repeat(length))];
      const stored = await fast.store(payloads);
      const expected = await plain.store(payloads);
      expect(stored.map((p) => Buffer.from(p.data!).toString())).toEqual(
        expected.map((p) => Buffer.from(p.data!).toString()),
      );
      expect(await fast.retrieve(stored)).toEqual(await plain.retrieve(expected));
    }
    expect(treadleDriver.stores).toBe(plainDriver.stores);
    expect(treadleDriver.stores).toBeGreaterThan(0);
    expect(treadleDriver.retrieves).toBe(plainDriver.retrieves);
  });

  it("does not touch another ExternalStorage's runner", async () => {
    const runner = new ExternalStorageRunner(
      new ExternalStorage({ drivers: [countingDriver()], payloadSizeThreshold: 1024 }),
    );
    const any = jest.spyOn(AbortSignal, 'any');
    try {
      await runner.store([json('1')], { abortSignal: new AbortController().signal });
      expect(any).toHaveBeenCalledTimes(1);
    } finally {
      any.mockRestore();
    }
  });

  it("is what Treadle's workers and clients get", () => {
    expect(treadleExternalStorage(new MemoryBlobStore())).toBeInstanceOf(TreadleExternalStorage);
  });
});
