/**
 * Deadlines for decisions a person owes (issue 40, `review_sla:` with `on_breach:`), end to end with a worker that
 * has a notifications file and a local receiver: a review past its 2-s deadline is handed to the escalation group
 * and announced `overdue` within 10 s of the deadline; listings, `treadle decisions --overdue` and the item's status
 * say so; it keeps waiting and is answered as before. A human stage's request with `on_breach: notify` is announced
 * overdue and keeps its group. A review answered in time is never overdue. A stage asked again (a new round) is
 * announced again.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from '../../src/kinds/builder';
import { decisionKey, isOverdue, type PendingDecision } from '../../src/model/decisions';
import { notifierWorkflowId } from '../../src/notify/shapes';
import { runTreadle, showRun } from '../support/cli';
import { eventually, startHarness, type Harness } from '../support/harness';
import { noteActions } from '../support/pipelines';
import { WebhookReceiver } from '../support/webhook-receiver';

const receiver = new WebhookReceiver();
const dir = mkdtempSync(path.join(os.tmpdir(), 'review-deadlines-'));
// Visibility is namespace-wide and other files run in parallel: this file's own pipeline names.
const PIPELINE = 'review-deadlines-i40';
let h: Harness;

beforeAll(async () => {
  await receiver.up();
  const file = path.join(dir, 'notify.yaml');
  writeFileSync(
    file,
    `webhooks:\n  - name: hooks\n    url: ${receiver.url('/hooks')}\n    secret_env: SLA_HOOK_SECRET\n`,
  );
  Object.assign(process.env, { SLA_HOOK_SECRET: 'sla-key', TREADLE_NOTIFY: file });
  // The worker reads TREADLE_NOTIFY when it is created.
  h = await startHarness({ approvalActions: noteActions });
  delete process.env.TREADLE_NOTIFY;
});

afterAll(async () => {
  await h?.temporal.workflow
    .getHandle(notifierWorkflowId(h.taskQueue))
    .terminate('test over')
    .catch(() => undefined);
  await h?.shutdown();
  await receiver.down();
  delete process.env.SLA_HOOK_SECRET;
});

/** The announcements of `event` for `key` the receiver got, with the time each arrived. */
const received = (key: string, event: string) => receiver.announcements('/hooks', { key, event });
const arrived = (key: string, event: string, count = 1) => receiver.arrived('/hooks', { key, event }, count);

const listed = (key: string, test: (d: PendingDecision) => boolean = () => true) =>
  eventually(
    async () => (await h.client.listPendingDecisions({ pipeline: PIPELINE })).find((d) => d.key === key && test(d)),
    30_000,
    `${key} listed`,
  );

it('a review past its deadline is handed to the escalation group and announced overdue within 10 s', async () => {
  const spec = pipeline(PIPELINE)
    .stage('draft', 'scripted')
    .reviewPolicy('draft', 'always')
    .reviewers('draft', 'legal')
    .reviewSla('draft', '2s', { escalateTo: 'leads' });
  const id = h.id('escalated');
  await h.client.start(spec, null, { id });
  const key = decisionKey(id, 'review', 'draft');
  await arrived(key, 'decision_owed');
  const before = await listed(key);
  expect(before.reviewers).toBe('legal');
  const due = Date.parse(before.dueAt!);
  expect(due - Date.parse(before.requestedAt)).toBe(2_000);

  const [overdue] = await arrived(key, 'overdue');
  expect(overdue!.at - due).toBeLessThanOrEqual(10_000);
  expect(overdue!.body).toMatchObject({
    itemId: id,
    stage: 'draft',
    kind: 'review',
    reviewers: 'leads',
    message: "draft's review is overdue: no decision within 2s; handed to leads",
  });
  // Re-routed in the listing: the escalation group's now, overdue, and where it came from.
  const after = await listed(key, (d) => d.reviewers === 'leads');
  expect(after).toMatchObject({ dueAt: before.dueAt, escalated: { to: 'leads', from: 'legal' } });
  expect(isOverdue(after, Date.now())).toBe(true);
  const cli = await runTreadle(h, ['decisions', '--overdue', '--pipeline', PIPELINE]);
  expect({ code: cli.code, out: cli.stdout }).toEqual({
    code: 0,
    out: expect.stringMatching(new RegExp(`${id}\\s+draft\\s+always\\s+\\d+s overdue\\s+.*handed to leads`)) as string,
  });
  const status = await runTreadle(h, ['status', id]);
  expect(status.stdout).toMatch(/overdue since \S+, handed to leads from legal/);
  const state = await h.client.getState(id);
  expect(state.events.filter((e) => e.type === 'ReviewOverdue')).toHaveLength(1);

  // It still waits, and is answered as before.
  await h.client.decide(key, { action: 'approve' }, 'lee');
  expect((await h.client.result(id)).status).toBe('completed');
  const [decided] = await arrived(key, 'decided');
  expect(decided!.body).toMatchObject({ decidedBy: 'lee', outcome: 'approve', reviewers: 'leads' });
  expect(showRun(cli)).not.toContain('error');
}, 120_000);

