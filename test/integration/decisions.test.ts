/**
 * One listing of every pending decision and one way to answer it (issue 27), on the real server: an item
 * waiting for a review is listed with its kind and key; `decide` answers it; answering it again returns
 * `already_decided` with who decided; the same for an approval request; the inbox's delta listing names only
 * what changed or closed; `treadle decisions` filters by group and age; answering a failed loop whose worker
 * stopped gives up after the review timeout. Budget and TDD decisions: not yet covered here (their mapping is
 * unit-tested in test/unit/pending-decisions.test.ts).
 */
import { TreadleClient } from '../../src/client';
import { pipeline } from '../../src/kinds/builder';
import type { Json } from '../../src/model/shapes';
import { decisionKey, type PendingDecision } from '../../src/model/decisions';
import { runTreadle } from '../support/cli';
import { eventually, startHarness } from '../support/harness';
import { decisionsHarness, failedLoop, listedDecision } from '../support/decisions-harness';
import { fixedLoopSpec, loopReply } from '../support/pipelines';

const { h } = decisionsHarness('decisions');

// Visibility is namespace-wide and other files run in parallel: this file's own pipeline name.
const PIPELINE = 'decisions-i27b';

it('lists a pending review, decides it, and a second answer is already_decided by the first reviewer', async () => {
  const spec = pipeline(PIPELINE).stage('draft', 'scripted').reviewPolicy('draft', 'always');
  const id = h.id();
  await h.client.start(spec, null, { id });
  const key = decisionKey(id, 'review', 'draft');
  const listed = await listedDecision(
    () => h.client.listPendingDecisions({ pipeline: PIPELINE }),
    (d) => d.key === key,
    'the review in the listing',
  );
  expect(listed).toMatchObject({ kind: 'review', itemId: id, stage: 'draft', pipeline: PIPELINE, reason: 'always' });
  expect(await h.client.listPendingDecisions({ pipeline: PIPELINE, kinds: ['approval'] })).toEqual([]);

  await expect(h.client.decide(key, { action: 'reject' }, 'bob')).rejects.toThrow('reject needs a reason');
  expect(await h.client.decide(key, { action: 'approve' }, 'alice')).toEqual({
    status: 'decided',
    by: 'alice',
    outcome: 'approve',
  });
  expect(await h.client.decide(key, { action: 'reject', reason: 'late' }, 'bob')).toMatchObject({
    status: 'already_decided',
    by: 'alice',
    outcome: 'approve',
  });
});

it('lists an approval request as an approval decision keyed by its id; decide approves it, then already_decided', async () => {
  const spec = pipeline(PIPELINE)
    .stage('draft', 'scripted')
    .stage('approve', 'approval', { dependsOn: ['draft'], with: { action: 'note', items: 'notes' } });
  const id = h.id('approval');
  const input: Json = { script: { draft: [{ output: { notes: [{ title: 'ship it' }] } }] } };
  await h.client.start(spec, input, { id });
  const listed = await listedDecision(
    () => h.client.listPendingDecisions({ pipeline: PIPELINE, kinds: ['approval'] }),
    (d) => d.itemId === id,
    'the approval in the listing',
  );
  expect(listed).toMatchObject({ kind: 'approval', stage: 'approve', message: 'note "ship it"', reason: 'approval' });
  expect(await h.client.decide(listed.key, { action: 'approve' }, 'carol')).toEqual({
    status: 'decided',
    by: 'carol',
    outcome: 'approved',
  });
  expect(await h.client.decide(listed.key, { action: 'reject', reason: 'no' }, 'dave')).toMatchObject({
    status: 'already_decided',
    by: 'carol',
    outcome: 'approved',
  });
});

