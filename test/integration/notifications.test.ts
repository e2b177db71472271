/**
 * Webhooks (docs/notifications.md) against a local receiver, through the real `announce` activity, the notifier
 * workflow and the worker's `deliverWebhook`. Cases:
 * - a decision owed reaches each webhook once, signed (verifySignature accepts it), with a stable delivery id,
 *   the inbox link, and the Slack-compatible body for `format: slack`;
 * - the same (decision key, event) announced again is delivered once; another event of it is delivered;
 * - a receiver that is down, then answers 503, then comes back gets the delivery (retried with backoff), and the
 *   announcement returned at once meanwhile;
 * - `treadle notify test`: 2xx exits 0, a refusing receiver exits 1, an unknown webhook or a bad file exits 2;
 *   `treadle worker` refuses a bad file with exit 2.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { notifierStateQuery, type NotifierInput, type NotifierState } from '../../src/notify/messages';
import { notifierWorkflowId, type Announcement } from '../../src/notify/shapes';
import { createNotifyActivities } from '../../src/notify/worker/activities';
import { deliveryIdOf } from '../../src/notify/worker/delivery';
import { notificationsFromEnv } from '../../src/notify/worker/settings-file';
import { verifySignature } from '../../src/notify/worker/signing';
import { runCli, showRun } from '../support/cli';
import { eventually, startHarness, type Harness } from '../support/harness';
import { WebhookReceiver } from '../support/webhook-receiver';

const receiver = new WebhookReceiver();
const dir = mkdtempSync(path.join(os.tmpdir(), 'notify-'));
const secrets = { HOOK_SECRET: 'hook-key-1', CHAT_SECRET: 'chat-key-2' };
let h: Harness;
let announce: ReturnType<typeof createNotifyActivities>['announce'];
let file: string;

const notifyFile = () => `webhooks:
  - name: hooks
    url: ${receiver.url('/hooks')}
    secret_env: HOOK_SECRET
  - name: chat
    url: ${receiver.url('/chat')}
    secret_env: CHAT_SECRET
    events: [decision_owed]
    format: slack
`;

beforeAll(async () => {
  await receiver.up();
  file = path.join(dir, 'notify.yaml');
  writeFileSync(file, notifyFile());
  Object.assign(process.env, secrets, { TREADLE_NOTIFY: file, TREADLE_UI_URL: 'https://inbox.example.com' });
  h = await startHarness();
  // Started before any announcement with a short backoff, so the down-then-up case takes seconds, not minutes.
  const input: NotifierInput = { retry: { initialIntervalMs: 300, maximumIntervalMs: 1_000 } };
  await h.temporal.workflow.start('treadleNotifier', {
    workflowId: notifierWorkflowId(h.taskQueue),
    taskQueue: h.taskQueue,
    args: [input],
  });
  ({ announce } = createNotifyActivities({
    notifications: notificationsFromEnv(),
    taskQueue: h.taskQueue,
    client: () => h.temporal,
  }));
});

afterAll(async () => {
  await h?.temporal.workflow
    .getHandle(notifierWorkflowId(h.taskQueue))
    .terminate('test over')
    .catch(() => undefined);
  await h?.shutdown();
  await receiver.down();
  for (const name of [...Object.keys(secrets), 'TREADLE_NOTIFY', 'TREADLE_UI_URL']) delete process.env[name];
});

const owed = (id: string, more: Partial<Announcement> = {}): Announcement => ({
  event: 'decision_owed',
  key: `${id}~review~draft`,
  occurredAt: new Date().toISOString(),
  itemId: id,
  workflowId: id,
  pipeline: 'documents',
  stage: 'draft',
  kind: 'review',
  message: 'escalated after 3 attempts',
  ...more,
});

const state = (): Promise<NotifierState> =>
  h.temporal.workflow.getHandle(notifierWorkflowId(h.taskQueue)).query(notifierStateQuery);
const bodiesOn = (hook: string, key: string) =>
  receiver.on(hook).filter((r) => r.body.includes(JSON.stringify(key).slice(1, -1)));

it('delivers a decision owed to each webhook once, signed, with its delivery id and the inbox link', async () => {
  const a = owed(h.id('owed'));
  expect(await announce(a)).toEqual({ webhooks: ['hooks', 'chat'] });
  await eventually(async () => (bodiesOn('/hooks', a.key).length && bodiesOn('/chat', a.key).length) || undefined);
  const [json] = bodiesOn('/hooks', a.key);
  expect(
    verifySignature(
      secrets.HOOK_SECRET,
      String(json!.headers['x-treadle-timestamp']),
      json!.body,
      String(json!.headers['x-treadle-signature']),
    ),
  ).toBe(true);
  expect(
    verifySignature(
      secrets.CHAT_SECRET,
      String(json!.headers['x-treadle-timestamp']),
      json!.body,
      String(json!.headers['x-treadle-signature']),
    ),
  ).toBe(false);
  expect(json!.headers['x-treadle-delivery']).toBe(deliveryIdOf(a, 'hooks'));
  expect(JSON.parse(json!.body)).toEqual({
    ...a,
    delivery: deliveryIdOf(a, 'hooks'),
    webhook: 'hooks',
    link: `https://inbox.example.com/d/${encodeURIComponent(a.key)}`,
  });
  const [slack] = bodiesOn('/chat', a.key);
  expect(
    verifySignature(
      secrets.CHAT_SECRET,
      String(slack!.headers['x-treadle-timestamp']),
      slack!.body,
      String(slack!.headers['x-treadle-signature']),
    ),
  ).toBe(true);
  expect(JSON.parse(slack!.body)).toEqual({
    text: expect.stringMatching(/^Decision owed: /),
    blocks: expect.any(Array),
  });
  // `chat` takes only decision_owed: a decision made goes to `hooks` alone.
  expect(await announce({ ...a, event: 'decided', decidedBy: 'ana', outcome: 'approve' })).toEqual({
    webhooks: ['hooks'],
  });
});

it('delivers each event of a decision once, however often it is announced', async () => {
  const a = owed(h.id('dedup'));
  const before = (await state()).duplicates;
  await announce(a);
  await announce({ ...a, occurredAt: new Date().toISOString() });
  await announce({ ...a, event: 'overdue' });
  await eventually(async () => (bodiesOn('/hooks', a.key).length >= 2 ? true : undefined));
  await eventually(async () => ((await state()).queued.length === 0 ? true : undefined));
  expect((await state()).duplicates).toBe(before + 1);
  const events = bodiesOn('/hooks', a.key).map((r) => (JSON.parse(r.body) as Announcement).event);
  expect(events.sort()).toEqual(['decision_owed', 'overdue']);
  expect(bodiesOn('/chat', a.key)).toHaveLength(1);
});

it('retries a receiver that is down, then refusing, until it takes the delivery; the announcement does not wait', async () => {
  const a = owed(h.id('down'), { event: 'item_failed', key: h.id('down'), message: 'stage draft failed' });
  await receiver.down();
  const started = Date.now();
  expect(await announce(a)).toEqual({ webhooks: ['hooks'] });
  expect(Date.now() - started).toBeLessThan(5_000);
  // Refused while down: it waits in the notifier's queue, retried.
  await eventually(async () => ((await state()).delivering.includes('hooks') ? true : undefined));
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  receiver.status = 503;
  await receiver.up();
  await eventually(async () => (bodiesOn('/hooks', a.key).length >= 1 ? true : undefined));
  expect((await state()).queued.some((d) => d.announcement.key === a.key)).toBe(true);
  receiver.status = 200;
  await eventually(async () => ((await state()).queued.some((d) => d.announcement.key === a.key) ? undefined : true));
  const deliveries = bodiesOn('/hooks', a.key);
  expect(deliveries.length).toBeGreaterThanOrEqual(2);
  // Every attempt carries the same delivery id; no link for a failed item.
  expect(new Set(deliveries.map((r) => r.headers['x-treadle-delivery']))).toEqual(new Set([deliveryIdOf(a, 'hooks')]));
  expect(JSON.parse(deliveries.at(-1)!.body)).not.toHaveProperty('link');
}, 60_000);

describe('treadle notify test', () => {
  const env = () => ({ ...process.env, ...secrets, TREADLE_NOTIFY: file });

  it("posts a signed sample to each webhook and prints the receiver's answer", async () => {
    receiver.status = 200;
    const count = receiver.received.length;
    const run = await runCli(['notify', 'test'], { env: env(), timeoutMs: 30_000 });
    expect({ code: run.code, stdout: run.stdout }).toEqual({
      code: 0,
      stdout: `hooks: 200 OK (${receiver.url('/hooks')})\nchat: 200 OK (${receiver.url('/chat')})\n`,
    });
    const sent = receiver.received.slice(count);
    expect(sent.map((r) => r.path)).toEqual(['/hooks', '/chat']);
    const [sample] = sent;
    expect(
      verifySignature(
        secrets.HOOK_SECRET,
        String(sample!.headers['x-treadle-timestamp']),
        sample!.body,
        String(sample!.headers['x-treadle-signature']),
      ),
    ).toBe(true);
  });

  it('exits 1 when a receiver refuses, 2 for an unknown webhook or a bad file', async () => {
    receiver.status = 500;
    const refused = await runCli(['notify', 'test', '--webhook', 'chat'], { env: env(), timeoutMs: 30_000 });
    receiver.status = 200;
    expect({ code: refused.code, stdout: refused.stdout }).toEqual({
      code: 1,
      stdout: `chat: 500 Internal Server Error: not now (${receiver.url('/chat')})\n`,
    });
    const unknown = await runCli(['notify', 'test', '--webhook', 'leads'], { env: env(), timeoutMs: 30_000 });
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toBe(`treadle: no webhook "leads" in ${file} (its webhooks: hooks, chat)\n`);
    const bad = path.join(dir, 'bad.yaml');
    writeFileSync(bad, 'webhooks:\n  - name: x\n    url: nowhere\n    secret_env: HOOK_SECRET\n');
    const badRun = await runCli(['notify', 'test'], { env: { ...env(), TREADLE_NOTIFY: bad }, timeoutMs: 30_000 });
    expect(badRun.code).toBe(2);
    expect(badRun.stderr).toContain(`${bad} (line 3): webhooks.0.url: must be an http(s) address`);
    const unset = await runCli(['notify', 'test'], { env: { ...env(), TREADLE_NOTIFY: '' }, timeoutMs: 30_000 });
    expect({ code: unset.code, stderr: unset.stderr }).toEqual({
      code: 2,
      stderr: expect.stringMatching(/TREADLE_NOTIFY is not set/),
    });
    expect(showRun(unset)).toContain('exit 2');
  });

  it('treadle worker refuses a bad notifications file with exit 2, listing each problem with its line', async () => {
    const bad = path.join(dir, 'worker-bad.yaml');
    writeFileSync(bad, 'webhooks:\n  - name: x\n    url: https://x.example\n    secret_env: UNSET_SECRET_X\n');
    const run = await runCli(['worker'], {
      env: { ...env(), TREADLE_NOTIFY: bad, TEMPORAL_ADDRESS: h.address },
      timeoutMs: 30_000,
    });
    expect({ code: run.code, stderr: run.stderr }).toEqual({
      code: 2,
      stderr: expect.stringContaining(
        `TREADLE_NOTIFY names a notifications file that cannot be used:\n  ${bad} (line 4): webhooks.0.secret_env: UNSET_SECRET_X is not set`,
      ),
    });
  });
});
