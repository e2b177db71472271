/**
 * Notifications under faults (issue 40, docs/notifications.md), with real `treadle worker` processes sharing one
 * notifications file (`TREADLE_NOTIFY`) and task queue, against local receivers. Cases:
 * - two workers, eight items whose review is owed, goes overdue (`review_sla: 2s`) and is approved; the worker
 *   running the first delivery is SIGKILLed while that POST is in flight (the receiver holds its answer). Every
 *   item completes; every (event, key) arrives, each with one `X-Treadle-Delivery` id on all its receipts (a
 *   receiver deduping on it sees each once), as many ids as (event, key) pairs, every signature verifies.
 *   Delivery is at least once: the POST in flight at the kill is sent again, with the same id, once Temporal
 *   retries the dead worker's `deliverWebhook` (after its 15-s attempt bound); the test counts and prints the
 *   duplicates and requires that one.
 * - a receiver down for 60 s: an item whose review is answered at once completes within seconds meanwhile (its
 *   deliveries wait in the notifier, not in the item); brought back on its port, it gets them, with the notifier's
 *   default backoff (tries at about 0, 2, 6, 14, 30, 62 s after the first: the one after 60 s lands within seconds
 *   of the receiver's return, so the test needs no shorter retry policy than the product's own).
 */
import { Client, Connection, type WorkflowHandle } from '@temporalio/client';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { TreadleClient } from '../../src/client';
import { decisionKey } from '../../src/model/decisions';
import { notifierStateQuery, type NotifierState } from '../../src/notify/messages';
import { notifierWorkflowId } from '../../src/notify/shapes';
import { verifySignature } from '../../src/notify/worker/signing';
import { FileBlobStore } from '../../src/storage/blob-store';
import { eventually, testAddress } from '../support/harness';
import { WebhookReceiver, type ReceivedRequest } from '../support/webhook-receiver';
import { startTreadleWorker, type TreadleWorkerProcess } from '../support/worker-process';

// Visibility is namespace-wide and other files run in parallel: this file's own pipeline names.
const KILL_PIPELINE = 'notify-robust-kill-i40';
const LATE_PIPELINE = 'notify-robust-late-i40';
const SECRET_ENV = 'ROBUST_HOOK_SECRET';
const SECRET = 'robust-key';
const ITEMS = 8;
const EVENTS = ['decision_owed', 'overdue', 'decided'] as const;
/** How long the second receiver stays down (issue 40: "receiver down for 60 s then up"). */
const DOWN_MS = 60_000;
/** An item whose review is answered at once completes well within this, receiver down or not. */
const ITEM_BOUND_MS = 20_000;
/**
 * The default backoff's tries fall about 2, 6, 14, 30 and 62 s after the first (which comes a second or so after
 * the receiver went down), so the next try after 60 s is a few seconds after the receiver is back; margin for load.
 */
const AFTER_UP_BOUND_MS = 30_000;

const receiver = new WebhookReceiver();
const late = new WebhookReceiver();
const workers: TreadleWorkerProcess[] = [];
let queue: string;
let connection: Connection;
let temporal: Client;
let client: TreadleClient;
let notifier: WorkflowHandle;

/**
 * Listens on a port outside the kernel's ephemeral range (32768 and up here), so no outgoing connection takes it
 * while the receiver is down and `up()` can have it again.
 */
async function upOnStablePort(r: WebhookReceiver): Promise<void> {
  for (let tries = 0; ; tries++) {
    r.port = 20_000 + Math.floor(Math.random() * 12_000);
    try {
      return await r.up();
    } catch (error) {
      if (tries === 20) throw error;
    }
  }
}

beforeAll(async () => {
  const root = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'notify-robust-'));
  const home = path.join(root, 'home');
  mkdirSync(home);
  await receiver.up();
  await upOnStablePort(late);
  const file = path.join(home, 'notify.yaml');
  const hook = (name: string, url: string, pipeline: string) =>
    `  - name: ${name}\n    url: ${url}\n    secret_env: ${SECRET_ENV}\n    pipelines: [${pipeline}]\n`;
  writeFileSync(
    file,
    `webhooks:\n${hook('hooks', receiver.url('/hooks'), KILL_PIPELINE)}${hook('late', late.url('/late'), LATE_PIPELINE)}`,
  );
  queue = `notify-robust-${Math.random().toString(36).slice(2, 8)}`;
  const settings = /^(TREADLE_|TEMPORAL_|ANTHROPIC_|OTEL_|CLAUDE_)/;
  const env = {
    ...Object.fromEntries(Object.entries(process.env).filter(([name]) => !settings.test(name))),
    TEMPORAL_ADDRESS: testAddress(),
    TREADLE_CALL_LOG: 'off',
    TREADLE_HOME: home,
    TREADLE_TASK_QUEUE: queue,
    TREADLE_NOTIFY: file,
    [SECRET_ENV]: SECRET,
  };
  workers.push(...(await Promise.all([0, 1].map(() => startTreadleWorker({ env, cwd: home })))));
  connection = await Connection.connect({ address: testAddress() });
  temporal = new Client({ connection });
  client = new TreadleClient(temporal, { taskQueue: queue, blobs: new FileBlobStore(path.join(home, 'blobs')) });
  notifier = temporal.workflow.getHandle(notifierWorkflowId(queue));
}, 240_000);

