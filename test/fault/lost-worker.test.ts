/**
 * A lost worker costs a TDD tree or a loop about one heartbeat timeout (issue 24 §7), not two minutes. Cases: a
 * worker process killed (SIGKILL) while a node's Impl runs its tests — Temporal records the Impl activity's
 * retry after a HEARTBEAT timeout of STEP_HEARTBEAT_TIMEOUT (30 s), another worker process finishes the tree,
 * well under the old 2-minute stall; the same for a loop iteration killed while its verify command runs; and a
 * test command that runs 40 s, longer than that timeout, is not timed out (the node call heartbeats).
 */
import { Client, Connection } from '@temporalio/client';
import { decodeTimeoutType } from '@temporalio/common';
import type { temporal } from '@temporalio/proto';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { initRepository } from '../../src/kinds/tdd/worker/git';
import { TreadleClient } from '../../src/client';
import { LOOP_ITERATION_ACTIVITY, TDD_NODE_ACTIVITY } from '../../src/model/activity-types';
import type { Json } from '../../src/model/shapes';
import { FileBlobStore } from '../../src/storage/blob-store';
import { eventually, testAddress } from '../support/harness';
import { leaf } from '../support/tdd-fixtures';

/** A Treadle worker in a process of its own (the crash test's; its ledger stage is not used here). */
const WORKER = path.join(__dirname, 'fixtures', 'ledger-worker.js');

const workers: ChildProcess[] = [];
let connection: Connection;
let temporalClient: Client;
let client: TreadleClient;
let dir: string;
const taskQueue = `fault-lost-${Math.random().toString(36).slice(2, 10)}`;

async function startWorker(): Promise<ChildProcess> {
  const child = spawn(process.execPath, [WORKER], {
    env: {
      ...process.env,
      TEMPORAL_ADDRESS: testAddress(),
      TREADLE_TASK_QUEUE: taskQueue,
      TREADLE_BLOB_DIR: path.join(dir, 'blobs'),
      LEDGER_DIR: dir,
      TREADLE_TDD_REPOS: dir,
      TREADLE_AGENT: 'scripted',
      TREADLE_LOOP_WORKSPACE: path.join(dir, 'workspace'),
      TREADLE_LOOP_COMMANDS: JSON.stringify([['sh', 'slow.sh']]),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  workers.push(child);
  let output = '';
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('ready')) resolve();
    });
    child.stderr!.on('data', (chunk: Buffer) => void (output += chunk.toString()));
    child.once('exit', (code, signal) =>
      reject(new Error(`worker exited (${signal ?? code}) before it was ready:\n${output}`)),
    );
  });
  return child;
}

function exited(child: ChildProcess): Promise<void> {
  return child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve()
    : new Promise((resolve) => child.once('exit', () => resolve()));
}

async function killWorkers(): Promise<void> {
  for (const child of workers) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited(child);
  }
}

beforeAll(async () => {
  dir = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'lost-worker-'));
  connection = await Connection.connect({ address: testAddress() });
  temporalClient = new Client({ connection });
  client = new TreadleClient(temporalClient, { taskQueue, blobs: new FileBlobStore(path.join(dir, 'blobs')) });
});
beforeEach(killWorkers);
afterAll(async () => {
  await killWorkers();
  await connection?.close();
});

/**
 * A leaf `<name>() is 1` whose implementation, the first time a test calls it, sleeps `sleepMs` (so Impl's
 * TestsPassed run is long once; the merge's run is quick). `marker` tells that the long run has begun.
 */
function slowLeaf(name: string, marker: string, sleepMs: number) {
  const l = leaf(name);
  const implementation = [
    "'use strict';",
    "const fs = require('node:fs');",
    `const MARKER = ${JSON.stringify(marker)};`,
    `module.exports = { ${name}: () => {`,
    `  if (!fs.existsSync(MARKER)) { fs.writeFileSync(MARKER, ''); Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ${sleepMs}); }`,
    '  return 1;',
    '} };',
    '',
  ].join('\n');
  const replies: Record<string, Json[]> = {
    [`${name}.scaffold`]: [l.initWork],
    [`${name}.tddWriteTests`]: [l.testsReady],
    [`${name}.impl`]: [{ ...l.testsPassed, files: { [`src/${name}.js`]: implementation } }],
    [`${name}.tddReviewImpl`]: [l.approved],
    [`${name}.merger`]: [l.mergeComplete],
  };
  return { spec: l.spec, replies };
}

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;

/** The node activity's executions for Impl, as the server recorded them: attempt, and the last failure's timeout type. */
function implExecutions(events: HistoryEvent[]) {
  const scheduled = events.filter((e) => {
    const attrs = e.activityTaskScheduledEventAttributes;
    return attrs?.activityType?.name === TDD_NODE_ACTIVITY && isImpl(attrs);
  });
  return scheduled.map((s) => {
    const started = events.find(
      (e) =>
        e.activityTaskStartedEventAttributes &&
        String(e.activityTaskStartedEventAttributes.scheduledEventId) === String(s.eventId),
    )!.activityTaskStartedEventAttributes!;
    return {
      heartbeatTimeoutSeconds: Number(s.activityTaskScheduledEventAttributes!.heartbeatTimeout?.seconds ?? 0),
      attempt: started.attempt,
      lastTimeout: started.lastFailure?.timeoutFailureInfo
        ? decodeTimeoutType(started.lastFailure.timeoutFailureInfo.timeoutType)
        : undefined,
    };
  });
}

/** Whether a scheduled node activity is an Impl call (its input names the node). */
function isImpl(attrs: temporal.api.history.v1.IActivityTaskScheduledEventAttributes): boolean {
  const payload = attrs.input?.payloads?.[0]?.data;
  return payload ? (JSON.parse(Buffer.from(payload).toString('utf8')) as { node?: string }).node === 'impl' : false;
}

