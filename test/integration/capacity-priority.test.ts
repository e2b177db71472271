/**
 * Priority and fairness THROUGH the model limiter (issue 39, "Done when"): real `treadle worker` processes with
 * one limits file share a limit on the model, the fake provider enforces the same limit and answers every call
 * after a latency, and each item is one `llm` stage whose prompt carries a marker naming the item, so the order
 * asserted is the order the calls reached the provider:
 * - with a backlog of 500 priority-3 items waiting for the limit, a priority-1 item's first call starts within
 *   5 s of the item being started;
 * - tenants A (900 items, queued first) and B (100 items, queued after them) of equal weight share the limit:
 *   B gets at least 40 % of the calls while it has work.
 * Each test starts its own dev server (as `treadle dev` does: priority and fairness on, Temporal's 4 task-queue
 * partitions) and its own workers, and stops them at its end, so the backlog it leaves does not load the rest.
 */
import { Client, Connection } from '@temporalio/client';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { TreadleClient } from '../../src/client';
import type { StartOptions } from '../../src/client/start';
import { freePort, startDevServer, type DevServer } from '../../src/server/dev-server';
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
  fake: FakeAnthropic;
  calls: SeenCall[];
  workers: TreadleWorkerProcess[];
  queue: string;
  /** Starts items in batches; resolves once every start is accepted. */
  startAll(items: { id: string; marker: string; options?: Omit<StartOptions, 'id'> }[]): Promise<void>;
  /** The worker logs, for a failure's message. */
  logs(): string;
  stop(): Promise<void>;
}

async function startRig(name: string, concurrency: number): Promise<Rig> {
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
    for (let i = 0; i < WORKERS; i++) workers.push(await startTreadleWorker({ env, cwd: home }));
    const connection = await Connection.connect({ address: server.address });
    undo.push(() => connection.close());
    const client = new TreadleClient(new Client({ connection }), {
      taskQueue: queue,
      blobs: new FileBlobStore(path.join(home, 'blobs')),
    });
    return {
      client,
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
    // The backlog is real: the limit is busy and almost all of it still waits.
    await eventually(async () => (rig.calls.length >= 20 ? true : undefined), 120_000, '20 backlog calls');

    const urgentAt = Date.now();
    await rig.startAll([{ id: `${rig.queue}-urgent`, marker: 'urgent', options: { priority: 1 } }]);
    await untilCalled(rig, ['urgent'], 120_000);
    const urgent = rig.calls.findIndex((c) => c.marker === 'urgent');
    const waitedMs = rig.calls[urgent]!.at - urgentAt;
    const stats = rig.fake.stats();
    const figures = { startedIn, backlogCallsBefore: urgent, backlogLeft: BACKLOG - urgent, waitedMs };
    process.stderr.write(`capacity-priority: ${JSON.stringify(figures)}\n`);
    expect({ ...figures, within5s: waitedMs < 5_000 }).toEqual({ ...figures, within5s: true });
    // It passed a backlog: most of the 500 were still waiting when its call started.
    expect(BACKLOG - urgent).toBeGreaterThan(BACKLOG / 2);
    expect({ rateLimited: stats.rateLimited, inFlightAtMost: stats.maxInFlight <= CONCURRENCY }).toEqual({
      rateLimited: 0,
      inFlightAtMost: true,
    });
  }, 240_000);
});
