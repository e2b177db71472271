/**
 * Model capacity wired into the worker (issue 39): two `treadle worker` processes with the same limits file
 * (`TREADLE_LIMITS`) share one limiter, so their anthropic calls together stay within its concurrency, the fake
 * provider answers no 429 and every item completes on its first attempt; a call waiting for capacity says so
 * in its activity's heartbeat details (`CapacityWaitDetails`), and the metrics count it by scope; a 429 reported
 * by one process pauses the scope's limiter for all; a limits file that cannot be used stops the worker with a
 * configuration error (exit 2) naming the file and line.
 */
import { Client, Connection } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { NativeConnection } from '@temporalio/worker';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { capacityWaitOf, type CapacityWait } from '../../src/capacity/waiting';
import { TreadleClient } from '../../src/client';
import { FileBlobStore } from '../../src/storage/blob-store';
import { limiterWorkflowId, type UsageSnapshot } from '../../src/capacity/shapes';
import { capacityKeyId } from '../../src/capacity/worker/gates';
import { GatedThrottle } from '../../src/worker/capacity';
import { runCli } from '../support/cli';
import { startFakeAnthropic, type FakeAnthropic } from '../support/fake-anthropic';
import { eventually, startHarness, testAddress } from '../support/harness';
import { startTreadleWorker, type TreadleWorkerProcess } from '../support/worker-process';

const MODEL = 'claude-sonnet-4-6';
const CONCURRENCY = 2;

let root: string;
/** The environment of a user's shell: none of the test run's own Treadle, Temporal or Anthropic settings. */
let env: NodeJS.ProcessEnv;

beforeAll(() => {
  root = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'capacity-wiring-'));
  const settings = /^(TREADLE_|TEMPORAL_|ANTHROPIC_|OTEL_|CLAUDE_)/;
  env = {
    ...Object.fromEntries(Object.entries(process.env).filter(([name]) => !settings.test(name))),
    TEMPORAL_ADDRESS: testAddress(),
    TREADLE_CALL_LOG: 'off',
  };
});

const SCHEMA = { type: 'object', properties: { summary: { type: 'string' } }, required: ['summary'] };
const summarize = {
  name: 'summarize-within-limits',
  stages: [
    {
      name: 'summarize',
      run: 'llm',
      agent: 'anthropic',
      with: { model: MODEL, prompt: 'Summarize: {{ input.text }}', output_schema: SCHEMA },
      activity: { retry: { initial_interval: '100ms', maximum_attempts: 4 } },
    },
  ],
};

