/**
 * What every call log store does (src/storage/call-log.ts), as test cases run against each backend: the SQLite
 * file (test/unit/call-log.test.ts) and PostgreSQL (test/integration/call-log-postgres.test.ts). Both stores
 * must give the same rows and the same numbers.
 */
import type { CallLog, CallOrigin } from '../../src/storage/call-log';
import type { CallRecord } from '../../src/model/shapes';

/** Opens an empty log named `name` (each case uses its own). */
export type OpenEmptyLog = (name: string) => Promise<CallLog>;

/** Where a test call was made: an `llm` activity of `workflowId` in `pipeline`'s `stage`. */
export const origin = (workflowId: string, pipeline: string, stage = 'draft'): CallOrigin => ({
  workflowId,
  runId: `${workflowId}-run`,
  activityId: '3',
  activityType: 'llm',
  pipeline,
  stage,
});

/** A successful Sonnet call at `at` (1,000 tokens in, 100 out, 500 ms), with `extra` over it. */
export const call = (at: string, extra: Partial<CallRecord> = {}): CallRecord => ({
  correlationId: 'item/draft/1',
  provider: 'anthropic',
  model: 'claude-sonnet-4-6',
  promptHash: `sha256:${at}`,
  inputTokens: 1000,
  outputTokens: 100,
  cacheReadTokens: 0,
  latencyMs: 500,
  status: 'success',
  at,
  ...extra,
});

/** Registers the contract's cases in the current `describe`. */
export function callLogContract(open: OpenEmptyLog): void {
  it('appends once per call: a retried activity reporting the same calls again adds nothing', async () => {
    const log = await open('once');
    const calls = [call('2026-11-24T10:00:00.000Z'), call('2026-11-24T10:00:01.000Z')];
    await log.append(origin('a', 'triage'), calls);
    await log.append(origin('a', 'triage'), [
      ...calls,
      call('2026-11-24T10:00:02.000Z', { status: 'error', error: 'overloaded' }),
    ]);
    const rows = await log.query();
    expect(rows.map((r) => [r.workflowId, r.at, r.status])).toEqual([
      ['a', '2026-11-24T10:00:00.000Z', 'success'],
      ['a', '2026-11-24T10:00:01.000Z', 'success'],
      ['a', '2026-11-24T10:00:02.000Z', 'error'],
    ]);
    expect(rows[2]).toMatchObject({
      error: 'overloaded',
      pipeline: 'triage',
      stage: 'draft',
      activityType: 'llm',
      runId: 'a-run',
    });
    expect(rows[0]).not.toHaveProperty('error');
    expect(rows[0]).not.toHaveProperty('runCorrelationId');
    await log.close();
  });

  it('filters by time and pipeline, and groups with counts, errors, tokens, latency percentiles and cost', async () => {
    const log = await open('groups');
    await log.append(origin('a', 'triage'), [
      call('2026-11-20T00:00:00.000Z', { latencyMs: 100 }),
      call('2026-11-24T00:00:00.000Z', { latencyMs: 300 }),
    ]);
    await log.append(origin('b', 'docs', 'convert'), [
      call('2026-11-24T01:00:00.000Z', {
        model: 'claude-haiku-4-5',
        latencyMs: 200,
        inputTokens: 2000,
        outputTokens: 10,
      }),
      call('2026-11-24T01:00:01.000Z', { provider: 'scripted', model: 'scripted', latencyMs: 1, status: 'timeout' }),
      call('2026-11-24T01:00:02.000Z', { provider: 'other', model: 'mystery-1', latencyMs: 900.5 }),
    ]);
    const byModel = await log.summarize('model');
    expect(byModel.groups.map((g) => [g.group, g.calls, g.errors])).toEqual([
      ['claude-haiku-4-5', 1, 0],
      ['claude-sonnet-4-6', 2, 0],
      ['mystery-1', 1, 0],
      ['scripted', 1, 1],
    ]);
    expect(byModel.groups[1]!.estimatedCostUsd).toBe(0.009); // 2 × (1000 × $3 + 100 × $15) / 1M
    expect(byModel.groups[2]!.estimatedCostUsd).toBeNull(); // an unknown model's price is unknown, not 0
    expect(byModel.total).toMatchObject({
      calls: 5,
      errors: 1,
      inputTokens: 6000,
      estimatedCostUsd: null,
      latencyMs: { p50: 200, p95: 901, max: 901 },
    });

    const recent = await log.summarize('pipeline', { since: new Date('2026-11-23T00:00:00.000Z') });
    expect(recent.groups.map((g) => [g.group, g.calls])).toEqual([
      ['docs', 3],
      ['triage', 1],
    ]);
    expect((await log.summarize('stage', { pipeline: 'docs' })).groups.map((g) => [g.group, g.calls])).toEqual([
      ['convert', 3],
    ]);
    expect((await log.summarize('provider', { pipeline: 'nope' })).total.calls).toBe(0);
    await log.close();
  });

  it('prunes the calls that started before a time and keeps the rest', async () => {
    const log = await open('prune');
    await log.append(origin('a', 'triage'), [
      call('2026-08-01T00:00:00.000Z'),
      call('2026-08-02T00:00:00.000Z'),
      call('2026-11-24T00:00:00.000Z'),
    ]);
    expect(await log.prune(new Date('2026-08-02T00:00:00.000Z'))).toBe(1);
    expect((await log.query()).map((r) => r.at)).toEqual(['2026-08-02T00:00:00.000Z', '2026-11-24T00:00:00.000Z']);
    expect(await log.prune(new Date('2026-12-01T00:00:00.000Z'))).toBe(2);
    expect(await log.query()).toEqual([]);
    await log.close();
  });
}
