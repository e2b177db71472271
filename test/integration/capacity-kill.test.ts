/**
 * A worker killed while it holds model capacity (issue 39, "Done when"): `treadle worker` A takes both slots of a
 * limit of 2 with slow calls and is SIGKILLed; its leases are no longer renewed, so the limiter gives the capacity
 * back once they expire — within the lease bound (plus the time Temporal takes to move the limiter off the dead
 * worker), and not before the last renewal's lease could have run out: a new item's call on worker B gets it.
 * Temporal retries the dead worker's activities after their heartbeat timeout on worker B, whose calls get the
 * capacity back; nothing is counted twice: the provider never sees more than 2 calls at once and the limiter ends
 * with none in flight.
 */
import { Client, Connection } from '@temporalio/client';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { usageQuery } from '../../src/capacity/messages';
import { limiterWorkflowId, type UsageSnapshot } from '../../src/capacity/shapes';
import { capacityKeyId } from '../../src/capacity/worker/gates';
import { TreadleClient } from '../../src/client';
import { FileBlobStore } from '../../src/storage/blob-store';
import { startFakeAnthropic, type FakeAnthropic } from '../support/fake-anthropic';
import { eventually, testAddress } from '../support/harness';
import { startTreadleWorker, type TreadleWorkerProcess } from '../support/worker-process';

const MODEL = 'claude-sonnet-4-6';
const CONCURRENCY = 2;
const LEASE_MS = 5_000;
/** The gate renews its leases every third of the lease bound (gate.ts): the last renewal is at most this old. */
const RENEW_EVERY_MS = LEASE_MS / 3;
/**
 * When the dead worker also ran the limiter (its cached run), the limiter's next workflow task waits on that
 * worker's sticky queue until Temporal's sticky schedule-to-start timeout (10 s by default) sends it to a live
 * worker; measured with a 5-s lease, capacity came back 10-15 s after the kill.
 */
const STICKY_TIMEOUT_MS = 10_000;
const RETURN_SLACK_MS = STICKY_TIMEOUT_MS + 3_000;
/**
 * Longer than the lease plus that slack (the last heartbeat may be a third of it before the kill), so the capacity
 * is back before Temporal retries the dead worker's activities and the limiter is seen with none in flight.
 */
const HEARTBEAT_TIMEOUT = '30s';
const API_KEY = 'test-key';

const SCHEMA = { type: 'object', properties: { summary: { type: 'string' } }, required: ['summary'] };
const summarize = {
  name: 'summarize-through-a-kill',
  stages: [
    {
      name: 'summarize',
      run: 'llm',
      agent: 'anthropic',
      with: { model: MODEL, prompt: 'Summarize: {{ input.text }}', output_schema: SCHEMA },
      activity: { heartbeat_timeout: HEARTBEAT_TIMEOUT, retry: { initial_interval: '100ms', maximum_attempts: 4 } },
    },
  ],
};

