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
    const spec = pipeline('replay-announces').stage('draft', 'scripted').reviewPolicy('draft', 'always');
    await h.client.start(spec, null, { id: ID });
    const key = decisionKey(ID, 'review', 'draft');
    await eventually(async () => (receiver.on('/hooks').some((r) => r.body.includes(key)) ? true : undefined));
    await h.client.decide(key, { action: 'reject', reason: 'recorded' }, 'recorder');
    await h.client.result(ID).catch(() => undefined);
    return { [ID]: await h.temporal.workflow.getHandle(ID).fetchHistory() };
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
