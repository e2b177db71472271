/**
 * A worker killed (SIGKILL, a separate process) in the middle of a stage. Cases: another worker process
 * finishes the item; the side effect guarded by the idempotency key (`<workflow id>/<stage>/<attempt>`)
 * happened once per attempt, the retried execution finding it already done; the attempt history has every
 * attempt, numbered without gaps; the killed execution shows in Temporal's history as activity attempt 2
 * after a heartbeat timeout.
 */
import { Client, Connection } from '@temporalio/client';
import { decodeTimeoutType, defaultPayloadConverter } from '@temporalio/common';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { eventually, testAddress } from '../support/harness';
import { FileBlobStore } from '../../src/storage/blob-store';
import { TreadleClient } from '../../src/client';
import { pipeline } from '../../src/kinds/builder';
import type { CallRecord } from '../../src/model/shapes';

const LEDGER_WORKER = path.join(__dirname, 'fixtures', 'ledger-worker.js');
/** Temporal notices a dead worker when its heartbeats stop for this long. */
const HEARTBEAT_TIMEOUT = '2s';

const children: ChildProcess[] = [];
/** Everything each worker process printed, for failure messages. */
const outputs = new Map<ChildProcess, string>();
let connection: Connection;
let client: TreadleClient;
let temporal: Client;
let dir: string;
const taskQueue = `fault-crash-${Math.random().toString(36).slice(2, 10)}`;

/** Starts a ledger worker process and resolves once it polls (or rejects with its output if it dies first). */
async function startLedgerWorker(sleepMs: number, env: Record<string, string> = {}): Promise<ChildProcess> {
  const child = spawn(process.execPath, [LEDGER_WORKER], {
    env: {
      ...process.env,
      TEMPORAL_ADDRESS: testAddress(),
      TREADLE_TASK_QUEUE: taskQueue,
      TREADLE_BLOB_DIR: path.join(dir, 'blobs'),
      LEDGER_DIR: dir,
      LEDGER_SLEEP_MS: String(sleepMs),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  outputs.set(child, '');
  const collect = (chunk: Buffer): void => void outputs.set(child, outputs.get(child) + chunk.toString());
  child.stdout!.on('data', collect);
  child.stderr!.on('data', collect);
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', () => {
      if (outputs.get(child)!.includes('ready')) resolve();
    });
    child.once('exit', (code, signal) =>
      reject(new Error(`ledger worker exited (${signal ?? code}) before it was ready:\n${outputs.get(child)}`)),
    );
  });
  return child;
}

function exited(child: ChildProcess): Promise<void> {
  return child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve()
    : new Promise((resolve) => child.once('exit', () => resolve()));
}

const ledger = (): string[] => {
  try {
    return readFileSync(path.join(dir, 'ledger.log'), 'utf8').split('\n').filter(Boolean);
  } catch {
    return [];
  }
};

beforeAll(async () => {
  dir = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'ledger-'));
  connection = await Connection.connect({ address: testAddress() });
  temporal = new Client({ connection });
  client = new TreadleClient(temporal, { taskQueue, blobs: new FileBlobStore(path.join(dir, 'blobs')) });
});

/** Kills every worker process still running. */
async function killWorkers(): Promise<void> {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited(child);
  }
}

// Each test starts the workers it needs: one left running by an earlier test would take its activities.
beforeEach(killWorkers);

afterAll(async () => {
  // Never leave a worker behind, whatever happened in the test.
  await killWorkers();
  await connection?.close();
});