describe('a worker killed while it holds model capacity', () => {
  let fake: FakeAnthropic;
  let home: string;
  let queue: string;
  let workerEnv: NodeJS.ProcessEnv;
  const workers: TreadleWorkerProcess[] = [];
  let connection: Connection;
  let temporal: Client;
  let client: TreadleClient;

  beforeAll(async () => {
    const root = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'capacity-kill-'));
    const settings = /^(TREADLE_|TEMPORAL_|ANTHROPIC_|OTEL_|CLAUDE_)/;
    // The provider's own limit is the limiter's: a call the limiter counted twice would be refused with a 429.
    fake = await startFakeAnthropic({ limits: { [MODEL]: { maxConcurrent: CONCURRENCY } } });
    // The first two calls outlive the test (worker A dies in them); the retried calls answer at once.
    const slow = {
      kind: 'slow' as const,
      delayMs: 120_000,
      then: { kind: 'tool' as const, input: { summary: 'late' } },
    };
    fake.enqueue(slow, slow);
    fake.setDefault({ kind: 'tool', input: { summary: 'After the kill.' } });
    home = path.join(root, 'home');
    mkdirSync(home);
    const limitsFile = path.join(home, 'limits.yaml');
    writeFileSync(
      limitsFile,
      [
        'limits:',
        '  - provider: anthropic',
        `    model: ${MODEL}`,
        `    concurrency: ${CONCURRENCY}`,
        `    lease: ${LEASE_MS / 1_000}s`,
        '',
      ].join('\n'),
    );
    queue = `capacity-kill-${Math.random().toString(36).slice(2, 8)}`;
    workerEnv = {
      ...Object.fromEntries(Object.entries(process.env).filter(([name]) => !settings.test(name))),
      TEMPORAL_ADDRESS: testAddress(),
      TREADLE_CALL_LOG: 'off',
      TREADLE_HOME: home,
      TREADLE_TASK_QUEUE: queue,
      TREADLE_LIMITS: limitsFile,
      ANTHROPIC_API_KEY: API_KEY,
      ANTHROPIC_BASE_URL: fake.baseURL,
    };
    workers.push(await startTreadleWorker({ env: workerEnv, cwd: home }));
    connection = await Connection.connect({ address: testAddress() });
    temporal = new Client({ connection });
    client = new TreadleClient(temporal, { taskQueue: queue, blobs: new FileBlobStore(path.join(home, 'blobs')) });
  }, 180_000);

  afterAll(async () => {
    for (const worker of workers) await worker.stop();
    await connection?.close();
    await fake?.close();
  }, 60_000);

  it('gets its capacity back within the lease bound, and its calls finish through another worker', async () => {
    const [a] = workers;
    const limiter = temporal.workflow.getHandle(limiterWorkflowId('anthropic', MODEL, capacityKeyId(API_KEY)));
    const usageNow = () => limiter.query<UsageSnapshot>(usageQuery);
    const ids = [0, 1].map((i) => `kill-${queue}-${i}`);
    await Promise.all(ids.map((id, i) => client.start(summarize, { text: `item ${i}` }, { id })));

    // Worker A, alone, holds both slots with calls the provider is still answering.
    await eventually(
      async () => ((await usageNow()).inFlight === CONCURRENCY && fake.requests.length === 2 ? true : undefined),
      60_000,
      `worker A holding ${CONCURRENCY} leases`,
    );
    // Worker B is ready before A dies (its start is not part of the bound measured).
    const b = await startTreadleWorker({ env: workerEnv, cwd: home });
    workers.push(b);
    expect((await usageNow()).inFlight).toBe(CONCURRENCY);

    await a!.kill('SIGKILL');
    const killedAt = Date.now();
    // A new item's call, on B, waits for the capacity the dead worker held.
    const newcomer = `kill-${queue}-new`;
    await client.start(summarize, { text: 'after the kill' }, { id: newcomer });
    let leasesEndedMs: number | undefined;
    const grantedMs = await eventually(
      async () => {
        // The limiter's view: the dead worker's leases gone (the newcomer's call may hold one).
        if (leasesEndedMs === undefined && (await usageNow()).inFlight < CONCURRENCY)
          leasesEndedMs = Date.now() - killedAt;
        return fake.requests.length > 2 && leasesEndedMs !== undefined ? Date.now() - killedAt : undefined;
      },
      LEASE_MS + RETURN_SLACK_MS + 5_000,
      'the newcomer’s call granted the dead worker’s capacity',
    );
    // Not before the last renewal's lease could end (less a little for clocks), and within the bound plus slack.
    for (const afterMs of [leasesEndedMs!, grantedMs]) {
      expect(afterMs).toBeGreaterThanOrEqual(LEASE_MS - RENEW_EVERY_MS - 500);
      expect(afterMs).toBeLessThanOrEqual(LEASE_MS + RETURN_SLACK_MS);
    }
    expect(await client.result(newcomer)).toMatchObject({ status: 'completed' });

    // Temporal retries the dead worker's activities on B, whose calls get the capacity back.
    const results = await Promise.all(ids.map((id) => client.result(id)));
    expect({
      statuses: results.map((r) => r.status),
      logs: results.every((r) => r.status === 'completed') ? '' : b.log(),
    }).toEqual({ statuses: ids.map(() => 'completed'), logs: '' });
    for (const id of ids) {
      const history = await temporal.workflow.getHandle(id).fetchHistory();
      const starts = history.events!.flatMap((e) => e.activityTaskStartedEventAttributes ?? []);
      expect(starts.map((s) => ({ attempt: s.attempt, pid: s.identity!.split('@')[0] }))).toEqual([
        { attempt: 2, pid: String(b.child.pid) },
      ]);
    }

    // Nothing counted twice: 2 calls from A and 3 from B, never more than 2 at once, and none left in flight.
    const stats = fake.stats();
    expect({ requests: fake.requests.length, rateLimited: stats.rateLimited }).toEqual({ requests: 5, rateLimited: 0 });
    expect(stats.maxInFlight).toBeLessThanOrEqual(CONCURRENCY);
    const after = await eventually(async () => {
      const usage = await usageNow();
      return usage.inFlight === 0 && usage.waiting.length === 0 ? usage : undefined;
    });
    expect(after.concurrency).toEqual({ used: 0, limit: CONCURRENCY, configured: CONCURRENCY });
  }, 85_000);
});
