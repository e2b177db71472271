/**
 * Forks on the real server (issue 42): a fork runs again from one stage with a changed setting, carrying the
 * stages before it as they ended in the original — no activity, no model call (the call log says so) — and both
 * items name each other (search attribute, memo, audit). Failed and cancelled originals fork; a fan-out and a
 * TDD tree upstream are carried without a single child workflow.
 */
import { mkdtempSync } from 'node:fs';
import path from 'node:path';
import { TreadleCorrelationId, TreadleForkOf } from '../../src/model/search-attributes';
import type { Json } from '../../src/model/shapes';
import { SqliteCallLog } from '../../src/storage/sqlite-call-log';
import { eventually, startHarness, type Harness } from '../support/harness';
import { runTreadle, showRun } from '../support/cli';
import { leaf, tddRepos, type TddRepos } from '../support/tdd-fixtures';

const file = path.join(mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'fork-')), 'calls.sqlite');
let h: Harness;
let repos: TddRepos;
beforeAll(async () => {
  repos = tddRepos('fork-tdd-');
  h = await startHarness({ callLog: new SqliteCallLog(file) });
});
afterAll(async () => {
  await h?.shutdown();
  repos?.remove();
});

/** Five model-backed stages in a row, each quoting the one before (the scripted agent answers with its prompt). */
const fiveStages = (name: string) => ({
  name,
  stages: [
    { name: 'research', type: 'llm', agent: 'scripted', with: { prompt: 'Research {{ input.topic }}' } },
    ...[
      ['outline', 'research', 'Outline'],
      ['draft', 'outline', 'Draft'],
      ['polish', 'draft', 'Polish'],
      ['title', 'polish', 'Title'],
    ].map(([stage, dep, verb]) => ({
      name: stage,
      type: 'llm',
      agent: 'scripted',
      depends_on: [dep],
      with: { prompt: `${verb}: {{ upstream.${dep}.text }}` },
    })),
  ],
});

/** The call log's rows of one item (its workflow id, or its children's `<id>.…`), by stage. */
async function callsByStage(id: string): Promise<Record<string, number>> {
  const rows = (await new SqliteCallLog(file).query()).filter(
    (r) => r.workflowId === id || r.workflowId.startsWith(`${id}.`),
  );
  const out: Record<string, number> = {};
  for (const row of rows) out[row.stage ?? '?'] = (out[row.stage ?? '?'] ?? 0) + 1;
  return out;
}

it('forks a 5-stage item from stage 4: 0 calls for stages 1–3, stage 4 runs with the changed setting, lineage both ways', async () => {
  const pipelineName = `five-${h.taskQueue}`;
  const original = h.id('five');
  await h.client.start(fiveStages(pipelineName), { topic: 'tides' }, { id: original });
  expect((await h.client.result(original)).status).toBe('completed');
  expect(await callsByStage(original)).toEqual({ research: 1, outline: 1, draft: 1, polish: 1, title: 1 });

  const fork = await h.client.items.fork(original, {
    from: 'polish',
    overrides: { stages: { polish: { with: { prompt: 'Shorten: {{ upstream.draft.text }}' } } } },
  });
  expect(fork).toMatchObject({
    of: original,
    from: 'polish',
    existing: false,
    taskQueue: h.taskQueue,
    carried: ['research', 'outline', 'draft'],
    rerun: ['polish', 'title'],
  });
  expect((await h.client.result(fork.id)).status).toBe('completed');
  // The call log: the fork called a model for polish and title only.
  expect(await callsByStage(fork.id)).toEqual({ polish: 1, title: 1 });

  const [before, after] = [await h.client.getState(original), await h.client.getState(fork.id)];
  for (const stage of ['research', 'outline', 'draft']) {
    expect(after.stages[stage]).toMatchObject({ status: 'completed', carriedFrom: original, attempts: [] });
    expect(after.stages[stage]!.artefact).toEqual(before.stages[stage]!.artefact);
  }
  // Stage 4 saw the changed prompt, over the carried draft; the original's is as it was.
  const text = async (state: typeof after, stage: string) =>
    ((await h.client.readArtefact(state.stages[stage]!.artefact)) as { text: string }).text;
  expect(await text(after, 'polish')).toMatch(/^scripted reply to: Shorten: scripted reply to: Draft:/);
  expect(await text(before, 'polish')).toMatch(/^scripted reply to: Polish: scripted reply to: Draft:/);
  expect(after.forkOf).toEqual({ id: original, from: 'polish' });
  expect(after.events.filter((e) => e.type === 'StageCarried').map((e) => e.stage)).toEqual([
    'research',
    'outline',
    'draft',
  ]);

  // The fork names its original: search attribute, memo; the original lists it, and each audit shows the other.
  const described = await h.temporal.workflow.getHandle(fork.id).describe();
  expect(described.typedSearchAttributes.get(TreadleForkOf)).toBe(original);
  expect(described.memo?.treadleFork).toMatchObject({ of: original, from: 'polish', inputChanged: false });
  await eventually(async () => {
    expect((await h.client.items.forks(original)).map((f) => f.id)).toEqual([fork.id]);
    return true;
  });
  const forkAudit = (await h.client.audit(fork.id)).map((e) => e.message);
  expect(forkAudit).toContain(`forked from ${original}: runs again from polish; carries research, outline, draft`);
  expect(forkAudit.filter((m) => m === `carried from ${original} as it ended there (not run again)`)).toHaveLength(3);
  expect((await h.client.audit(original)).map((e) => e.message)).toContain(
    `forked as ${fork.id}, which runs again from polish (completed)`,
  );

  // The same fork again is the same item; a change to a carried stage, an unknown stage and a bad setting are refused.
  expect(
    await h.client.items.fork(original, {
      from: 'polish',
      overrides: { stages: { polish: { with: { prompt: 'Shorten: {{ upstream.draft.text }}' } } } },
    }),
  ).toMatchObject({ id: fork.id, existing: true });
  await expect(
    h.client.items.fork(original, { from: 'polish', overrides: { stages: { draft: { with: { prompt: 'x' } } } } }),
  ).rejects.toThrow(
    `cannot fork ${original}:\n  - a change to stage draft would not take effect: the fork carries it as it ended in ${original} (fork from draft to run it again)`,
  );
  await expect(h.client.items.fork(original, { from: 'nope' })).rejects.toThrow(
    '  - no stage named "nope" (the stages: research, outline, draft, polish, title)',
  );
  await expect(
    h.client.items.fork(original, {
      from: 'polish',
      overrides: { stages: { polish: { review_policy: 'sometimes' } } },
    }),
  ).rejects.toThrow(/cannot fork .*\n {2}- .*review_policy/);
  await expect(h.client.items.fork(h.id('missing'), { from: 'polish' })).rejects.toThrow(/unknown work item/);
}, 120_000);

