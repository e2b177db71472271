/**
 * The call log in PostgreSQL (issue 26 §6) on a real server the test starts (test/support/postgres.ts): the
 * stores' shared contract; `treadle calls` over PostgreSQL gives the numbers it gives over SQLite for the same
 * calls, and `calls prune` deletes old rows; a password in the URL is never printed; and two `treadle worker`
 * processes with separate homes, writing to one PostgreSQL log, are both seen by `treadle calls` from either home.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { openCallLog } from '../../src/storage/open-call-log';
import { SqliteCallLog } from '../../src/storage/sqlite-call-log';
import { call, callLogContract, origin } from '../support/call-log-contract';
import { runCli, type CliRun } from '../support/cli';
import { testAddress } from '../support/harness';
import { startPostgres, type TestPostgres } from '../support/postgres';
import { startTreadleWorker, type TreadleWorkerProcess } from '../support/worker-process';

const PASSWORD = 'pw-nobody-may-print';
let pg: TestPostgres;
let root: string;
/** The environment of a user's shell: none of the test run's own Treadle or Temporal settings. */
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  pg = await startPostgres();
  root = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'call-log-pg-'));
  const settings = /^(TREADLE_|TEMPORAL_|ANTHROPIC_|OTEL_|CLAUDE_)/;
  env = {
    ...Object.fromEntries(Object.entries(process.env).filter(([name]) => !settings.test(name))),
    TEMPORAL_ADDRESS: testAddress(),
    TREADLE_AGENT: 'scripted',
  };
}, 60_000);
afterAll(async () => {
  await pg?.stop();
}, 30_000);

/** `treadle …` in the test's folder, from the user's shell (and `extra` over it). */
function treadle(args: string[], extra: NodeJS.ProcessEnv): Promise<CliRun> {
  return runCli(args, { cwd: root, env: { ...env, ...extra }, timeoutMs: 90_000 });
}

/** A URL with a password: the test server trusts every connection, so any password gets in. */
const withPassword = (url: string): string => url.replace('postgres://treadle@', `postgres://treadle:${PASSWORD}@`);

describe('in PostgreSQL', () => callLogContract(async (name) => openCallLog(await pg.createDatabase(name))));

it('`treadle calls` reads PostgreSQL and gives the numbers SQLite gives for the same calls; `calls prune` deletes old rows', async () => {
  const url = withPassword(await pg.createDatabase('cli'));
  const file = path.join(root, 'cli.sqlite');
  const now = Date.now();
  const ago = (days: number): string => new Date(now - days * 86_400_000).toISOString();
  for (const log of [openCallLog(url), new SqliteCallLog(file)]) {
    await log.append(origin('a', 'triage'), [call(ago(100), { latencyMs: 12.5 }), call(ago(1), { latencyMs: 40 })]);
    await log.append(origin('b', 'docs', 'convert'), [
      call(ago(2), { model: 'claude-haiku-4-5', status: 'error', error: 'overloaded', latencyMs: 7 }),
      call(ago(0.5), { provider: 'other', model: 'mystery-1', latencyMs: 900 }),
    ]);
    await log.close();
  }
  for (const by of ['model', 'pipeline', 'stage', 'provider']) {
    const [fromPostgres, fromSqlite] = await Promise.all(
      [url, file].map((log) => treadle(['calls', '--by', by, '--json'], { TREADLE_CALL_LOG: log })),
    );
    expect(fromPostgres).toMatchObject({ code: 0, stderr: '' });
    expect(fromPostgres!.stdout).toBe(fromSqlite!.stdout);
  }
  const table = await treadle(['calls', '--since', '7d'], { TREADLE_CALL_LOG: url });
  expect(table.stdout).toMatch(/^total +3 +1 /m);

  const pruned = await treadle(['calls', 'prune', '--before', '90d'], { TREADLE_CALL_LOG: url });
  expect(pruned).toMatchObject({ code: 0, stderr: '' });
  expect(pruned.stdout).toMatch(/^deleted 1 calls from before /);
  const after = JSON.parse((await treadle(['calls', '--json'], { TREADLE_CALL_LOG: url })).stdout) as {
    total: { calls: number };
  };
  expect(after.total.calls).toBe(3);
  for (const run of [table, pruned]) expect(run.stdout + run.stderr).not.toContain(PASSWORD);
}, 60_000);

it('names an unreachable PostgreSQL log without its password', async () => {
  const closed = withPassword(pg.url('nowhere')).replace(/:\d+\//, ':1/');
  const run = await treadle(['calls'], { TREADLE_CALL_LOG: closed });
  expect(run.code).toBe(1);
  expect(run.stderr).toMatch(/^treadle: call log postgres:\/\/treadle:\*\*\*@127\.0\.0\.1:1\/nowhere: .*ECONNREFUSED/);
  expect(run.stderr).not.toContain(PASSWORD);
});

describe('two workers on two machines', () => {
  const workers: { process: TreadleWorkerProcess; home: string; queue: string }[] = [];
  let url: string;

  beforeAll(async () => {
    url = withPassword(await pg.createDatabase('machines'));
    for (const name of ['a', 'b']) {
      const home = path.join(root, `home-${name}`);
      mkdirSync(home);
      const queue = `calls-pg-${name}-${Math.random().toString(36).slice(2, 8)}`;
      workers.push({
        process: await startTreadleWorker({
          env: { ...env, TREADLE_HOME: home, TREADLE_TASK_QUEUE: queue, TREADLE_CALL_LOG: url },
          cwd: home,
        }),
        home,
        queue,
      });
    }
  }, 180_000);

  afterAll(async () => {
    for (const { process: worker } of workers) await worker.stop();
  }, 60_000);

  it('both write to the one log, and `treadle calls` from either home sees both', async () => {
    for (const [i, worker] of workers.entries()) {
      // The start line names the log for the operator, without its password.
      expect(worker.process.log()).toContain(`call log ${url.replace(PASSWORD, '***')}`);
      expect(worker.process.log()).not.toContain(PASSWORD);
      const pipeline = path.join(worker.home, 'pipeline.json');
      writeFileSync(
        pipeline,
        JSON.stringify({
          name: `machine-${i}`,
          stages: [{ name: 'say', type: 'llm', agent: 'scripted', with: { prompt: 'Hello from {{ input.name }}' } }],
        }),
      );
      const run = await treadle(['run', '-f', pipeline, '--input', JSON.stringify({ name: `m${i}` }), '--wait'], {
        TREADLE_HOME: worker.home,
        TREADLE_TASK_QUEUE: worker.queue,
      });
      expect({ code: run.code, stderr: run.stderr, worker: run.code === 0 ? '' : worker.process.log() }).toEqual({
        code: 0,
        stderr: '',
        worker: '',
      });
    }
    const seen = await Promise.all(
      workers.map(async ({ home }) => {
        const run = await treadle(['calls', '--by', 'pipeline', '--json'], {
          TREADLE_HOME: home,
          TREADLE_CALL_LOG: url,
        });
        expect(run).toMatchObject({ code: 0, stderr: '' });
        return JSON.parse(run.stdout) as { groups: { group: string; calls: number }[] };
      }),
    );
    expect(seen[0]!.groups.map((g) => [g.group, g.calls])).toEqual([
      ['machine-0', 1],
      ['machine-1', 1],
    ]);
    expect(seen[1]).toEqual(seen[0]);
  }, 120_000);
});
