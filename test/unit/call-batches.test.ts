/**
 * Model calls as history carries them (docs/stages/agents.md "Call log, usage, budgets"): a batch per activity, with the totals always
 * and the records inline when few, else in the blob store; what an attempt keeps of its batches; what
 * supervision puts on heartbeats, results and failures, and what a retried execution reads back.
 */
import { runInNewContext } from 'node:vm';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { ApplicationFailure } from '@temporalio/common';
import {
  addTotals,
  callBatch,
  callBatchOf,
  keepCalls,
  summarizeUsage,
  tokensSpent,
  totalsOf,
} from '../../src/engine/usage';
import { callsOf, supervise } from '../../src/activities/supervision';
import { failureDetails } from '../../src/agents/call-record';
import { MAX_INLINE_CALL_ERROR_CHARS, MAX_INLINE_CALL_RECORDS } from '../../src/model/limits';
import type { CallRecord } from '../../src/model/shapes';
import type { CallBatch, KeptCalls } from '../../src/model/state';
import { MemoryBlobStore } from '../../src/storage/blob-store';

const call = (n: number, over: Partial<CallRecord> = {}): CallRecord => ({
  correlationId: 'item/s/1',
  provider: 'anthropic',
  model: 'claude-sonnet-4-5',
  promptHash: `sha256:${String(n).padStart(64, '0')}`,
  inputTokens: 100 * n,
  outputTokens: 10 * n,
  cacheReadTokens: 0,
  latencyMs: 5,
  status: 'success',
  at: `2026-11-26T10:00:${String(n % 60).padStart(2, '0')}.000Z`,
  ...over,
});
const calls = (count: number): CallRecord[] => Array.from({ length: count }, (_, i) => call(i + 1));

describe('batches', () => {
  test('few calls travel inline with their totals; more travel as totals and a reference', () => {
    const few = calls(MAX_INLINE_CALL_RECORDS);
    expect(callBatch(few)).toEqual({ usage: totalsOf(few), records: few });
    const many = calls(MAX_INLINE_CALL_RECORDS + 1);
    const stored = { ref: `sha256:${'a'.repeat(64)}`, count: many.length };
    expect(callBatch(many, stored)).toEqual({ usage: totalsOf(many), stored });
    // A store that failed: the totals stay, and the batch says how many records it lost.
    expect(callBatch(many)).toEqual({ usage: totalsOf(many), omitted: many.length });
  });

  test('inline records carry a long error cut short', () => {
    const [record] = callBatch([call(1, { status: 'error', error: 'x'.repeat(5_000) })]).records!;
    expect(record!.error!.length).toBeLessThanOrEqual(MAX_INLINE_CALL_ERROR_CHARS);
    expect(record!.error).toContain('(5000 chars)');
  });

  test('an array of records, as histories before batches carry them, reads as an inline batch with the same totals', () => {
    const legacy = calls(7);
    expect(callBatchOf(legacy)).toEqual({ usage: totalsOf(legacy), records: legacy });
    expect(callBatchOf(undefined)).toBeUndefined();
    expect(callBatchOf({ records: [] })).toBeUndefined();
    expect(callBatchOf('calls')).toBeUndefined();
  });

  test('an attempt keeps the totals of every batch, the inline records and the references', () => {
    const kept: KeptCalls = {};
    const stored = { ref: `sha256:${'b'.repeat(64)}`, count: 9 };
    keepCalls(kept, callBatch(calls(9), stored));
    keepCalls(kept, [call(20)]); // a gate's calls in an older history
    keepCalls(kept, undefined);
    keepCalls(kept, callBatch([]));
    expect(kept).toEqual({
      usage: addTotals(totalsOf(calls(9)), totalsOf([call(20)])),
      calls: [call(20)],
      storedCalls: [stored],
    });
    expect(kept.usage!.calls).toBe(10);
  });

  test('usage and the token budget add batches and legacy records alike', () => {
    const legacy = { attempt: 1, startedAt: '', calls: calls(3) };
    const batched: KeptCalls & { attempt: number; startedAt: string } = { attempt: 2, startedAt: '' };
    keepCalls(batched, callBatch(calls(6), { ref: `sha256:${'c'.repeat(64)}`, count: 6 }));
    const contract = totalsOf([call(30)]);
    const usage = summarizeUsage({ s: { attempts: [legacy, batched], contractUsage: contract } });
    expect(usage.total).toEqual(addTotals(totalsOf(calls(3)), totalsOf(calls(6)), totalsOf([call(30)])));
    expect(usage.total.calls).toBe(10);
    expect(tokensSpent({ s: { attempts: [legacy, batched], contractUsage: contract } })).toBe(
      usage.total.inputTokens + usage.total.outputTokens,
    );
  });

  test('a cost is unknown when any part of it is', () => {
    expect(addTotals(totalsOf([call(1)]), totalsOf([call(2, { model: 'mystery' })])).estimatedCostUsd).toBeNull();
    expect(addTotals().calls).toBe(0);
    expect(addTotals(undefined, totalsOf([call(1)]), undefined)).toEqual(totalsOf([call(1)]));
  });
});