it('forks a failed item with a new input, and a cancelled one; the CLI prints what it carries and waits', async () => {
  const spec = {
    name: `fails-${h.taskQueue}`,
    stages: [
      { name: 'fetch', run: 'scripted' },
      { name: 'parse', run: 'scripted', depends_on: ['fetch'] },
      { name: 'check', run: 'scripted', depends_on: ['parse'], review_policy: 'on_escalation' },
    ],
  };
  const script = (check: Json): Json => ({
    script: { fetch: [{ output: { page: 1 } }], parse: [{ output: { rows: 3 } }], check: [check] },
  });
  const failed = h.id('failed');
  await h.client.start(spec, script({ error: 'the check broke' }), { id: failed });
  expect(await h.client.result(failed)).toMatchObject({ status: 'failed', failedStages: ['check'] });

  const run = await runTreadle(
    h,
    [
      'fork',
      failed,
      '--from',
      'check',
      '--input',
      JSON.stringify(script({ output: { ok: true } })),
      '--wait',
      // The CLI's own default queue is another: the fork starts on its original's, where the worker is.
    ],
    { TREADLE_TASK_QUEUE: `elsewhere-${h.taskQueue}` },
  );
  expect(run.code).toBe(0);
  expect(run.stderr).toMatch(new RegExp(`forks ${failed} from check; carried: fetch, parse; runs again: check\\n`));
  expect(run.stdout).toMatch(/work item completed/);
  const forkId = /started (\S+)/.exec(run.stdout)![1]!;
  // Its status says what it is a fork of, and which stages it carried.
  const status = await runTreadle(h, ['status', forkId]);
  expect(status.stdout).toContain(`fork of ${failed}, run again from check`);
  expect(status.stdout).toMatch(new RegExp(`fetch\\s+completed\\s+0/\\d+\\s+carried from ${failed}`));
  const forkState = await h.client.getState(forkId);
  expect(forkState.stages.fetch!.carriedFrom).toBe(failed);
  expect(forkState.stages.check!.status).toBe('completed');
  const list = await eventually(async () => {
    const listed = await runTreadle(h, ['forks', failed]);
    expect(listed.stdout).toContain(forkId);
    return listed;
  });
  expect(list.stdout).toMatch(/FORK\s+FROM\s+STATUS/);

  // A cancelled item (waiting for a review of its second stage) forks from that stage: the first is carried.
  const waiting = {
    ...spec,
    name: `waits-${h.taskQueue}`,
    stages: spec.stages.map((s) => (s.name === 'parse' ? { ...s, review_policy: 'always' } : s)),
  };
  const cancelled = h.id('cancelled');
  await h.client.start(waiting, script({ output: { ok: true } }), { id: cancelled });
  await eventually(async () => ((await h.client.getState(cancelled)).pendingReviews.length === 1 ? true : undefined));
  await h.client.cancel(cancelled, { by: 'tester', reason: 'wrong parser' });
  await eventually(async () => ((await h.client.getState(cancelled)).status === 'cancelled' ? true : undefined));
  const again = await h.client.items.fork(cancelled, {
    from: 'parse',
    overrides: { stages: { parse: { review_policy: 'never' } } },
  });
  expect(again.carried).toEqual(['fetch']);
  expect((await h.client.result(again.id)).status).toBe('completed');

  const bad = await runTreadle(h, ['fork', failed, '--from', 'check', '--set', 'check=1']);
  expect(bad.code).toBe(2);
  expect(bad.stderr).toContain('--set takes stage.key=value');
  expect(showRun(bad)).not.toContain('at ');
}, 120_000);

