/**
 * Work items announce to the notifier (docs/notifications.md), end to end: a worker with a notifications file runs
 * an item whose stage waits for review; the receiver gets `decision_owed` with the inbox link, then `decided` when
 * the review is answered, then `item_failed` when the rejection fails the item. A worker without a file announces
 * nothing: its item's history has no `announce` activity.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from '../../src/kinds/builder';
import { decisionKey } from '../../src/model/decisions';
import { notifierWorkflowId } from '../../src/notify/shapes';
import { eventually, startHarness, type Harness } from '../support/harness';
import { FAILING_LOOP_INPUT, FAILING_LOOP_SPEC, loopFailed } from '../support/decision-recording';
import { noteActions } from '../support/pipelines';
import { leaf, tddRepos, type TddRepos } from '../support/tdd-fixtures';
import { WebhookReceiver } from '../support/webhook-receiver';

const receiver = new WebhookReceiver();
const dir = mkdtempSync(path.join(os.tmpdir(), 'item-notify-'));
// Visibility is namespace-wide and other files run in parallel: this file's own pipeline name.
const PIPELINE = 'item-notify-i40';
let withFile: Harness;
let withoutFile: Harness;

let repos: TddRepos;

beforeAll(async () => {
  await receiver.up();
  // Loop stages work in a workspace of their own; TDD trees in repositories under TREADLE_TDD_REPOS.
  process.env.TREADLE_LOOP_WORKSPACE = mkdtempSync(path.join(os.tmpdir(), 'item-notify-loops-'));
  repos = tddRepos('item-notify-tdd-');
  const file = path.join(dir, 'notify.yaml');
  writeFileSync(
    file,
    `webhooks:\n  - name: hooks\n    url: ${receiver.url('/hooks')}\n    secret_env: ITEM_HOOK_SECRET\n`,
  );
  Object.assign(process.env, {
    ITEM_HOOK_SECRET: 'item-key',
    TREADLE_NOTIFY: file,
    TREADLE_UI_URL: 'https://inbox.example.com',
  });
  // The worker reads TREADLE_NOTIFY when it is created: one with the file, then one without.
  withFile = await startHarness({ approvalActions: noteActions });
  delete process.env.TREADLE_NOTIFY;
  withoutFile = await startHarness();
});

afterAll(async () => {
  await withFile?.temporal.workflow
    .getHandle(notifierWorkflowId(withFile.taskQueue))
    .terminate('test over')
    .catch(() => undefined);
  await withFile?.shutdown();
  await withoutFile?.shutdown();
  await receiver.down();
  repos?.remove();
  delete process.env.TREADLE_LOOP_WORKSPACE;
  for (const name of ['ITEM_HOOK_SECRET', 'TREADLE_NOTIFY', 'TREADLE_UI_URL']) delete process.env[name];
});

const reviewed = () =>
  pipeline(PIPELINE).stage('draft', 'scripted').reviewPolicy('draft', 'always').reviewers('draft', 'legal');
const received = (key: string, event: string) =>
  receiver.announcements('/hooks', { key, event }).map(({ body }) => body);

/** The types of the activities the item scheduled (the prepare step is a local activity: not among them). */
async function activityTypes(h: Harness, id: string): Promise<string[]> {
  const { events } = await h.temporal.workflow.getHandle(id).fetchHistory();
  return (events ?? []).flatMap((e) => e.activityTaskScheduledEventAttributes?.activityType?.name ?? []);
}

it('announces a review owed (with its link), its answer, and the item failing', async () => {
  const h = withFile;
  const id = h.id('owed');
  await h.client.start(reviewed(), null, { id });
  const key = decisionKey(id, 'review', 'draft');
  const [owed] = await eventually(
    async () => {
      const got = received(key, 'decision_owed');
      return got.length > 0 ? got : undefined;
    },
    60_000,
    'decision_owed delivered',
  );
  expect(owed).toMatchObject({
    itemId: id,
    workflowId: id,
    pipeline: PIPELINE,
    stage: 'draft',
    kind: 'review',
    reviewers: 'legal',
    link: `https://inbox.example.com/d/${encodeURIComponent(key)}`,
  });
  await h.client.decide(key, { action: 'reject', reason: 'not this' }, 'alice');
  const [decided] = await eventually(
    async () => {
      const got = received(key, 'decided');
      return got.length > 0 ? got : undefined;
    },
    60_000,
    'decided delivered',
  );
  expect(decided).toMatchObject({ itemId: id, stage: 'draft', decidedBy: 'alice', outcome: 'reject' });
  const [failed] = await eventually(
    async () => {
      const got = received(id, 'item_failed');
      return got.length > 0 ? got : undefined;
    },
    60_000,
    'item_failed delivered',
  );
  expect(failed).toMatchObject({ itemId: id, pipeline: PIPELINE, message: expect.stringContaining('draft') });
  expect(failed).not.toHaveProperty('link');
  // The item finished as it would have without notifications, with three announcements in its history.
  expect((await h.client.result(id)).status).toBe('failed');
  expect((await activityTypes(h, id)).filter((type) => type === 'announce')).toHaveLength(3);
}, 120_000);

