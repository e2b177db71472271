/** The cross-run call log (seed 003's llm_call_log) in SQLite: idempotent appends, filters, grouping, percentiles, cost. */
import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SqliteCallLog, summarizeRows, type CallOrigin } from '../../src/storage/call-log';
import type { CallRecord } from '../../src/model/shapes';

const dir = mkdtempSync(path.join(os.tmpdir(), 'call-log-'));
const origin = (workflowId: string, pipeline: string, stage = 'draft'): CallOrigin => ({
  workflowId,
  runId: `${workflowId}-run`,
  activityId: '3',
  activityType: 'llm',
  pipeline,
  stage,
});
const call = (at: string, extra: Partial<CallRecord> = {}): CallRecord => ({
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

it('appends once per call: a retried activity reporting the same calls again adds nothing', () => {
  const log = new SqliteCallLog(path.join(dir, 'once.sqlite'));
  const calls = [call('2026-11-24T10:00:00.000Z'), call('2026-11-24T10:00:01.000Z')];
  log.append(origin('a', 'triage'), calls);
  log.append(origin('a', 'triage'), [
    ...calls,
    call('2026-11-24T10:00:02.000Z', { status: 'error', error: 'overloaded' }),
  ]);
  const rows = log.query();
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
  log.close();
});

it('filters by time and pipeline, and groups with counts, errors, tokens, latency percentiles and cost', () => {
  const log = new SqliteCallLog(path.join(dir, 'groups.sqlite'));
  log.append(origin('a', 'triage'), [
    call('2026-11-20T00:00:00.000Z', { latencyMs: 100 }),
    call('2026-11-24T00:00:00.000Z', { latencyMs: 300 }),
  ]);
  log.append(origin('b', 'docs', 'convert'), [
    call('2026-11-24T01:00:00.000Z', {
      model: 'claude-haiku-4-5',
      latencyMs: 200,
      inputTokens: 2000,
      outputTokens: 10,
    }),
    call('2026-11-24T01:00:01.000Z', { provider: 'scripted', model: 'scripted', latencyMs: 1, status: 'timeout' }),
    call('2026-11-24T01:00:02.000Z', { provider: 'other', model: 'mystery-1', latencyMs: 900 }),
  ]);
  const byModel = log.summarize('model');
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
    latencyMs: { p50: 200, p95: 900, max: 900 },
  });

  const recent = log.summarize('pipeline', { since: new Date('2026-11-23T00:00:00.000Z') });
  expect(recent.groups.map((g) => [g.group, g.calls])).toEqual([
    ['docs', 3],
    ['triage', 1],
  ]);
  expect(log.summarize('stage', { pipeline: 'docs' }).groups.map((g) => [g.group, g.calls])).toEqual([['convert', 3]]);
  expect(log.summarize('provider', { pipeline: 'nope' }).total.calls).toBe(0);
  log.close();
});

it('computes nearest-rank percentiles', () => {
  const rows = Array.from({ length: 20 }, (_, i) =>
    call(`2026-11-24T00:00:${String(i).padStart(2, '0')}.000Z`, { latencyMs: (i + 1) * 10 }),
  );
  expect(summarizeRows('x', rows).latencyMs).toEqual({ p50: 100, p95: 190, max: 200 });
  expect(summarizeRows('none', []).latencyMs).toEqual({ p50: 0, p95: 0, max: 0 });
});

it('lets two processes append to one file at once without losing a call', () => {
  const file = path.join(dir, 'shared.sqlite');
  new SqliteCallLog(file).close();
  const writer = (name: string) => `
    const { SqliteCallLog } = require(${JSON.stringify(path.join(__dirname, '..', '..', 'lib', 'storage', 'call-log.js'))});
    const log = new SqliteCallLog(${JSON.stringify(file)});
    for (let i = 0; i < 200; i++) log.append({ workflowId: '${name}-' + i, runId: 'r', activityId: '1', activityType: 'llm', pipeline: 'p' },
      [{ correlationId: 'c', provider: 'scripted', model: 'scripted', promptHash: 'h', inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, latencyMs: 1, status: 'success', at: '2026-11-24T00:00:00.000Z' }]);
    log.close();`;
  const children = ['one', 'two'].map((name) =>
    spawnSync(process.execPath, ['-e', writer(name)], { encoding: 'utf8' }),
  );
  for (const child of children)
    expect({ status: child.status, stderr: child.stderr }).toEqual({ status: 0, stderr: '' });
  const log = new SqliteCallLog(file);
  expect(log.query().length).toBe(400);
  log.close();
});