it('a worker killed while a node’s Impl runs its tests costs the tree one heartbeat timeout, then another worker finishes it', async () => {
  const marker = path.join(dir, 'killed.started');
  const { spec, replies } = slowLeaf('lost', marker, 45_000);
  const repo = path.join(dir, 'lost');
  await initRepository(repo, { 'README.md': '# lost\n' });
  const id = `lost-worker-${taskQueue}`;

  const first = await startWorker();
  await client.startTdd(spec, { repo, id, replies });
  // Impl's test run has begun (it sleeps in the implementation): the worker dies mid-step.
  await eventually(async () => (existsSync(marker) ? true : undefined), 90_000, 'the long test run');
  first.kill('SIGKILL');
  await exited(first);
  const killedAt = Date.now();

  await startWorker();
  expect(await client.tddResult(id)).toMatchObject({ status: 'merged' });
  const stalled = Date.now() - killedAt;

  // The server's record: Impl's activity ran again (attempt 2) after a HEARTBEAT timeout of 30 s.
  const history = await temporalClient.workflow.getHandle(id).fetchHistory();
  expect(implExecutions(history.events ?? [])).toEqual([
    { heartbeatTimeoutSeconds: 30, attempt: 2, lastTimeout: 'HEARTBEAT' },
  ]);
  // A sanity bound, well under the old stall of 2 minutes and more.
  expect(stalled).toBeLessThan(90_000);
}, 240_000);

it('a test command that runs 40 s, longer than the heartbeat timeout, is not timed out: the node call heartbeats', async () => {
  const marker = path.join(dir, 'slow.started');
  const { spec, replies } = slowLeaf('slow', marker, 40_000);
  const repo = path.join(dir, 'slow');
  await initRepository(repo, { 'README.md': '# slow\n' });
  const id = `slow-tests-${taskQueue}`;

  await startWorker();
  await client.startTdd(spec, { repo, id, replies });
  expect(await client.tddResult(id)).toMatchObject({ status: 'merged' });
  expect(existsSync(marker)).toBe(true);

  // One Impl execution, not retried, and no activity of the tree timed out.
  const history = await temporalClient.workflow.getHandle(id).fetchHistory();
  expect(implExecutions(history.events ?? [])).toEqual([
    { heartbeatTimeoutSeconds: 30, attempt: 1, lastTimeout: undefined },
  ]);
  expect((history.events ?? []).filter((e) => e.activityTaskTimedOutEventAttributes)).toEqual([]);
  const implExit = (await client.events(id)).find((e) => e.type === 'NodeExit' && e.stage === 'impl');
  // The run took the 40 s it sleeps (node's test runner reports it).
  expect(String(implExit?.details?.tests)).toMatch(/^2 passed, 0 failed .*exit 0, (\d{5,}) ms\)$/);
}, 180_000);

it('a worker killed while a loop iteration runs its verify command costs the loop one heartbeat timeout', async () => {
  const workspace = path.join(dir, 'workspace');
  mkdirSync(workspace, { recursive: true });
  // The verify command is slow the first time only (the killed execution's), quick when the iteration reruns.
  writeFileSync(path.join(workspace, 'slow.sh'), 'if [ ! -e slow.started ]; then : > slow.started; sleep 45; fi\n');
  const marker = path.join(workspace, 'slow.started');
  const id = `lost-loop-${taskQueue}`;
  const decided = {
    decision: 'stop',
    reason: 'done',
    summary: 'done',
    work: { items_completed: [], files_touched: [] },
    errors: [],
  };
  const reply = { output: '# Output\n', progress: '## Iteration 1\n', status: decided };
  const stage = {
    name: 'ideas',
    run: 'loop',
    with: {
      stage: {
        name: 'ideas',
        prompt: 'Write ${OUTPUT}. Report in ${STATUS}.',
        termination: { type: 'fixed' },
        verify: ['sh slow.sh'],
      },
      max_iterations: 1,
    },
  };

  const first = await startWorker();
  // Replies for the killed execution and its rerun, whichever each takes.
  await client.start(
    { name: 'lost-loop', stages: [stage] },
    { agent_replies: { ideas: [reply, reply, reply] } },
    { id },
  );
  await eventually(async () => (existsSync(marker) ? true : undefined), 90_000, 'the slow verify command');
  first.kill('SIGKILL');
  await exited(first);
  const killedAt = Date.now();

  await startWorker();
  expect(await client.result(id)).toMatchObject({ status: 'completed' });
  const stalled = Date.now() - killedAt;

  // The loop's history: its one iteration ran again (attempt 2) after a HEARTBEAT timeout of 30 s.
  const [loop] = await client.loops(id);
  const events = (await temporalClient.workflow.getHandle(loop!.workflowId).fetchHistory()).events ?? [];
  const iterations = events.filter(
    (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === LOOP_ITERATION_ACTIVITY,
  );
  expect(iterations).toHaveLength(1);
  const started = events.find(
    (e) => String(e.activityTaskStartedEventAttributes?.scheduledEventId) === String(iterations[0]!.eventId),
  )!.activityTaskStartedEventAttributes!;
  expect(Number(iterations[0]!.activityTaskScheduledEventAttributes!.heartbeatTimeout?.seconds)).toBe(30);
  expect(started.attempt).toBe(2);
  expect(decodeTimeoutType(started.lastFailure?.timeoutFailureInfo?.timeoutType)).toBe('HEARTBEAT');
  expect(stalled).toBeLessThan(90_000);
}, 240_000);