describe('supervision', () => {
  const env = (heartbeatDetails?: unknown) =>
    new MockActivityEnvironment(
      { ...(heartbeatDetails !== undefined ? { heartbeatDetails } : {}) },
      { logger: new DefaultLogger('ERROR') },
    );

  test('a result carries few calls inline and many by reference, all of them in the store', async () => {
    const blobs = new MemoryBlobStore();
    const few = await env().run(() => supervise(async (s) => (s.calls.push(...calls(2)), callsOf(s)), { blobs }));
    expect(few).toEqual({ calls: { usage: totalsOf(calls(2)), records: calls(2) } });
    const many: { calls?: CallBatch } = await env().run(() =>
      supervise(async (s) => (s.calls.push(...calls(30)), callsOf(s)), { blobs }),
    );
    expect(many.calls).toEqual({
      usage: totalsOf(calls(30)),
      stored: { ref: expect.stringMatching(/^sha256:/), count: 30 },
    });
    expect(JSON.parse((await blobs.get(many.calls!.stored!.ref)).toString('utf8'))).toEqual(calls(30));
    const none = await env().run(() => supervise(async (s) => callsOf(s), { blobs }));
    expect(none).toEqual({});
  });

  test('a heartbeat stores the records once more than fit inline are unstored, then carries only what came after', async () => {
    const blobs = new MemoryBlobStore();
    const activity = env();
    const beats: { calls: CallBatch }[] = [];
    activity.on('heartbeat', (details: { calls: CallBatch }) => beats.push(details));
    await activity.run(() =>
      supervise(
        async (s) => {
          s.calls.push(...calls(10));
          s.heartbeat(); // starts storing the 10
          await new Promise((r) => setTimeout(r, 50));
          s.calls.push(call(11));
          s.heartbeat();
          s.calls.push(...calls(60).slice(11));
          s.heartbeat(); // 49 unstored: their totals only, until the next store is done
          return null;
        },
        { blobs },
      ),
    );
    const [first, second, third] = beats;
    // Before the store finished: the records inline (up to 16), lost by nothing.
    expect(first!.calls).toEqual({ usage: totalsOf(calls(10)), records: calls(10) });
    // After: the 10 by reference and the one made since.
    expect(second!.calls).toEqual({
      usage: totalsOf(calls(11)),
      stored: { ref: expect.stringMatching(/^sha256:/), count: 10 },
      records: [call(11)],
    });
    // Far behind the store: the totals of every call, the stored ones' reference, how many are not listed.
    expect(third!.calls).toEqual({ usage: totalsOf(calls(60)), stored: second!.calls.stored, omitted: 50 });
    for (const beat of beats) expect(JSON.stringify(beat).length).toBeLessThan(7_000);
  });

  test('the call log (an async store) has the calls when the activity ends, and a failing one fails nothing', async () => {
    const blobs = new MemoryBlobStore();
    const logged: CallRecord[][] = [];
    const slowLog = async (made: CallRecord[]): Promise<void> => {
      await new Promise((resolve) => setTimeout(resolve, 50));
      logged.push([...made]);
    };
    const result = await env().run(() =>
      supervise(async (s) => (s.calls.push(...calls(3)), 'done'), { blobs, onCalls: slowLog }),
    );
    expect(result).toBe('done');
    expect(logged).toEqual([calls(3)]);
    const down = (): Promise<void> => Promise.reject(new Error('the database is down'));
    const despite = await env().run(() =>
      supervise(async (s) => (s.calls.push(...calls(1)), 'still done'), { blobs, onCalls: down }),
    );
    expect(despite).toBe('still done');
  });

  test('the heartbeat goes on while the call log is written, so a slow log cannot time a finished step out', async () => {
    const activity = new MockActivityEnvironment({ heartbeatTimeoutMs: 300 }, { logger: new DefaultLogger('ERROR') });
    let writing = false;
    const beatsWhileWriting: unknown[] = [];
    activity.on('heartbeat', (details: unknown) => writing && beatsWhileWriting.push(details));
    const slowLog = async (): Promise<void> => {
      writing = true;
      await new Promise((resolve) => setTimeout(resolve, 500)); // longer than the heartbeat timeout
      writing = false;
    };
    const result = await activity.run(() =>
      supervise(async (s) => (s.calls.push(...calls(2)), 'done'), { blobs: new MemoryBlobStore(), onCalls: slowLog }),
    );
    expect(result).toBe('done');
    // Every 100 ms (a third of the timeout) for 500 ms.
    expect(beatsWhileWriting.length).toBeGreaterThanOrEqual(3);
  });

  test('a result whose records cannot be stored carries their totals, and the activity still succeeds', async () => {
    const blobs = new MemoryBlobStore();
    blobs.put = () => Promise.reject(new Error('the store is down'));
    const result: { calls?: CallBatch } = await env().run(() =>
      supervise(async (s) => (s.calls.push(...calls(9)), callsOf(s)), { blobs }),
    );
    expect(result).toEqual({ calls: { usage: totalsOf(calls(9)), omitted: 9 } });
  });

  test('an earlier execution’s calls whose records cannot be read back still count by their totals', async () => {
    const blobs = new MemoryBlobStore();
    const lost = {
      calls: {
        usage: totalsOf(calls(11)),
        stored: { ref: `sha256:${'d'.repeat(64)}`, count: 10 },
        records: [call(11)],
      },
    };
    const result: { calls?: CallBatch } = await env(lost).run(() =>
      supervise(
        async (s) => {
          s.calls.push(call(12));
          expect(s.usage()).toEqual(addTotals(totalsOf(calls(11)), totalsOf([call(12)])));
          return callsOf(s);
        },
        { blobs },
      ),
    );
    // The two known records inline; the ten lost ones in the totals and counted as omitted.
    expect(result.calls).toEqual({
      usage: addTotals(totalsOf(calls(11)), totalsOf([call(12)])),
      records: [call(11), call(12)],
      omitted: 10,
    });
  });

  test('a retried execution starts from the calls on the last heartbeat, reading the stored ones back', async () => {
    const blobs = new MemoryBlobStore();
    const ref = (await blobs.put(Buffer.from(JSON.stringify(calls(10))), 'application/json', 'calls')).ref;
    const beat = {
      calls: { usage: totalsOf(calls(11)), stored: { ref, count: 10 }, records: [call(11)] },
      progress: { step: 3 },
    };
    const result: { calls?: CallBatch } = await env(beat).run(() =>
      supervise(
        async (s) => {
          expect(s.previousProgress).toEqual({ step: 3 });
          s.calls.push(call(12));
          return callsOf(s);
        },
        { blobs },
      ),
    );
    expect(result.calls!.usage).toEqual(totalsOf([...calls(11), call(12)]));
    expect(JSON.parse((await blobs.get(result.calls!.stored!.ref)).toString('utf8'))).toEqual([...calls(11), call(12)]);
    // A heartbeat from a worker before batches: a plain array.
    const legacy = await env({ calls: calls(2) }).run(() => supervise(async (s) => callsOf(s), { blobs }));
    expect(legacy).toEqual({ calls: { usage: totalsOf(calls(2)), records: calls(2) } });
  });

  test('a failure carries the batch once: the provider failure it wraps keeps its message and type, not its records', async () => {
    const blobs = new MemoryBlobStore();
    const error = (await env()
      .run(() =>
        supervise(
          async (s) => {
            s.calls.push(...calls(8));
            throw ApplicationFailure.create({
              message: 'out of tool rounds',
              type: 'ToolRoundsExhausted',
              nonRetryable: true,
              details: failureDetails(call(9, { status: 'error' }), calls(8)),
            });
          },
          { blobs },
        ),
      )
      .catch((e: unknown) => e)) as ApplicationFailure;
    expect(error.details).toHaveLength(1);
    expect(error).toBeInstanceOf(ApplicationFailure);
    expect(error.type).toBe('ToolRoundsExhausted');
    expect(error.nonRetryable).toBe(true);
    const [details] = error.details as [{ calls: CallBatch }];
    expect(details.calls).toMatchObject({ usage: { calls: 8 }, stored: { count: 8 } });
    const cause = error.cause as ApplicationFailure;
    expect(cause.message).toBe('out of tool rounds');
    expect(cause.type).toBe('ToolRoundsExhausted');
    expect(cause.details ?? []).toEqual([]);
  });
  test('an error from another realm (Node’s own, in a VM context) or a thrown non-error still carries the calls', async () => {
    const blobs = new MemoryBlobStore();
    const failing = (thrown: () => unknown) =>
      env()
        .run(() =>
          supervise(
            async (s) => {
              s.calls.push(...calls(2));
              throw thrown();
            },
            { blobs },
          ),
        )
        .catch((e: unknown) => e) as Promise<ApplicationFailure>;
    const foreign = runInNewContext(
      "Object.assign(new Error('EISDIR: illegal operation on a directory'), { code: 'EISDIR' })",
    ) as Error;
    expect(foreign instanceof Error).toBe(false);
    const wrapped = await failing(() => foreign);
    expect(wrapped).toBeInstanceOf(ApplicationFailure);
    expect(wrapped).toMatchObject({
      message: 'EISDIR: illegal operation on a directory',
      type: 'Error',
      nonRetryable: false,
    });
    expect(wrapped.cause).toBe(foreign);
    expect((wrapped.details as [{ calls: CallBatch }])[0].calls).toMatchObject({ usage: { calls: 2 } });
    const odd = await failing(() => 'a string, thrown');
    expect(odd).toMatchObject({ message: 'a string, thrown', type: 'Error' });
    expect((odd.details as [{ calls: CallBatch }])[0].calls).toMatchObject({ usage: { calls: 2 } });
  });
});
