/**
 * Priority and fairness THROUGH the model limiter (issue 39, "Done when"): real `treadle worker` processes with
 * one limits file share a limit on the model, the fake provider enforces the same limit and answers every call
 * after a latency, and each item is one `llm` stage whose prompt carries a marker naming the item, so the order
 * asserted is the order the calls reached the provider:
 * - with a backlog of 500 priority-3 items waiting for the limit, a priority-1 item's first call starts within
 *   5 s of the item being started;
 * - tenants A (900 items, queued first) and B (100 items, queued after them) of equal weight share the limit:
 *   B gets at least 40 % of the calls while it has work.
 * Each test starts its own dev server (as `treadle dev` does, with priority and fairness on) and its own workers,
 * and stops them at its end, so the backlog it leaves does not load the rest. The priority test keeps Temporal's 4
 * task-queue partitions; the fairness test writes to one (docs/deploy.md, "Partitions"): with 4, B's last tasks
 * are left in some partitions, which fair dispatch serves a quarter of the time, and B got 37 to 49 % run to run.
 */
import { Client, Connection } from '@temporalio/client';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { TreadleClient } from '../../src/client';
import type { StartOptions } from '../../src/client/start';
import { freePort, startDevServer, type DevServer } from '../../src/server/dev-server';
import { limiterWorkflowId } from '../../src/capacity/shapes';
import { capacityKeyId } from '../../src/capacity/worker/gates';
import { FileBlobStore } from '../../src/storage/blob-store';
import { startFakeAnthropic, type FakeAnthropic, type RecordedRequest } from '../support/fake-anthropic';
import { eventually } from '../support/harness';
import { startTreadleWorker, type TreadleWorkerProcess } from '../support/worker-process';

const MODEL = 'claude-sonnet-4-6';
/** Every reply takes this long at the provider. */
const LATENCY_MS = 50;
/** Two worker processes, as two machines: the limit holds across them. */
const WORKERS = 2;
/** Items are started this many at a time. */
const START_BATCH = 50;

const SCHEMA = { type: 'object', properties: { summary: { type: 'string' } }, required: ['summary'] };
/** One model call per item; the input's `marker` names the item in the prompt the provider sees. */
const summarize = {
  name: 'summarize-by-priority',
  stages: [
    {
      name: 'summarize',
      run: 'llm',
      agent: 'anthropic',
      with: { model: MODEL, prompt: 'Summarize [{{ input.marker }}]', output_schema: SCHEMA },
    },
  ],
};

/** A call as the provider saw it: when it arrived and the marker of its item. */
interface SeenCall {
  at: number;
  marker: string;
}

/** The marker in a request's prompt. */
function markerOf(request: RecordedRequest): string {
  const text = JSON.stringify((request.body as { messages?: unknown }).messages);
  const found = /Summarize \[([^\]]+)\]/.exec(text);
  if (!found) throw new Error(`no marker in the prompt: ${text.slice(0, 200)}`);
  return found[1]!;
}

/** A dev server, a fake provider and worker processes sharing a limit of `concurrency` calls on the model. */
interface Rig {
  client: TreadleClient;
  temporal: Client;
  fake: FakeAnthropic;
  calls: SeenCall[];
  workers: TreadleWorkerProcess[];
  queue: string;
  /** Starts items in batches; resolves once every start is accepted. */
  startAll(items: { id: string; marker: string; options?: Omit<StartOptions, 'id'> }[]): Promise<void>;
  /** Tasks waiting in the server's queue (`approximateBacklogCount`): workflow tasks (1) or activity tasks (2). */
  backlog(type: 1 | 2): Promise<number>;
  /** The worker logs, for a failure's message. */
  logs(): string;
  stop(): Promise<void>;
}

