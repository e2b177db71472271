/**
 * The cross-run call log (seed 003's llm_call_log) in SQLite: the stores' shared contract (idempotent appends,
 * filters, grouping, percentiles, cost, pruning), percentiles, and two processes appending to one file.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { summarizeRows } from '../../src/storage/call-log';
import { SqliteCallLog } from '../../src/storage/sqlite-call-log';
import { describeCallLog } from '../../src/storage/open-call-log';
import { call, callLogContract } from '../support/call-log-contract';

const dir = mkdtempSync(path.join(os.tmpdir(), 'call-log-'));
describe('in SQLite', () => callLogContract(async (name) => new SqliteCallLog(path.join(dir, `${name}.sqlite`))));

it('computes nearest-rank percentiles', () => {
  const rows = Array.from({ length: 20 }, (_, i) =>
    call(`2026-11-24T00:00:${String(i).padStart(2, '0')}.000Z`, { latencyMs: (i + 1) * 10 }),
  );
  expect(summarizeRows('x', rows).latencyMs).toEqual({ p50: 100, p95: 190, max: 200 });
  expect(summarizeRows('none', []).latencyMs).toEqual({ p50: 0, p95: 0, max: 0 });
});

it('lets two processes append to one file at once without losing a call', async () => {
  const file = path.join(dir, 'shared.sqlite');
  await new SqliteCallLog(file).close();
  const writer = (name: string) => `
    const { SqliteCallLog } = require(${JSON.stringify(path.join(__dirname, '..', '..', 'lib', 'storage', 'sqlite-call-log.js'))});
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
  expect((await log.query()).length).toBe(400);
  await log.close();
});

it('shows a PostgreSQL call log without its password, and a file as it is', () => {
  expect(describeCallLog('postgres://treadle:s3cret@db:5432/calls')).toBe('postgres://treadle:***@db:5432/calls');
  expect(describeCallLog('postgresql://db/calls?user=t&password=s3cret')).toBe(
    'postgresql://db/calls?user=t&password=***',
  );
  expect(describeCallLog('postgres://db/calls')).toBe('postgres://db/calls');
  expect(describeCallLog('/srv/treadle/calls.sqlite')).toBe('/srv/treadle/calls.sqlite');
});
