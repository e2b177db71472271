/**
 * Records an engine-8 work item that announces (issue 40, docs/notifications.md) for the replay test: a worker
 * with a notifications file, so the prepare step records `notifies`; the item's stage waits for review
 * (`decision_owed` announced), the review rejects it (`decided`), and the item fails (`item_failed`).
 * `item-announces`: the item's history, with its three `announce` activities.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { temporal } from '@temporalio/proto';
import { pipeline } from '../../src/kinds/builder';
import { decisionKey } from '../../src/model/decisions';
import { notifierWorkflowId } from '../../src/notify/shapes';
import { eventually, startHarness, type Harness } from './harness';
import { WebhookReceiver } from './webhook-receiver';

/** The replay test replays each history under its file's name as the workflow id. */
const ID = 'item-announces';

export async function recordItemAnnouncements(
  _shared: Harness,
): Promise<Record<string, temporal.api.history.v1.IHistory>> {
  return withAnnouncingWorker(async (h, receiver) => {
    const spec = pipeline('replay-announces').stage('draft', 'scripted').reviewPolicy('draft', 'always');
    await h.client.start(spec, null, { id: ID });
    const key = decisionKey(ID, 'review', 'draft');
    await eventually(async () => (receiver.on('/hooks').some((r) => r.body.includes(key)) ? true : undefined));
    await h.client.decide(key, { action: 'reject', reason: 'recorded' }, 'recorder');
    await h.client.result(ID).catch(() => undefined);
    return { [ID]: await h.temporal.workflow.getHandle(ID).fetchHistory() };
  });
}

/**
 * Records decisions past their deadline (`review_sla`, issue 40) on an announcing engine-8 worker:
 * `review-deadline`, a review handed to its escalation group when overdue, then approved; `human-deadline`, a human
 * stage's request announced overdue (`on_breach: notify`), then answered.
 */
export async function recordReviewDeadlines(
  _shared: Harness,
): Promise<Record<string, temporal.api.history.v1.IHistory>> {
  return withAnnouncingWorker(async (h, receiver) => {
    const overdue = (key: string) =>
      eventually(async () =>
        receiver.on('/hooks').some((r) => r.body.includes(key) && r.body.includes('"overdue"')) ? true : undefined,
      );
    const review = 'review-deadline';
    const spec = pipeline('replay-deadlines')
      .stage('draft', 'scripted')
      .reviewPolicy('draft', 'always')
      .reviewers('draft', 'legal')
      .reviewSla('draft', '1s', { escalateTo: 'leads' });
    await h.client.start(spec, null, { id: review });
    await overdue(decisionKey(review, 'review', 'draft'));
    await h.client.decide(decisionKey(review, 'review', 'draft'), { action: 'approve' }, 'recorder');
    await h.client.result(review);

    const human = 'human-deadline';
    const humanSpec = {
      name: 'replay-deadlines',
      review_sla: '1s',
      stages: [{ name: 'sign_off', run: 'human', output_schema: { type: 'object' }, with: { reviewers: 'legal' } }],
    };
    await h.client.start(humanSpec, null, { id: human });
    await overdue(decisionKey(human, 'human', 'sign_off'));
    await h.client.respond(human, 'sign_off', { ok: true }, { reviewer: 'recorder' });
    await h.client.result(human);
    const history = (id: string) => h.temporal.workflow.getHandle(id).fetchHistory();
    return { [review]: await history(review), [human]: await history(human) };
  });
}

/** Runs `record` on a harness of its own whose worker has a notifications file pointing at a local receiver. */
async function withAnnouncingWorker<T>(record: (h: Harness, receiver: WebhookReceiver) => Promise<T>): Promise<T> {
  const receiver = new WebhookReceiver();
  await receiver.up();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'item-announce-recording-'));
  const file = path.join(dir, 'notify.yaml');
  writeFileSync(file, `webhooks:\n  - { name: hooks, url: "${receiver.url('/hooks')}", secret_env: RECORD_SECRET }\n`);
  // The worker reads the notifications file when it is made: a harness of its own, with the file.
  Object.assign(process.env, { TREADLE_NOTIFY: file, RECORD_SECRET: 'recording' });
  const h = await startHarness();
  delete process.env.TREADLE_NOTIFY;
  try {
    return await record(h, receiver);
  } finally {
    await h.temporal.workflow
      .getHandle(notifierWorkflowId(h.taskQueue))
      .terminate('recorded')
      .catch(() => undefined);
    await h.shutdown();
    await receiver.down();
    delete process.env.RECORD_SECRET;
  }
}