it('a new worker finishes an item whose worker was killed mid-stage; the side effect happened once', async () => {
  const id = `crash-${taskQueue}`;
  const spec = pipeline('ledger')
    .stage('count', 'ledger')
    .qualityGate('count', 'scripted')
    .retryBudget('count', { maxAttempts: 2 })
    .activityOptions('count', { heartbeatTimeout: HEARTBEAT_TIMEOUT, retry: { initialInterval: '100ms' } });
  // The gate rejects attempt 1 and accepts attempt 2: two attempts, two keys, one crash in the first.
  const input = { script: { count: [{ verdict: 'rejected', summary: 'count again' }, {}] } };

  // The first worker would sleep far longer than the test: it is killed while the stage runs.
  const first = await startLedgerWorker(60_000);
  await client.start(spec, input, { id });
  const firstKey = `${id}/count/1`;
  await eventually(
    async () => (ledger().includes(firstKey) ? true : undefined),
    20_000,
    `the side effect of ${firstKey}`,
  );
  expect((await client.getState(id)).stages.count!.status).toBe('running');
  first.kill('SIGKILL');
  await exited(first);
  expect(first.signalCode).toBe('SIGKILL');

  const second = await startLedgerWorker(100);
  const died = exited(second).then(() => Promise.reject(new Error(`the second worker died:\n${outputs.get(second)}`)));
  died.catch(() => undefined); // afterAll kills it; only a death before the result matters
  expect(await Promise.race([client.result(id), died])).toEqual(expect.objectContaining({ status: 'completed' }));

  // One side effect per attempt's key, none repeated by the retried execution.
  expect(ledger()).toEqual([firstKey, `${id}/count/2`]);
  expect(
    readdirSync(dir)
      .filter((f) => f.startsWith('crash-'))
      .sort(),
  ).toEqual([firstKey, `${id}/count/2`].map(encodeURIComponent));

  // The attempt history: both attempts, numbered 1 and 2; the first was finished by the second worker,
  // whose execution found the side effect already done.
  const state = await client.getState(id);
  const attempts = state.stages.count!.attempts;
  expect(attempts.map((a) => a.attempt)).toEqual([1, 2]);
  expect(attempts[0]).toEqual(
    expect.objectContaining({
      artefact: { key: firstKey, sideEffect: 'already_done', execution: 2, pid: second.pid },
      verdict: { kind: 'rejected', feedback: expect.objectContaining({ summary: 'count again' }) },
    }),
  );
  expect(attempts[1]).toEqual(
    expect.objectContaining({
      artefact: { key: `${id}/count/2`, sideEffect: 'performed', execution: 1, pid: second.pid },
      verdict: { kind: 'accepted' },
    }),
  );
  expect(state.stages.count!.artefact).toEqual(attempts[1]!.artefact);
  expect(state.events.map((e) => e.seq)).toEqual(state.events.map((_, i) => i + 1));
  expect(state.events.map((e) => e.type)).toEqual([
    'ItemStarted',
    'StageStarted',
    'QualityCheckFailed',
    'RetryScheduled',
    'RetryAttempt',
    'QualityCheckPassed',
    'StageCompleted',
    'ItemCompleted',
  ]);

  // Temporal's view: the first `ledger` activity ran twice (the kill was noticed as a heartbeat timeout),
  // the second once; no workflow task failed along the way.
  const history = await temporal.workflow.getHandle(id).fetchHistory();
  const events = history.events!;
  const typeOf = (scheduledId: unknown): string | undefined =>
    events.find((e) => String(e.eventId) === String(scheduledId))?.activityTaskScheduledEventAttributes?.activityType
      ?.name ?? undefined;
  const started = events
    .filter(
      (e) =>
        e.activityTaskStartedEventAttributes &&
        typeOf(e.activityTaskStartedEventAttributes.scheduledEventId) === 'ledger',
    )
    .map((e) => e.activityTaskStartedEventAttributes!);
  expect(started.map((s) => s.attempt)).toEqual([2, 1]);
  expect(decodeTimeoutType(started[0]!.lastFailure?.timeoutFailureInfo?.timeoutType)).toBe('HEARTBEAT');
  expect(
    events.filter(
      (e) =>
        e.workflowTaskFailedEventAttributes ||
        e.activityTaskFailedEventAttributes ||
        e.activityTaskTimedOutEventAttributes,
    ),
  ).toEqual([]);
});

/** The calls on the pending `chatty` activity's last heartbeat, once it carries `calls` made so far (read through describe). */
async function heartbeatCalls(
  id: string,
  made: number,
): Promise<{ usage: { calls: number }; stored?: { ref: string; count: number }; records?: unknown[] }> {
  return eventually(
    async () => {
      const { raw } = await temporal.workflow.getHandle(id).describe();
      const payload = raw.pendingActivities?.find((a) => a.activityType?.name === 'chatty')?.heartbeatDetails
        ?.payloads?.[0];
      const details = payload
        ? (defaultPayloadConverter.fromPayload(payload as never) as {
            calls?: { usage: { calls: number }; stored?: { ref: string; count: number }; records?: unknown[] };
          })
        : undefined;
      // Wait for the compact form: the records stored, none left inline.
      return details?.calls?.usage.calls === made && details.calls.stored?.count === made ? details.calls : undefined;
    },
    20_000,
    `a heartbeat of ${id} carrying ${made} stored calls`,
  );
}