it('announces nothing from a worker without a notifications file: no announce activity in history', async () => {
  const h = withoutFile;
  const id = h.id('quiet');
  await h.client.start(reviewed(), null, { id });
  const key = decisionKey(id, 'review', 'draft');
  await eventually(
    async () => (await h.client.listPendingDecisions({ pipeline: PIPELINE })).some((d) => d.key === key) || undefined,
    30_000,
    'the review in the listing',
  );
  await h.client.decide(key, { action: 'reject', reason: 'not this' }, 'alice');
  expect((await h.client.result(id)).status).toBe('failed');
  const activities = await activityTypes(h, id);
  expect(activities).toContain('scripted');
  expect(activities).not.toContain('announce');
  expect(receiver.received.filter((r) => r.body.includes(id))).toEqual([]);
}, 120_000);

it("announces an approval step's requests as one batch: one decision_owed when made, one decided when all are settled", async () => {
  const h = withFile;
  const spec = pipeline(PIPELINE)
    .stage('draft', 'scripted')
    .stage('approve', 'approval', {
      dependsOn: ['draft'],
      with: { action: 'note', items: 'notes', reviewers: 'legal' },
    });
  const notes = Array.from({ length: 5 }, (_, i) => ({ title: `note ${i}` }));
  const id = h.id('approvals');
  await h.client.start(spec, { script: { draft: [{ output: { notes } }] } }, { id });
  const pending = await eventually(
    async () => {
      const got = (await h.client.listPendingDecisions({ kinds: ['approval'] })).filter((d) => d.itemId === id);
      return got.length === notes.length ? got : undefined;
    },
    60_000,
    'the five approval requests listed',
  );
  const ofItem = (event: string) => receiver.announcements('/hooks', { itemId: id, event }).map(({ body }) => body);
  const owed = (await receiver.arrived('/hooks', { itemId: id, event: 'decision_owed' }))[0]!.body;
  expect(owed).toMatchObject({ kind: 'approval', stage: 'approve', reviewers: 'legal' });
  expect(owed.message).toMatch(/^approve: 5 approval requests owed; the first, \S+: /);
  expect(pending.map((d) => d.key)).toContain(owed.key);
  for (const d of pending)
    await h.client.decide(
      d.key,
      d === pending[0] ? { action: 'reject', reason: 'no' } : { action: 'approve' },
      'alice',
    );
  expect((await h.client.result(id)).status).toBe('completed');
  const decided = (await receiver.arrived('/hooks', { itemId: id, event: 'decided' }))[0]!.body;
  expect(decided).toMatchObject({ key: owed.key, message: 'approve: 4 approved, 1 rejected, 0 expired' });
  // One announcement each way, for five requests.
  expect([...ofItem('decision_owed'), ...ofItem('decided')]).toHaveLength(2);
}, 120_000);

it("announces a failed loop's decision and a TDD tree's human step inside an announcing item, and their answers", async () => {
  const h = withFile;
  const arrived = async (workflowId: string, event: string) =>
    (await receiver.arrived('/hooks', { workflowId, event })).map(({ body }) => body);

  // A loop whose first iteration fails: its decision is the loop workflow's own (resume or abandon).
  const loopItem = h.id('loop');
  await h.client.start(FAILING_LOOP_SPEC, FAILING_LOOP_INPUT, { id: loopItem });
  await loopFailed(h, loopItem, false);
  const loop = `${loopItem}.work.1`;
  const [owed] = await arrived(loop, 'decision_owed');
  expect(owed).toMatchObject({
    key: decisionKey(loop, 'loop', 'work'),
    kind: 'loop',
    itemId: loopItem,
    pipeline: FAILING_LOOP_SPEC.name,
    stage: 'work',
  });
  await h.client.resumeLoop(loopItem, { action: 'abandon', reason: 'not now', by: 'alice' });
  const [decided] = await arrived(loop, 'decided');
  expect(decided).toMatchObject({ key: owed!.key, decidedBy: 'alice', outcome: 'abandon' });

  // A TDD tree whose Impl is Stuck: the node's human step, then the guidance that answers it.
  const l = leaf('stuckleaf');
  const repo = await repos.create('stuckleaf');
  const replies = {
    'stuckleaf.scaffold': [l.initWork],
    'stuckleaf.tddWriteTests': [l.testsReady],
    'stuckleaf.impl': [l.stuck, l.testsPassed],
    'stuckleaf.tddReviewImpl': [l.approved],
    'stuckleaf.merger': [l.mergeComplete],
  };
  const treeItem = h.id('tdd');
  await h.client.start(
    { name: PIPELINE, stages: [{ name: 'build', run: 'tdd', with: { spec: l.spec, repo, replies } }] },
    null,
    { id: treeItem },
  );
  const tree = `${treeItem}.build.1`;
  const [stuck] = await arrived(tree, 'decision_owed');
  expect(stuck).toMatchObject({
    key: decisionKey(tree, 'tdd', 'impl'),
    kind: 'tdd',
    itemId: treeItem,
    pipeline: PIPELINE,
  });
  expect(stuck!.message).toMatch(/^impl waits for a human \(stuck\): /);
  await h.client.review(tree, 'impl', { kind: 'approve', note: 'return the constant 1' }, 'alice');
  const [answered] = await arrived(tree, 'decided');
  expect(answered).toMatchObject({ key: stuck!.key, decidedBy: 'alice', outcome: 'answer' });
  expect((await h.client.result(treeItem)).status).toBe('completed');
}, 240_000);