afterAll(async () => {
  for (const worker of workers) await worker.stop();
  await notifier?.terminate('test over').catch(() => undefined);
  await connection?.close();
  await receiver.down();
  await late.down();
}, 60_000);

const reviewed = (name: string, sla?: string) => ({
  name,
  stages: [{ name: 'draft', run: 'scripted', review_policy: 'always', ...(sla ? { review_sla: sla } : {}) }],
});

/** A receipt with its JSON body and the headers a receiver dedupes and verifies on. */
interface Receipt {
  event: string;
  key: string;
  delivery: string;
  body: Record<string, unknown>;
  verified: boolean;
  headerEvent: string;
  at: number;
}

function receipt(r: ReceivedRequest): Receipt {
  const header = (name: string) => String(r.headers[name] ?? '');
  const body = JSON.parse(r.body) as Record<string, unknown>;
  return {
    event: String(body.event),
    key: String(body.key),
    delivery: header('x-treadle-delivery'),
    body,
    verified: verifySignature(SECRET, header('x-treadle-timestamp'), r.body, header('x-treadle-signature')),
    headerEvent: header('x-treadle-event'),
    at: r.at,
  };
}

/** Resolves once every item's state passes `test` (queries to a dead worker's items are asked again). */
const everyItem = (ids: string[], what: string, test: (s: Awaited<ReturnType<TreadleClient['getState']>>) => boolean) =>
  eventually(
    async () => ((await Promise.all(ids.map((id) => client.getState(id, {}, 5_000)))).every(test) ? true : undefined),
    90_000,
    what,
  );

/** The identity (`<pid>@<host>`) of the worker running the notifier's delivery now. */
const deliveringWorker = () =>
  eventually(
    async () => {
      const { raw } = await notifier.describe();
      const pending = (raw.pendingActivities ?? []).find((a) => a.activityType?.name === 'deliverWebhook');
      return pending?.lastWorkerIdentity || undefined;
    },
    30_000,
    'the worker delivering',
  );

/** The notifier's state once nothing waits for the webhook `name`. */
const drained = (name: string) =>
  eventually(
    async () => {
      const state = await notifier.query<NotifierState>(notifierStateQuery);
      return state.queued.some((d) => d.webhook === name) ? undefined : state;
    },
    60_000,
    `no delivery waiting for ${name}`,
  );

/** The pids of the workers that completed `workflowId`'s workflow tasks (for the report the test prints). */
async function hostsOf(workflowId: string): Promise<Set<string>> {
  const { events } = await temporal.workflow.getHandle(workflowId).fetchHistory();
  return new Set((events ?? []).flatMap((e) => e.workflowTaskCompletedEventAttributes?.identity?.split('@')[0] ?? []));
}