async function startRig(name: string, concurrency: number, dynamicConfig?: Record<string, unknown>): Promise<Rig> {
  // Undone in reverse on stop, or at once when the start fails half way.
  const undo: (() => Promise<void>)[] = [];
  const stop = async (): Promise<void> => {
    for (const step of undo.splice(0).reverse()) await step();
  };
  try {
    const root = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', `capacity-${name}-`));
    const server: DevServer = await startDevServer({
      port: await freePort(),
      dbFile: path.join(root, 'temporal.sqlite'),
      headless: true,
      allowDownload: false,
      ...(dynamicConfig && { dynamicConfig }),
      progress: () => undefined,
    });
    undo.push(() => server.stop());
    // What a real key enforces: the same limit, so a call past it would be answered 429 and counted.
    const fake = await startFakeAnthropic({
      limits: { [MODEL]: { maxConcurrent: concurrency } },
      latencyMs: LATENCY_MS,
    });
    undo.push(() => fake.close());
    const calls: SeenCall[] = [];
    fake.setDefault({
      kind: 'computed',
      reply: (request) => {
        calls.push({ at: Date.now(), marker: markerOf(request) });
        return { kind: 'tool', input: { summary: 'Summarized.' } };
      },
    });
    const home = path.join(root, 'home');
    mkdirSync(home);
    const limitsFile = path.join(home, 'limits.yaml');
    writeFileSync(
      limitsFile,
      ['limits:', '  - provider: anthropic', `    model: ${MODEL}`, `    concurrency: ${concurrency}`, ''].join('\n'),
    );
    const queue = `capacity-${name}`;
    // A user's shell: none of the test run's own Treadle, Temporal or Anthropic settings.
    const settings = /^(TREADLE_|TEMPORAL_|ANTHROPIC_|OTEL_|CLAUDE_)/;
    const env = {
      ...Object.fromEntries(Object.entries(process.env).filter(([key]) => !settings.test(key))),
      TEMPORAL_ADDRESS: server.address,
      TREADLE_CALL_LOG: 'off',
      TREADLE_HOME: home,
      TREADLE_TASK_QUEUE: queue,
      TREADLE_LIMITS: limitsFile,
      ANTHROPIC_API_KEY: 'test-key',
      ANTHROPIC_BASE_URL: fake.baseURL,
    };
    const workers: TreadleWorkerProcess[] = [];
    // The backlog is left unfinished: the workers go at once (machines lost), then the server with it.
    undo.push(async () => {
      for (const worker of workers) await worker.kill('SIGKILL');
    });
    for (let i = 0; i < WORKERS; i++)
      workers.push(await startTreadleWorker({ env, cwd: home, pollersOn: server.address }));
    const connection = await Connection.connect({ address: server.address });
    undo.push(() => connection.close());
    const temporal = new Client({ connection });
    const client = new TreadleClient(temporal, {
      taskQueue: queue,
      blobs: new FileBlobStore(path.join(home, 'blobs')),
    });
    return {
      client,
      temporal,
      fake,
      calls,
      workers,
      queue,
      startAll: async (items) => {
        for (let i = 0; i < items.length; i += START_BATCH)
          await Promise.all(
            items
              .slice(i, i + START_BATCH)
              .map(({ id, marker, options }) => client.start(summarize, { marker }, { ...options, id })),
          );
      },
      backlog: async (type) => {
        const answer = await connection.workflowService.describeTaskQueue({
          namespace: 'default',
          taskQueue: { name: queue },
          taskQueueType: type,
          reportStats: true,
        });
        return Number(answer.stats?.approximateBacklogCount ?? 0);
      },
      logs: () => workers.map((w) => w.log()).join('\n'),
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Resolves once the provider has seen a call for each of `markers`; rejects, with the workers' logs, after `ms`. */
async function untilCalled(rig: Rig, markers: readonly string[], ms: number): Promise<void> {
  const wanted = new Set(markers);
  await eventually(
    async () => (rig.calls.filter((c) => wanted.has(c.marker)).length >= wanted.size ? true : undefined),
    ms,
    `calls for ${wanted.size} items (seen ${rig.calls.filter((c) => wanted.has(c.marker)).length})\n${rig.logs().slice(-4_000)}`,
  );
}

describe('a priority-1 item passes a backlog waiting for the model limit', () => {
  const BACKLOG = 500;
  const CONCURRENCY = 2;
  let rig: Rig;
  beforeAll(async () => {
    rig = await startRig('priority', CONCURRENCY);
  }, 240_000);
  afterAll(async () => rig?.stop(), 60_000);

  it('its first model call starts within 5 s of the item being started', async () => {
    const backlog = Array.from({ length: BACKLOG }, (_, i) => ({
      id: `${rig.queue}-backlog-${i}`,
      marker: `backlog-${i}`,
      options: { priority: 3 },
    }));
    const started = Date.now();
    await rig.startAll(backlog);
    const startedIn = Date.now() - started;
    // The backlog is queued: every item has started (its workflow task ran and its stage's activity waits for a
    // worker's slot or for capacity) and the limit is busy.
    await eventually(
      async () => (rig.calls.length >= 20 && (await rig.backlog(1)) === 0 ? true : undefined),
      120_000,
      'every backlog item started and 20 calls made',
    );
    const queuedActivities = await rig.backlog(2);

    const urgentAt = Date.now();
    await rig.startAll([{ id: `${rig.queue}-urgent`, marker: 'urgent', options: { priority: 1 } }]);
    await untilCalled(rig, ['urgent'], 120_000);
    const urgent = rig.calls.findIndex((c) => c.marker === 'urgent');
    const waitedMs = rig.calls[urgent]!.at - urgentAt;
    const stats = rig.fake.stats();
    const figures = {
      startedIn,
      queuedActivities,
      backlogCallsBefore: urgent,
      backlogLeft: BACKLOG - urgent,
      waitedMs,
    };
    process.stderr.write(`capacity-priority: ${JSON.stringify(figures)}\n`);
    expect({ ...figures, within5s: waitedMs < 5_000 }).toEqual({ ...figures, within5s: true });
    // It passed a backlog: most of the 500 were still waiting when its call started.
    expect(BACKLOG - urgent).toBeGreaterThan(BACKLOG / 2);
    expect({ rateLimited: stats.rateLimited, inFlightAtMost: stats.maxInFlight <= CONCURRENCY }).toEqual({
      rateLimited: 0,
      inFlightAtMost: true,
    });
    // The limiter's own workflow tasks (each grant is one) go before the items': it runs at priority 1.
    const limiter = await rig.temporal.workflow
      .getHandle(limiterWorkflowId('anthropic', MODEL, capacityKeyId('test-key')))
      .describe();
    expect(limiter.priority).toMatchObject({ priorityKey: 1 });
  }, 240_000);
});

describe('two tenants of equal weight share the model limit', () => {
  const A = 900;
  const B = 100;
  const CONCURRENCY = 4;
  let rig: Rig;
  beforeAll(async () => {
    // One write partition: B's tasks are dispatched in fair order to the end (see the file's comment).
    rig = await startRig('fairness', CONCURRENCY, { 'matching.numTaskqueueWritePartitions': 1 });
  }, 240_000);
  afterAll(async () => rig?.stop(), 60_000);

  it("B, queued after A's whole backlog, gets at least 40 % of the calls while it has work", async () => {
    const tenant = (key: string, count: number) =>
      Array.from({ length: count }, (_, i) => ({
        id: `${rig.queue}-${key}-${i}`,
        marker: `${key}-${i}`,
        options: { fairnessKey: key },
      }));
    const started = Date.now();
    await rig.startAll(tenant('tenant-a', A));
    // A is backlogged: every item of it has started (its stage's activity waits for a slot or for capacity).
    await eventually(async () => ((await rig.backlog(1)) === 0 ? true : undefined), 120_000, 'every item of A started');
    const bQueuedAt = Date.now();
    await rig.startAll(tenant('tenant-b', B));
    const bStartedIn = Date.now() - bQueuedAt;
    await eventually(
      async () => (rig.calls.filter((c) => c.marker.startsWith('tenant-b-')).length >= B ? true : undefined),
      180_000,
      `B's ${B} calls (seen ${rig.calls.filter((c) => c.marker.startsWith('tenant-b-')).length})`,
    );
    const isB = (c: SeenCall) => c.marker.startsWith('tenant-b-');
    const bLast = Math.max(...rig.calls.filter(isB).map((c) => c.at));
    // While B has work: from its first start to its last call, every call the provider saw.
    const window = rig.calls.filter((c) => c.at >= bQueuedAt && c.at <= bLast);
    const bCalls = window.filter(isB).length;
    const stats = rig.fake.stats();
    const figures = {
      aStartedIn: bQueuedAt - started,
      bStartedIn,
      aLeft: A - rig.calls.filter((c) => !isB(c) && c.at <= bLast).length,
      aCallsBeforeB: rig.calls.filter((c) => c.at < bQueuedAt).length,
      windowMs: bLast - bQueuedAt,
      callsInWindow: window.length,
      bCalls,
      shareOfB: Math.round((100 * bCalls) / window.length) / 100,
    };
    process.stderr.write(`capacity-fairness: ${JSON.stringify(figures)}\n`);
    // On failure, the order the provider saw them in (B, and a for A).
    const order = window.map((c) => (isB(c) ? 'B' : 'a')).join('');
    expect({ ...figures, atLeast40: figures.shareOfB >= 0.4, order }).toEqual({ ...figures, atLeast40: true, order });
    // A was backlogged the whole time: more of it was still waiting when B's work ran out than B ever had.
    expect(A - rig.calls.filter((c) => !isB(c) && c.at <= bLast).length).toBeGreaterThan(B);
    expect({ rateLimited: stats.rateLimited, inFlightAtMost: stats.maxInFlight <= CONCURRENCY }).toEqual({
      rateLimited: 0,
      inFlightAtMost: true,
    });
  }, 300_000);
});