/**
 * Runs a `chatty` stage (`calls` model calls, then a long heartbeating sleep) on a worker that is killed once
 * its heartbeat carries them all stored, then a second worker; returns the item's result and that heartbeat.
 */
async function chattyKilled(
  name: string,
  calls: number,
  retry: { initialInterval: string } | { maximumAttempts: number },
  env: Record<string, string> = {},
) {
  const id = `${name}-${taskQueue}`;
  const spec = pipeline(name)
    .stage('talk', 'chatty', { with: { calls } })
    .activityOptions('talk', { heartbeatTimeout: HEARTBEAT_TIMEOUT, retry });
  const first = await startLedgerWorker(60_000, env);
  await client.start(spec, {}, { id });
  const beat = await heartbeatCalls(id, calls);
  first.kill('SIGKILL');
  await exited(first);

  const second = await startLedgerWorker(100, env);
  const died = exited(second).then(() => Promise.reject(new Error(`the second worker died:\n${outputs.get(second)}`)));
  died.catch(() => undefined); // afterAll kills it; only a death before the result matters
  return { id, beat, result: await Promise.race([client.result(id), died]) };
}

// Model calls of a killed execution (more than travel inline) ride on its heartbeats by reference: the
// retried execution reports them with its own, and they all count.
it('a killed execution’s model calls come back with the retried execution, stored by reference', async () => {
  const { id, beat, result } = await chattyKilled('chatty', 6, { initialInterval: '100ms' });
  expect(result).toEqual(expect.objectContaining({ status: 'completed' }));

  const state = await client.getState(id);
  const [attempt] = state.stages.talk!.attempts;
  // Six calls from each execution, in one stored batch; none inline.
  expect(attempt!.usage).toMatchObject({ calls: 12, errors: 0 });
  expect(attempt!.calls).toBeUndefined();
  expect(attempt!.storedCalls).toEqual([{ ref: expect.stringMatching(/^sha256:/), count: 12 }]);
  expect(state.usage!.total.calls).toBe(12);
  const blobs = new FileBlobStore(path.join(dir, 'blobs'));
  const records = JSON.parse((await blobs.get(attempt!.storedCalls![0]!.ref)).toString('utf8')) as CallRecord[];
  expect(records).toHaveLength(12);
  // The killed execution's six are the ones its heartbeat stored.
  const killed = JSON.parse((await blobs.get(beat.stored!.ref)).toString('utf8')) as CallRecord[];
  expect(records.slice(0, 6)).toEqual(killed);
  // The audit reads them back from the blob store: a line per call.
  const calls = (await client.audit(id)).filter((e) => e.kind === 'model_call');
  expect(calls).toHaveLength(12);
  expect(calls.every((e) => e.step === 'talk' && e.stored === undefined)).toBe(true);
});

// An activity that is not retried: its heartbeat timeout ends the attempt, and the calls on its last
// heartbeat are the attempt's.
it('the calls on a timed-out activity’s last heartbeat count when Temporal does not retry it', async () => {
  const { id, result } = await chattyKilled('chatty-once', 5, { maximumAttempts: 1 });
  expect(result).toEqual(expect.objectContaining({ status: 'failed' }));

  const state = await client.getState(id);
  const [attempt] = state.stages.talk!.attempts;
  expect(attempt!.error).toMatch(/heartbeat/i);
  expect(attempt!.usage).toMatchObject({ calls: 5 });
  expect(attempt!.storedCalls).toEqual([{ ref: expect.stringMatching(/^sha256:/), count: 5 }]);
  expect(state.usage!.stages.talk!.calls).toBe(5);
  const audit = await client.audit(id);
  expect(audit.filter((e) => e.kind === 'model_call')).toHaveLength(5);
  expect(audit.map((e) => e.message)).toContainEqual(expect.stringMatching(/^talk attempt 1 \(chatty\) timed out/));
});

// An item started on engine 3, before heartbeats counted, keeps deciding as it did: those calls are not its.
it('an item started on engine 3 does not count the calls on a timed-out activity’s last heartbeat', async () => {
  const { id, result } = await chattyKilled(
    'chatty-engine-3',
    5,
    { maximumAttempts: 1 },
    { TREADLE_ENGINE_VERSION: '3' },
  );
  expect(result).toEqual(expect.objectContaining({ status: 'failed' }));
  const state = await client.getState(id);
  expect(state.stages.talk!.attempts[0]!.error).toMatch(/heartbeat/i);
  expect(state.stages.talk!.attempts[0]!.usage).toBeUndefined();
  expect(state.usage!.total.calls).toBe(0);
});
