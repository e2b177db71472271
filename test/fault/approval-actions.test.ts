/**
 * Approved actions happen once (seed 003's idempotency key, `sha256(runId + step + inputHash)`), proven the
 * two ways an action can run again: its activity fails after the action took effect and Temporal retries
 * it, and its worker is SIGKILLed after the effect and before Temporal heard of it, so another worker runs
 * it again. Either way the task list holds one task, and the request's result is the first execution's.
 */
import { Client, Connection } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { ActionCatalog } from '../../src/kinds/approval/worker/activities';
import { exampleActionRegistry, TaskList } from '../../examples/task-list';
import { TreadleClient } from '../../src/client';
import { FileBlobStore } from '../../src/storage/blob-store';
import { eventually, startHarness, testAddress, type Harness } from '../support/harness';

const APPROVAL_WORKER = path.join(__dirname, 'fixtures', 'approval-worker.js');
let dir: string;
const children: ChildProcess[] = [];
const harnesses: Harness[] = [];

beforeAll(() => {
  dir = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'actions-'));
});
afterAll(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  for (const h of harnesses) await h.shutdown();
});

/** One approval step creating the task `title` (heartbeat timeout 2 s, retries after 100 ms). */
const spec = (name: string) => ({
  name,
  stages: [
    { name: 'draft', run: 'scripted' },
    {
      name: 'approve',
      type: 'approval',
      depends_on: ['draft'],
      with: { action: 'create_task', items: 'tasks' },
      activity: { heartbeat_timeout: '2s', retry: { initial_interval: '100ms' } },
    },
  ],
});
const input = (title: string) => ({ script: { draft: [{ output: { tasks: [{ title, priority: 'high' }] } }] } });

async function approveTheOnlyRequest(h: Harness, id: string): Promise<string> {
  const request = await eventually(
    async () => (await h.client.listApprovals()).find((r) => r.itemId === id),
    30_000,
    'the approval request',
  );
  await h.client.decideApproval(request.id, 'approve', { by: 'ann' });
  return request.id;
}

it('an action whose activity fails after the effect is retried by Temporal and takes effect once', async () => {
  const tasksFile = path.join(dir, 'retry.json');
  const registry = exampleActionRegistry({ tasksFile });
  let executions = 0;
  // The first execution applies the action and then fails, as if the worker lost the reply.
  const flaky: ActionCatalog = {
    validatePayload: (type, payload) => registry.validatePayload(type, payload),
    summarize: (type, payload) => registry.summarize(type, payload),
    execute: async (type, payload, context) => {
      const result = await registry.execute(type, payload, context);
      if (++executions === 1)
        throw ApplicationFailure.retryable('the reply was lost after the task was created', 'Flaky');
      return result;
    },
  };
  const h = await startHarness({ approvalActions: flaky });
  harnesses.push(h);
  const id = h.id('retried');
  await h.client.start(spec(`actions-retry-${h.taskQueue}`), input('File the expense report'), { id });
  const requestId = await approveTheOnlyRequest(h, id);
  expect((await h.client.result(id)).status).toBe('completed');

  expect(executions).toBe(2);
  const tasks = (await new TaskList({ file: tasksFile }).read()).tasks;
  expect(tasks.map((t) => [t.title, t.priority])).toEqual([['File the expense report', 'high']]);
  const request = (await h.client.getState(id)).approvals!.find((r) => r.id === requestId)!;
  expect(request).toMatchObject({ status: 'approved', result: expect.objectContaining({ taskId: tasks[0]!.id }) });
  expect(tasks[0]!.idempotencyKey).toBe(request.idempotencyKey);
  // Temporal's history: one execute activity, completed on its second try.
  const events = (await h.temporal.workflow.getHandle(id).fetchHistory()).events!;
  const scheduled = events.filter(
    (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'treadle.approvalExecute',
  );
  expect(scheduled).toHaveLength(1);
  const started = events.find(
    (e) => String(e.activityTaskStartedEventAttributes?.scheduledEventId) === String(scheduled[0]!.eventId),
  )!;
  expect(started.activityTaskStartedEventAttributes!.attempt).toBe(2);
}, 60_000);

it('an action whose worker is killed after the effect runs again on another worker and takes effect once', async () => {
  const tasksFile = path.join(dir, 'crash.json');
  const taskQueue = `actions-crash-${Math.random().toString(36).slice(2, 10)}`;
  const blobDir = path.join(dir, 'blobs');
  const child = spawn(process.execPath, [APPROVAL_WORKER], {
    env: {
      ...process.env,
      TEMPORAL_ADDRESS: testAddress(),
      TREADLE_TASK_QUEUE: taskQueue,
      TREADLE_BLOB_DIR: blobDir,
      TASKS_FILE: tasksFile,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let output = '';
  child.stdout!.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
  await eventually(async () => (output.includes('ready') ? true : undefined), 30_000, 'the approval worker to poll');

  // A client on the same queue and blob folder; no worker of its own until the first one is dead.
  const connection = await Connection.connect({ address: testAddress() });
  const client = new TreadleClient(new Client({ connection }), { taskQueue, blobs: new FileBlobStore(blobDir) });
  const id = `actions-crash-${taskQueue}`;
  await client.start(spec(`actions-crash-${taskQueue}`), input('Book the venue'), { id });
  const request = await eventually(
    async () => (await client.listApprovals()).find((r) => r.itemId === id),
    30_000,
    'the approval request',
  );
  await client.decideApproval(request.id, 'approve', { by: 'ann' });

  // The action took effect; Temporal has not heard of it. Kill the worker now.
  await eventually(
    async () => (existsSync(`${tasksFile}.applied`) ? true : undefined),
    30_000,
    'the action to take effect',
  );
  const applied = JSON.parse(readFileSync(`${tasksFile}.applied`, 'utf8')) as {
    key: string;
    result: { taskId: string };
  };
  child.kill('SIGKILL');
  await new Promise((resolve) => child.once('exit', resolve));
  expect((await new TaskList({ file: tasksFile }).read()).tasks).toHaveLength(1);

  // Another worker with the real actions on the same task list finishes the item.
  const h = await startHarness({
    taskQueue,
    approvalActions: exampleActionRegistry({ tasksFile }),
    blobs: new FileBlobStore(blobDir),
  });
  harnesses.push(h);
  expect((await client.result(id)).status).toBe('completed');
  await connection.close();

  const tasks = (await new TaskList({ file: tasksFile }).read()).tasks;
  expect(tasks.map((t) => t.title)).toEqual(['Book the venue']);
  const state = await h.client.getState(id);
  const done = state.approvals!.find((r) => r.id === request.id)!;
  expect(done.idempotencyKey).toBe(applied.key);
  expect(done.result).toEqual(applied.result);
  // The rerun came after the heartbeat timeout of the killed execution.
  const events = (await h.temporal.workflow.getHandle(id).fetchHistory()).events!;
  const scheduled = events.find(
    (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'treadle.approvalExecute',
  )!;
  const started = events.find(
    (e) => String(e.activityTaskStartedEventAttributes?.scheduledEventId) === String(scheduled.eventId),
  )!;
  expect(started.activityTaskStartedEventAttributes!.attempt).toBeGreaterThanOrEqual(2);
}, 120_000);