it("a human stage's request past its deadline is announced overdue and keeps its group (on_breach: notify)", async () => {
  const spec = {
    name: PIPELINE,
    review_sla: '2s',
    stages: [
      {
        name: 'sign_off',
        run: 'human',
        output_schema: { type: 'object', required: ['ok'], properties: { ok: { type: 'boolean' } } },
        with: { instructions: 'Sign it off', reviewers: 'legal' },
      },
    ],
  };
  const id = h.id('human');
  await h.client.start(spec, null, { id });
  const key = decisionKey(id, 'human', 'sign_off');
  await arrived(key, 'decision_owed');
  const [overdue] = await arrived(key, 'overdue');
  expect(overdue!.body).toMatchObject({ kind: 'human', reviewers: 'legal' });
  expect(overdue!.body.message).toBe("sign_off's request for a person's output is overdue: no decision within 2s");
  const row = await listed(key);
  expect(row).toMatchObject({ reviewers: 'legal', dueAt: expect.any(String) as string });
  expect(row.escalated).toBeUndefined();
  expect(isOverdue(row, Date.now())).toBe(true);
  await h.client.respond(id, 'sign_off', { ok: true }, { reviewer: 'lee' });
  expect((await h.client.result(id)).status).toBe('completed');
  await arrived(key, 'decided');
}, 120_000);

it('a review answered before its deadline is never overdue; a stage asked again is announced again', async () => {
  const spec = pipeline(PIPELINE)
    .stage('draft', 'scripted')
    .retryBudget('draft', { maxAttempts: 1 })
    .reviewPolicy('draft', 'always')
    .reviewSla('draft', '1h');
  const id = h.id('in-time');
  await h.client.start(spec, null, { id });
  const key = decisionKey(id, 'review', 'draft');
  await arrived(key, 'decision_owed');
  const row = await listed(key);
  expect(isOverdue(row, Date.now())).toBe(false);
  const notOverdue = await runTreadle(h, ['decisions', '--overdue', '--pipeline', PIPELINE]);
  expect(notOverdue.stdout).not.toContain(id);
  // Changes requested: attempt 2 runs, and the stage asks again: a new round, announced again.
  await h.client.requestChanges(id, 'draft', 'shorter, please', { reviewer: 'lee' });
  await arrived(key, 'decision_owed', 2);
  await h.client.decide(key, { action: 'approve' }, 'lee');
  expect((await h.client.result(id)).status).toBe('completed');
  expect((await h.client.getState(id)).events.some((e) => e.type === 'ReviewOverdue')).toBe(false);
  expect(received(key, 'overdue')).toEqual([]);
  const rounds = received(key, 'decision_owed').map(({ body }) => body.requestedAt);
  expect(new Set(rounds).size).toBe(2);
}, 120_000);

it("an approval step's requests past their deadline are handed over together and the batch is announced overdue once", async () => {
  const spec = {
    name: PIPELINE,
    stages: [
      { name: 'draft', run: 'scripted' },
      {
        name: 'approve',
        run: 'approval',
        depends_on: ['draft'],
        with: { action: 'note', items: 'notes', reviewers: 'legal' },
        review_sla: '2s',
        on_breach: { escalate_to: 'leads' },
      },
    ],
  };
  const notes = [{ title: 'one' }, { title: 'two' }, { title: 'three' }];
  const id = h.id('approvals');
  await h.client.start(spec, { script: { draft: [{ output: { notes } }] } }, { id });
  const ofItem = (event: string) => receiver.announcements('/hooks', { itemId: id, event });
  const owed = (await receiver.arrived('/hooks', { itemId: id, event: 'decision_owed' }))[0]!.body;
  const [overdue] = await arrived(owed.key as string, 'overdue');
  expect(overdue!.body).toMatchObject({ kind: 'approval', reviewers: 'leads' });
  expect(overdue!.body.message).toMatch(/^approval \S+ is overdue: no decision within 2s; handed to leads$/);
  // Every request handed over, each overdue in the listing; one announcement for the batch.
  const rows = await eventually(
    async () => {
      const listed = (await h.client.listPendingDecisions({ kinds: ['approval'] })).filter((d) => d.itemId === id);
      return listed.length === notes.length && listed.every((d) => d.reviewers === 'leads') ? listed : undefined;
    },
    30_000,
    'the requests handed to leads',
  );
  for (const row of rows) {
    expect(isOverdue(row, Date.now())).toBe(true);
    expect(row.approval?.escalated).toBe(true);
  }
  const state = await h.client.getState(id);
  expect(state.events.filter((e) => e.type === 'ReviewOverdue')).toHaveLength(notes.length);
  for (const row of rows) await h.client.decide(row.key, { action: 'approve' }, 'lee');
  expect((await h.client.result(id)).status).toBe('completed');
  expect(ofItem('overdue')).toHaveLength(1);
}, 120_000);
