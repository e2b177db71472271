/**
 * The cross-run call log on the real server: every model call of every run lands in the SQLite log once
 * (also when Temporal retries the activity that made it), `treadle calls` groups them across runs and
 * pipelines, and no prompt text is stored, only its hash.
 */
import { ApplicationFailure } from '@temporalio/common';
import { mkdtempSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Registry } from '../../src/activities/registry';
import { SqliteCallLog } from '../../src/storage/sqlite-call-log';
import { defaultRegistry } from '../../src/worker';
import { startHarness, type Harness } from '../support/harness';
import { runTreadle } from '../support/cli';

const file = path.join(mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'calls-')), 'calls.sqlite');
const SECRET = 'the-prompt-text-nobody-may-store';
let executions = 0;
let h: Harness;
beforeAll(async () => {
  // Calls the model, then fails its first execution: Temporal retries it, and the retry reports both calls.
  const flaky = new Registry().stage(
    'flaky_llm',
    async (ctx) => {
      const reply = await ctx
        .agent('scripted')
        .run({ messages: [{ role: 'user', content: `${SECRET} (flaky)` }], correlationId: ctx.idempotencyKey });
      if (++executions === 1) throw ApplicationFailure.retryable('lost the connection after the call', 'Flaky');
      return { outcome: 'completed', artefact: { text: reply.text } };
    },
    { usesAgent: true },
  );
  h = await startHarness({ registry: defaultRegistry().merge(flaky), callLog: new SqliteCallLog(file) });
});
afterAll(async () => {
  await h?.shutdown();
});

const llmPipeline = (name: string) => ({
  name,
  stages: [
    { name: 'summarize', type: 'llm', agent: 'scripted', with: { prompt: `${SECRET}: {{ input.text }}` } },
    {
      name: 'title',
      type: 'llm',
      agent: 'scripted',
      depends_on: ['summarize'],
      with: { prompt: 'Title for {{ upstream.summarize.text }}' },
    },
  ],
});

it('logs every call of every run once, groups them across runs and pipelines, and keeps no prompt text', async () => {
  const names = [`alpha-${h.taskQueue}`, `beta-${h.taskQueue}`];
  const ids: string[] = [];
  for (const [i, name] of names.entries()) {
    for (const text of ['one', 'two']) {
      const id = h.id(`calls-${i}`);
      ids.push(id);
      await h.client.start(llmPipeline(name), { text }, { id });
    }
  }
  const retried = h.id('calls-retried');
  await h.client.start(
    {
      name: names[0]!,
      stages: [{ name: 'flaky', run: 'flaky_llm', activity: { retry: { initial_interval: '100ms' } } }],
    },
    null,
    { id: retried },
  );
  for (const id of [...ids, retried]) expect((await h.client.result(id)).status).toBe('completed');

  const log = new SqliteCallLog(file);
  const rows = (await log.query()).filter((r) => [...ids, retried].includes(r.workflowId));
  // Two calls per two-stage run; the retried activity made two calls (one per execution), each logged once.
  expect(rows.length).toBe(4 * 2 + 2);
  expect(rows.filter((r) => r.workflowId === retried).length).toBe(2);
  const retriedState = await h.client.getState(retried);
  expect(retriedState.stages['flaky']!.attempts.flatMap((a) => a.calls ?? []).length).toBe(2);
  for (const row of rows) expect(row.runCorrelationId).toBe((await h.client.getState(row.workflowId)).correlationId);
  await log.close();

  const byPipeline = await runTreadle(h, ['calls', '--by', 'pipeline', '--json'], { TREADLE_CALL_LOG: file });
  expect(byPipeline.code).toBe(0);
  const summary = JSON.parse(byPipeline.stdout) as {
    groups: { group: string; calls: number; errors: number; estimatedCostUsd: number | null }[];
  };
  expect(
    summary.groups.filter((g) => names.includes(g.group)).map((g) => [g.group, g.calls, g.estimatedCostUsd]),
  ).toEqual([
    [names[0], 6, 0],
    [names[1], 4, 0],
  ]);
  const table = await runTreadle(h, ['calls', '--pipeline', names[1]!, '--by', 'stage', '--since', '1h'], {
    TREADLE_CALL_LOG: file,
  });
  expect(table.code).toBe(0);
  expect(table.stdout.split('\n')[0]).toMatch(
    /^STAGE +CALLS +ERRORS +IN TOKENS +OUT TOKENS +LATENCY P50\/P95\/MAX MS +COST$/,
  );
  expect(table.stdout).toMatch(/^summarize +2 +0 /m);
  expect(table.stdout).toMatch(/^title +2 +0 /m);
  expect(table.stdout).toMatch(/^total +4 +0 /m);

  // Only hashes: the prompt's text is nowhere in the database (nor in its write-ahead log).
  for (const f of [file, `${file}-wal`]) {
    let bytes = '';
    try {
      bytes = readFileSync(f, 'latin1');
    } catch {
      continue;
    }
    expect(bytes.includes(SECRET)).toBe(false);
  }
}, 120_000);
