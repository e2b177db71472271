/**
 * Drives a notifier workflow (`treadleNotifier`, src/notify/workflow.ts) through what its history can hold and
 * returns its two runs for the replay test (issue 40):
 * - `notifier`: announcements for two webhooks delivered in their own lanes, one announced twice (dropped as a
 *   duplicate), a receiver that refuses before it takes a delivery (retried), a malformed signal ignored, and
 *   continue-as-new with a delivery still queued;
 * - `notifier.2`: the run it continued as, starting from the carried queue and recent keys.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { temporal } from '@temporalio/proto';
import { notifierStateQuery, notifySignal, type NotifierInput } from '../../src/notify/messages';
import type { NotifierAnnouncement } from '../../src/notify/shapes';
import { eventually, startHarness, type Harness } from './harness';
import { WebhookReceiver } from './webhook-receiver';

/** The replay test replays each history under its file's name as the workflow id. */
const ID = 'notifier';

export async function recordNotifier(_shared: Harness): Promise<Record<string, temporal.api.history.v1.IHistory>> {
  const receiver = new WebhookReceiver();
  await receiver.up();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'notifier-recording-'));
  const file = path.join(dir, 'notify.yaml');
  writeFileSync(
    file,
    `webhooks:\n  - { name: hooks, url: "${receiver.url('/hooks')}", secret_env: RECORD_SECRET }\n` +
      `  - { name: chat, url: "${receiver.url('/chat')}", secret_env: RECORD_SECRET, format: slack }\n`,
  );
  // The worker reads the notifications file when it is made: a harness of its own, with the file.
  Object.assign(process.env, { TREADLE_NOTIFY: file, RECORD_SECRET: 'recording' });
  const h = await startHarness();
  delete process.env.TREADLE_NOTIFY;
  try {
    const input: NotifierInput = { retry: { initialIntervalMs: 200, maximumIntervalMs: 500 }, maxHistoryEvents: 80 };
    const handle = await h.temporal.workflow.start('treadleNotifier', {
      workflowId: ID,
      taskQueue: h.taskQueue,
      args: [input],
    });
    const announce = (n: number, more: Partial<NotifierAnnouncement> = {}) =>
      handle.signal(notifySignal, {
        event: 'decision_owed',
        key: `item-${n}~review~draft`,
        occurredAt: '2026-12-06T21:00:00.000Z',
        itemId: `item-${n}`,
        workflowId: `item-${n}`,
        pipeline: 'documents',
        stage: 'draft',
        kind: 'review',
        message: `item ${n} waits for a review`,
        webhooks: ['hooks', 'chat'],
        ...more,
      });
    const idle = () =>
      eventually(async () => ((await handle.query(notifierStateQuery)).queued.length === 0 ? true : undefined));
    await announce(1);
    await announce(1);
    await idle();
    // Refused twice (503), then taken.
    receiver.status = 503;
    await announce(2, { webhooks: ['hooks'] });
    await eventually(async () => (receiver.on('/hooks').length >= 3 ? true : undefined));
    receiver.status = 200;
    await idle();
    await handle.signal(notifySignal, { event: 'nope' } as unknown as NotifierAnnouncement);
    await announce(3, { event: 'decided', decidedBy: 'ana', outcome: 'approve', webhooks: ['hooks'] });
    await idle();
    const firstRun = handle.firstExecutionRunId;
    // Announcements until the run continues as new; the last ones are carried to the next run.
    let secondRun = firstRun;
    for (let n = 4; n < 40 && secondRun === firstRun; n++) {
      await announce(n);
      secondRun = (await h.temporal.workflow.getHandle(ID).describe()).runId;
    }
    if (secondRun === firstRun) throw new Error('recording the notifier: it did not continue as new');
    await announce(100);
    await announce(100);
    await eventually(async () =>
      (await h.temporal.workflow.getHandle(ID).query(notifierStateQuery)).queued.length === 0 ? true : undefined,
    );
    const histories = {
      [ID]: await h.temporal.workflow.getHandle(ID, firstRun).fetchHistory(),
      [`${ID}.2`]: await h.temporal.workflow.getHandle(ID, secondRun).fetchHistory(),
    };
    await h.temporal.workflow.getHandle(ID).terminate('recorded');
    return histories;
  } finally {
    await h.shutdown();
    await receiver.down();
    delete process.env.RECORD_SECRET;
  }
}