it('the delta listing names what changed or closed since, not every item that still waits', async () => {
  const spec = pipeline(PIPELINE).stage('draft', 'scripted').reviewPolicy('draft', 'always');
  const [decided, waiting] = [h.id('delta-decided'), h.id('delta-waiting')];
  for (const id of [decided, waiting]) await h.client.start(spec, null, { id });
  await eventually(
    async () => {
      const keys = (await h.client.listPendingDecisions({ pipeline: PIPELINE })).map((d) => d.key);
      return [decided, waiting].every((id) => keys.includes(decisionKey(id, 'review', 'draft'))) || undefined;
    },
    30_000,
    'both reviews in the listing',
  );
  // Both requests are older than `since`: only the one decided after it may be in the delta.
  await new Promise((resolve) => setTimeout(resolve, 1_100));
  const since = new Date();
  await h.client.decide(decisionKey(decided, 'review', 'draft'), { action: 'approve' }, 'alice');
  const changes = await eventually(
    async () => {
      const listed = await h.client.listDecisionChanges(since);
      return listed.some((c) => c.workflowId === decided && c.closed) ? listed : undefined;
    },
    30_000,
    'the decided item, closed, in the delta',
  );
  expect(changes.find((c) => c.workflowId === decided)).toMatchObject({ closed: true, decisions: [] });
  // Before the status clause, `CloseTime >= since` matched every running execution (SQL visibility's close
  // time of a running one is the far future), so the still-waiting item was listed as well.
  expect(changes.map((c) => c.workflowId)).not.toContain(waiting);
});

it('answering a failed loop whose worker stopped says within seconds that nothing was sent', async () => {
  const other = await startHarness();
  const id = other.id('loop');
  const replies = { agent_replies: { work: [loopReply(1), { crash: 'exited with code 1' }] } };
  await other.client.start(fixedLoopSpec(`${PIPELINE}-loop`, 4), replies, { id });
  const failed = await failedLoop(() => other.client.loops(id));
  // Stopped just now, the worker still shows as polling: no answer within the wait is what says "no worker".
  await other.shutdown();
  const impatient = new TreadleClient(h.temporal, { taskQueue: other.taskQueue, answerWaitMs: 2_000 });
  const started = Date.now();
  await expect(
    impatient.decide(decisionKey(failed.workflowId, 'loop', 'work'), { action: 'resume' }, 'alice'),
  ).rejects.toMatchObject({
    code: 'no_worker',
    message: `the resume of loop ${failed.workflowId} was not sent: no worker answered on task queue ${other.taskQueue} within 2s; start one with \`TREADLE_TASK_QUEUE=${other.taskQueue} treadle worker\`, then send it again`,
  });
  expect(Date.now() - started).toBeLessThan(15_000);
}, 90_000);

it('treadle decisions filters by reviewer group and by age, as the inbox does; a bad age is a usage error', async () => {
  const pipelineName = `${PIPELINE}-cli`;
  const spec = (group: string) =>
    pipeline(pipelineName).stage('draft', 'scripted').reviewPolicy('draft', 'always').reviewers('draft', group);
  const [legal, editors] = [h.id('legal'), h.id('editors')];
  await h.client.start(spec('legal'), null, { id: legal });
  await h.client.start(spec('editors'), null, { id: editors });
  await eventually(
    async () => ((await h.client.listPendingDecisions({ pipeline: pipelineName })).length === 2 ? true : undefined),
    30_000,
    'both reviews in the listing',
  );
  const listed = async (...args: string[]): Promise<string[]> => {
    const run = await runTreadle(h, ['decisions', '--pipeline', pipelineName, '--json', ...args]);
    expect(run.code).toBe(0);
    return (JSON.parse(run.stdout) as PendingDecision[]).map((d) => d.itemId);
  };
  expect(await listed('--reviewers', 'legal', '--older-than', '0m')).toEqual([legal]);
  expect((await listed()).sort()).toEqual([editors, legal].sort());
  expect(await listed('--older-than', '1d')).toEqual([]);
  const bad = await runTreadle(h, ['decisions', '--older-than', 'soon']);
  expect(bad.code).toBe(2);
  expect(bad.stderr).toContain('an age in minutes, hours or days, such as 15m, 2h or 1d.');
});