it('carries a fan-out and a TDD tree upstream: no child workflow, no model call for them', async () => {
  const l = leaf('forkleaf');
  const repo = await repos.create('forkleaf');
  const replies = {
    'forkleaf.scaffold': [l.initWork],
    'forkleaf.tddWriteTests': [l.testsReady],
    'forkleaf.impl': [l.testsPassed],
    'forkleaf.tddReviewImpl': [l.approved],
    'forkleaf.merger': [l.mergeComplete],
  };
  const spec = {
    name: `upstream-${h.taskQueue}`,
    stages: [
      { name: 'extract', run: 'scripted' },
      {
        name: 'classify',
        run: 'fan_out',
        depends_on: ['extract'],
        with: { items: 'emails', stage: { run: 'scripted', max_retries: 0 } },
      },
      { name: 'build', run: 'tdd', with: { spec: l.spec, repo, replies } },
      {
        name: 'report',
        type: 'llm',
        agent: 'scripted',
        depends_on: ['classify', 'build'],
        with: { prompt: 'Report on {{ upstream.build.exit }}' },
      },
    ],
  };
  const emails = ['a', 'b', 'c'].map((subject) => ({ subject, script: { classify: [{ output: { subject } }] } }));
  const original = h.id('upstream');
  await h.client.start(spec, { script: { extract: [{ output: { emails } }] } }, { id: original });
  expect((await h.client.result(original)).status).toBe('completed');
  expect((await callsByStage(original)).report).toBe(1);

  const fork = await h.client.items.fork(original, {
    from: 'report',
    overrides: { stages: { report: { with: { prompt: 'Summary of {{ upstream.build.exit }}' } } } },
  });
  expect(fork.carried).toEqual(['extract', 'classify', 'build']);
  expect((await h.client.result(fork.id)).status).toBe('completed');
  expect(await callsByStage(fork.id)).toEqual({ report: 1 });
  // Neither the fan-out nor the tree ran again: the fork started neither child workflow (the original did).
  for (const child of ['classify.1', 'build.1']) {
    await expect(h.temporal.workflow.getHandle(`${original}.${child}`).describe()).resolves.toBeDefined();
    await expect(h.temporal.workflow.getHandle(`${fork.id}.${child}`).describe()).rejects.toThrow(/not found/i);
  }

  const [before, after] = [await h.client.getState(original), await h.client.getState(fork.id)];
  for (const stage of ['classify', 'build'])
    expect(after.stages[stage]!.artefact).toEqual(before.stages[stage]!.artefact);
  const report = (await h.client.readArtefact(after.stages.report!.artefact)) as { text: string };
  expect(report.text).toBe('scripted reply to: Summary of MergeComplete');

  // Forked from the TDD stage itself, with a changed spec: the tree runs again under the fork, on the same
  // repository; the fan-out beside it stays carried.
  const fromTree = await h.client.items.fork(original, {
    from: 'build',
    overrides: { stages: { build: { with: { spec: { ...l.spec, description: 'forkleaf() is one' } } } } },
  });
  expect(fromTree).toMatchObject({ carried: ['extract', 'classify'], rerun: ['build', 'report'] });
  expect((await h.client.result(fromTree.id)).status).toBe('completed');
  await expect(h.temporal.workflow.getHandle(`${fromTree.id}.classify.1`).describe()).rejects.toThrow(/not found/i);
  const tree = await h.client.getTddState(`${fromTree.id}.build.1`);
  expect(tree.status).toBe('merged');
  const forked = await h.client.getState(fromTree.id);
  expect(forked.stages.build).toMatchObject({ status: 'completed', attempts: [expect.anything()] });
  expect(forked.stages.build!.carriedFrom).toBeUndefined();
  expect(forked.stages.classify!.carriedFrom).toBe(original);
}, 180_000);

it('an item started without a correlation id (as a Temporal Schedule starts one) publishes the one it made', async () => {
  const id = h.id('unattributed');
  const handle = await h.temporal.workflow.start('workItem', {
    taskQueue: h.taskQueue,
    workflowId: id,
    args: [{ pipeline: { name: `bare-${h.taskQueue}`, stages: [{ name: 'only', run: 'scripted' }] }, input: null }],
  });
  await handle.result();
  const { correlationId } = await h.client.getState(id);
  expect(correlationId).toMatch(/^[0-9a-f-]{36}$/);
  const attributes = (await handle.describe()).typedSearchAttributes;
  expect(attributes.get(TreadleCorrelationId)).toBe(correlationId);
  // So the audit by correlation id finds it, as it finds items started by Treadle's client.
  const audit = await eventually(async () => {
    const entries = await h.client.audit(correlationId!).catch(() => undefined);
    return entries?.length ? entries : undefined;
  });
  expect(new Set(audit.map((e) => e.workflowId))).toEqual(new Set([id]));
});