/** A port nothing listens on now (the kernel's pick, released at once). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('two worker processes with one limits file', () => {
  let fake: FakeAnthropic;
  let home: string;
  let queue: string;
  const workers: TreadleWorkerProcess[] = [];
  let connection: Connection;
  let client: TreadleClient;
  let temporal: Client;
  let metricsAddress: string;

  beforeAll(async () => {
    // What a real key would enforce: 2 calls in flight; each reply takes 0.5 s, so 16 items wait their turn.
    fake = await startFakeAnthropic({ limits: { [MODEL]: { maxConcurrent: CONCURRENCY } }, latencyMs: 500 });
    fake.setDefault({ kind: 'tool', input: { summary: 'Within the limit.' } });
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
        '    tokens_per_minute: 1000000',
        '    lease: 20s',
        '',
      ].join('\n'),
    );
    queue = `capacity-${Math.random().toString(36).slice(2, 8)}`;
    const workerEnv = {
      ...env,
      TREADLE_HOME: home,
      TREADLE_TASK_QUEUE: queue,
      TREADLE_LIMITS: limitsFile,
      ANTHROPIC_API_KEY: 'test-key',
      ANTHROPIC_BASE_URL: fake.baseURL,
    };
    // The first serves its Prometheus metrics (the capacity metrics among the SDK's).
    metricsAddress = `127.0.0.1:${await freePort()}`;
    workers.push(
      await startTreadleWorker({ env: { ...workerEnv, TREADLE_METRICS_PROMETHEUS: metricsAddress }, cwd: home }),
    );
    workers.push(await startTreadleWorker({ env: workerEnv, cwd: home }));
    connection = await Connection.connect({ address: testAddress() });
    temporal = new Client({ connection });
    client = new TreadleClient(temporal, { taskQueue: queue, blobs: new FileBlobStore(path.join(home, 'blobs')) });
  }, 240_000);

  afterAll(async () => {
    for (const worker of workers) await worker.stop();
    // Its limiter outlives its workers: ended here, so that `treadle limits` in a later file finds none unanswered.
    const limiter = limiterWorkflowId('anthropic', MODEL, capacityKeyId('test-key'));
    await temporal?.workflow
      .getHandle(limiter)
      .terminate('test over')
      .catch(() => undefined);
    await connection?.close();
    await fake?.close();
  }, 60_000);

  it('stay within the limit together: no 429, every item done on its first attempt, waits heartbeated', async () => {
    // The start line names the scopes the calls share.
    for (const worker of workers) expect(worker.log()).toContain(`, model limits for anthropic/${MODEL}\n`);
    // 16 calls, two at a time. The fake holds the first two replies until the test has seen the others wait, so
    // the backlog lasts as long as a loaded machine needs to show it (a timed backlog raced the heartbeats).
    const release = fake.hold();
    const ids = Array.from({ length: 16 }, (_, i) => `capacity-${queue}-${i}`);
    await Promise.all(ids.map((id, i) => client.start(summarize, { text: `item ${i}` }, { id })));
    // While the backlog waits, some item's pending activity says what it waits for.
    const wait = await eventually(
      async () => {
        for (const id of ids) {
          const { raw } = await temporal.workflow.getHandle(id).describe();
          for (const pending of raw.pendingActivities ?? []) {
            const [details] = pending.heartbeatDetails?.payloads ?? [];
            const value: unknown = details ? defaultPayloadConverter.fromPayload(details) : undefined;
            const found = capacityWaitOf(value);
            // Until the limiter first answers (it starts with the first call), the wait names no limit yet.
            if (found?.waitingFor.startsWith('capacity (the limiter has not answered yet)')) continue;
            // Beside the supervision's own fields, which a retried execution resumes from.
            if (found) return { ...found, fields: Object.keys(value as object).sort() };
          }
        }
        return undefined;
      },
      // The limiter starts with the first call; on a loaded machine that alone can take a while.
      90_000,
      'a pending activity heartbeating a capacity wait',
    ).finally(release);
    expect(fake.stats().admitted).toBeLessThanOrEqual(CONCURRENCY);
    expect(wait).toEqual<CapacityWait & { fields: string[] }>({
      fields: ['calls', 'capacity'],
      scope: `anthropic/${MODEL}`,
      waitingFor: expect.stringMatching(new RegExp(`^${CONCURRENCY}/${CONCURRENCY} calls in flight`)) as string,
      since: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) as string,
    });

    const results = await Promise.all(ids.map((id) => client.result(id)));
    const logs = workers.map((w) => w.log()).join('\n');
    expect({
      statuses: results.map((r) => r.status),
      logs: results.every((r) => r.status === 'completed') ? '' : logs,
    }).toEqual({ statuses: ids.map(() => 'completed'), logs: '' });
    const stats = fake.stats();
    expect(stats.admitted).toBe(ids.length);
    expect(stats.rateLimited).toBe(0);
    expect(stats.maxInFlight).toBeLessThanOrEqual(CONCURRENCY);
    // Every item on its first attempt, and the calls ran in both processes: the limit held across them.
    const identities = new Set<string>();
    for (const id of ids) {
      const history = await temporal.workflow.getHandle(id).fetchHistory();
      const starts = history.events!.flatMap((e) => e.activityTaskStartedEventAttributes ?? []);
      expect(starts.map((started) => started.attempt)).toEqual([1]);
      for (const started of starts) identities.add(started.identity!.split('@')[0]!);
    }
    expect([...identities].sort()).toEqual(workers.map((w) => String(w.child.pid)).sort());

    // The first worker's metrics, by scope (never the key): its calls counted, none in flight or waiting now.
    const metrics = await (await fetch(`http://${metricsAddress}/metrics`)).text();
    const scope = `model="${MODEL}",provider="anthropic"`;
    const value = (name: string): number | undefined => {
      const line = metrics.split('\n').find((l) => l.startsWith(`${name}{`) && l.includes(scope));
      return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
    };
    expect({
      inFlight: value('treadle_capacity_calls_in_flight'),
      waiting: value('treadle_capacity_calls_waiting'),
      throttled: value('treadle_capacity_throttled'),
    }).toEqual({ inFlight: 0, waiting: 0, throttled: undefined });
    expect(value('treadle_capacity_tokens_granted')).toBeGreaterThan(0);
    expect(value('treadle_capacity_tokens_used')).toBeGreaterThan(0);
    expect(value('treadle_capacity_wait_latency_count')).toBeGreaterThan(0);
    expect(metrics).not.toContain('test-key');
  }, 180_000);
});

it('a limits file that cannot be used stops the worker: exit 2 naming the file and line', async () => {
  const file = path.join(root, 'bad-limits.yaml');
  writeFileSync(file, ['limits:', '  - provider: anthropic', '    model: m', '    concurrency: 0', ''].join('\n'));
  const run = await runCli(['worker'], {
    cwd: root,
    env: { ...env, TREADLE_LIMITS: file, TREADLE_HOME: path.join(root, 'bad-home') },
    timeoutMs: 60_000,
  });
  expect(run.code).toBe(2);
  expect(run.stderr).toContain(`${file} (line 4): limits.0.concurrency`);
  // As docs/configuration.md shows it: the setting, then each problem on a line of its own.
  expect(run.stderr).toContain(`treadle: TREADLE_LIMITS names a limits file that cannot be used:\n  ${file} (line 4)`);
}, 90_000);

it("a 429 one worker sees slows the scope's limiter for every worker; a model without a limit is not gated", async () => {
  const h = await startHarness();
  const connection = await NativeConnection.connect({ address: h.address });
  const limits = {
    limits: [{ provider: 'anthropic', model: MODEL, key: 'ANTHROPIC_API_KEY', concurrency: 4, leaseMs: 20_000 }],
    fairness: { weights: {}, defaultWeight: 1 },
  };
  const throttle = new GatedThrottle({ connection, namespace: 'default', taskQueue: h.taskQueue, limits });
  try {
    const scope = { provider: 'anthropic', model: MODEL, keyId: 'k' };
    // A grant first: the limiter is started by the first acquire.
    const lease = await throttle.acquire(scope, { estimate: { inputTokens: 10, outputTokens: 10 } });
    expect(lease).toBeDefined();
    lease!.release({ inputTokens: 3, outputTokens: 4 });
    throttle.reportRetryAfter(scope, 5_000);
    const workflowId = `treadle-limiter:anthropic:${MODEL}:${capacityKeyId(process.env.ANTHROPIC_API_KEY ?? 'unset:ANTHROPIC_API_KEY')}`;
    const usage = await eventually(async () => {
      const snapshot = await h.temporal.workflow.getHandle(workflowId).query<UsageSnapshot>('usage');
      return snapshot.throttle && snapshot.throttle.until > Date.now() ? snapshot : undefined;
    });
    expect(usage.throttle!.until - Date.now()).toBeLessThanOrEqual(5_000);
    await expect(
      throttle.acquire({ ...scope, model: 'claude-haiku-4-5' }, { estimate: { inputTokens: 1, outputTokens: 1 } }),
    ).resolves.toBeUndefined();
  } finally {
    await throttle.close();
    await connection.close();
    await h.shutdown();
  }
}, 60_000);