it('delivers each event of every decision, one delivery id each, through two workers and a SIGKILL', async () => {
  const ids = Array.from({ length: ITEMS }, (_, i) => `robust-${queue}-${i}`);
  const keyOf = (id: string) => decisionKey(id, 'review', 'draft');
  const release = receiver.hold();
  await Promise.all(ids.map((id) => client.start(reviewed(KILL_PIPELINE, '2s'), null, { id })));
  // No stage activity is in flight when a worker dies: every item waits for its review.
  await everyItem(ids, 'every item waiting for review', (s) => s.pendingReviews.length === 1);
  const [inFlight] = await eventually(async () => (receiver.received.length > 0 ? receiver.received : undefined));
  const sender = await deliveringWorker();
  const victim = workers.find((w) => sender.startsWith(`${w.child.pid}@`));
  expect(victim).toBeDefined();
  await victim!.kill('SIGKILL');
  release();
  const survivor = workers.find((w) => w !== victim)!;

  // Each review goes overdue, then is approved; the answers are not held back by the deliveries still waiting.
  await everyItem(ids, 'every review overdue', (s) => s.events.some((e) => e.type === 'ReviewOverdue'));
  await Promise.all(ids.map((id) => client.decide(keyOf(id), { action: 'approve' }, 'robust-reviewer')));
  const results = await Promise.all(ids.map((id) => client.result(id)));
  expect({
    statuses: results.map((r) => r.status),
    log: results.every((r) => r.status === 'completed') ? '' : survivor.log(),
  }).toEqual({ statuses: ids.map(() => 'completed'), log: '' });

  const expected = ids.flatMap((id) => EVENTS.map((event) => `${event} ${keyOf(id)}`)).sort();
  const pairs = () =>
    new Set(
      receiver
        .on('/hooks')
        .map((r) => receipt(r))
        .map((r) => `${r.event} ${r.key}`),
    );
  await eventually(async () => (expected.every((p) => pairs().has(p)) ? true : undefined), 90_000, 'every pair');
  const state = await drained('hooks');

  const receipts = receiver.on('/hooks').map(receipt);
  expect(receipts.filter((r) => !r.verified || r.headerEvent !== r.event || r.body.delivery !== r.delivery)).toEqual(
    [],
  );
  const idsByPair = new Map<string, Set<string>>();
  for (const r of receipts)
    idsByPair.set(`${r.event} ${r.key}`, (idsByPair.get(`${r.event} ${r.key}`) ?? new Set()).add(r.delivery));
  expect([...idsByPair.keys()].sort()).toEqual(expected);
  expect([...idsByPair.values()].filter((set) => set.size !== 1)).toEqual([]);
  const distinct = new Set(receipts.map((r) => r.delivery));
  expect(distinct.size).toBe(expected.length);
  // At least once: the POST in flight when its worker died was sent again, with the same id.
  const resent = receipts.filter((r) => r.delivery === receipt(inFlight!).delivery);
  expect(resent.length).toBeGreaterThanOrEqual(2);
  for (const r of receipts.filter((x) => x.event === 'decided'))
    expect(r.body).toMatchObject({ decidedBy: 'robust-reviewer', outcome: 'approve' });
  const victimPid = String(victim!.child.pid);
  const hosted = await Promise.all([...ids, notifier.workflowId].map(async (id) => (await hostsOf(id)).has(victimPid)));
  process.stdout.write(
    `notify-robustness: ${receipts.length} receipts, ${distinct.size} delivery ids, ` +
      `${receipts.length - distinct.size} duplicate(s) (the one in flight at the kill ${resent.length}x); ` +
      `notifier: ${state.delivered} delivered, ${state.duplicates} announcement(s) deduplicated; the killed worker ` +
      `had run ${hosted.slice(0, -1).filter(Boolean).length} of ${ITEMS} items, and the notifier: ${hosted.at(-1)}\n`,
  );
}, 200_000);

it('keeps an item on time while its receiver is down for 60 s, and delivers once it is back', async () => {
  await late.down();
  const downAt = Date.now();
  const id = `late-${queue}`;
  const key = decisionKey(id, 'review', 'draft');
  await client.start(reviewed(LATE_PIPELINE), null, { id });
  await everyItem([id], 'the review owed', (s) => s.pendingReviews.length === 1);
  await client.decide(key, { action: 'approve' }, 'robust-reviewer');
  expect((await client.result(id)).status).toBe('completed');
  const tookMs = Date.now() - downAt;
  expect(tookMs).toBeLessThan(ITEM_BOUND_MS);
  // Its deliveries wait in the notifier, oldest first, while the receiver refuses connections.
  const waiting = await eventually(
    async () => {
      const state = await notifier.query<NotifierState>(notifierStateQuery);
      const mine = state.queued.filter((d) => d.webhook === 'late' && d.announcement.key === key);
      return mine.length === 2 ? mine : undefined;
    },
    30_000,
    'both deliveries waiting',
  );
  expect(waiting.map((d) => d.announcement.event)).toEqual(['decision_owed', 'decided']);

  // The receiver stays down for DOWN_MS in all: the outage itself, not a wait for a condition.
  await new Promise((resolve) => setTimeout(resolve, downAt + DOWN_MS - Date.now()));
  const { raw } = await notifier.describe();
  const trying = (raw.pendingActivities ?? []).find((a) => a.activityType?.name === 'deliverWebhook');
  await late.up();
  const upAt = Date.now();
  const got = await eventually(
    async () => (late.on('/late').length >= 2 ? late.on('/late').map(receipt) : undefined),
    AFTER_UP_BOUND_MS + 30_000,
    'both deliveries after the receiver came back',
  );
  expect(got.map((r) => [r.event, r.key, r.verified])).toEqual([
    ['decision_owed', key, true],
    ['decided', key, true],
  ]);
  expect(new Set(got.map((r) => r.delivery)).size).toBe(2);
  expect(got[0]!.at - upAt).toBeLessThanOrEqual(AFTER_UP_BOUND_MS);
  await drained('late');
  process.stdout.write(
    `notify-robustness: item done ${tookMs} ms after the receiver went down; ${trying?.attempt ?? '?'} tries in ` +
      `${DOWN_MS / 1000} s down; delivered ${got[0]!.at - upAt} ms and ${got[1]!.at - upAt} ms after it came back\n`,
  );
}, 150_000);
