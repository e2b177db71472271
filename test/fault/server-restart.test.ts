/**
 * The dev server stopped and restarted on the same SQLite file while work items run and wait for review.
 * Cases: an activity that finishes while the server is down, one still running when it comes back, items
 * waiting for review (still listed, still answerable), and an item started after the restart; the same
 * worker and client carry on without being recreated.
 *
 * What the 1.24 worker does (found here, asserted below): it survives. While the server is down its polls
 * and heartbeats fail and are retried (Core prints `tcp connect error` warnings); it stays RUNNING and polls
 * the restarted server on its own, through the same NativeConnection. An activity that finished during the
 * outage cannot report it: once the server is back, the activity's heartbeat timeout fires, Temporal runs
 * it again, and Core later drops the first execution's result ("Activity not found on completion"). That is
 * a mechanical retry: the stage still has exactly one attempt.
 */
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, type Worker } from '@temporalio/worker';
import { mkdtempSync } from 'node:fs';
import path from 'node:path';
import { eventually } from '../support/harness';
import { FileBlobStore } from '../../src/storage/blob-store';
import { TreadleClient } from '../../src/client';
import { pipeline } from '../../src/model/builder';
import { startDevServer, type DevServer, type DevServerOptions, freePort } from '../../src/server/dev-server';
import type { WorkItemState } from '../../src/model/state';
import { createWorker } from '../../src/worker';

/** Long enough that heartbeats fail and the heartbeat timeout fires during the outage. */
const OUTAGE_MS = 3_000;

let server: DevServer | undefined;
let serverOptions: DevServerOptions;
let nativeConnection: NativeConnection | undefined;
let worker: Worker | undefined;
let running: Promise<void> | undefined;
let connection: Connection | undefined;
let client: TreadleClient;
const taskQueue = `fault-restart-${Math.random().toString(36).slice(2, 10)}`;


beforeAll(async () => {
  const dir = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'restart-'));
  serverOptions = { port: await freePort(), dbFile: path.join(dir, 'temporal.sqlite'), headless: true, allowDownload: false, progress: () => undefined };
  server = await startDevServer(serverOptions);
  const blobs = new FileBlobStore(path.join(dir, 'blobs'));
  nativeConnection = await NativeConnection.connect({ address: server.address });
  worker = await createWorker({ connection: nativeConnection, taskQueue, blobs, workflowBundle: { codePath: process.env.TREADLE_TEST_BUNDLE! } });
  running = worker.run();
  connection = await Connection.connect({ address: server.address });
  client = new TreadleClient(new Client({ connection }), { taskQueue, blobs });
});

afterAll(async () => {
  // Whatever failed, stop the worker and the server (the server first would leave the worker retrying).
  if (worker?.getState() === 'RUNNING') worker.shutdown();
  await running?.catch(() => undefined);
  await connection?.close();
  await nativeConnection?.close();
  await server?.stop();
});

const until = (id: string, done: (s: WorkItemState) => boolean, what: string) =>
  eventually(async () => {
    const state = await client.getState(id);
    return done(state) ? state : undefined;
  }, 30_000, `${id} ${what}`);

it('items running and waiting for review finish after the server restarts; the worker reconnects on its own', async () => {
  const name = `restart-${taskQueue}`;
  const reviewed = pipeline(name).stage('check', 'scripted').stage('after', 'scripted', { dependsOn: ['check'] }).reviewPolicy('check', 'always');
  const slow = pipeline(name)
    .stage('work', 'scripted')
    .stage('after', 'scripted', { dependsOn: ['work'] })
    .activityOptions('work', { heartbeatTimeout: '1s', retry: { initialInterval: '100ms' } });
  const ids = { review1: `${name}-review-1`, review2: `${name}-review-2`, endsInOutage: `${name}-ends-in-outage`, outlivesOutage: `${name}-outlives-outage` };
  await client.start(reviewed, null, { id: ids.review1 });
  await client.start(reviewed, null, { id: ids.review2 });
  await client.start(slow, { script: { work: [{ sleepMs: 1_500 }] } }, { id: ids.endsInOutage });
  await client.start(slow, { script: { work: [{ sleepMs: 6_000 }] } }, { id: ids.outlivesOutage });
  for (const id of [ids.review1, ids.review2]) await until(id, (s) => s.status === 'waiting_review', 'to wait for review');
  for (const id of [ids.endsInOutage, ids.outlivesOutage]) await until(id, (s) => s.stages.work?.status === 'running', 'to run its slow stage');

  let workerEnded: string | undefined;
  void running!.then(
    () => (workerEnded = `stopped (state ${worker!.getState()})`),
    (error: unknown) => (workerEnded = `failed: ${(error as Error).message}`),
  );
  await server!.stop();
  server = undefined;
  await new Promise((r) => setTimeout(r, OUTAGE_MS));
  expect(worker!.getState()).toBe('RUNNING');
  server = await startDevServer(serverOptions);

  // The same worker and client: nothing was recreated.
  for (const id of [ids.endsInOutage, ids.outlivesOutage]) {
    expect(await client.result(id)).toEqual(expect.objectContaining({ id, status: 'completed', failedStages: [] }));
    const state = await client.getState(id);
    // The outage cost mechanical retries at most; the stage has one attempt and the events have no gaps.
    expect(state.stages.work!.attempts.map((a) => a.attempt)).toEqual([1]);
    expect(state.events.map((e) => e.seq)).toEqual(state.events.map((_, i) => i + 1));
  }
  const listed = await eventually(async () => {
    const reviews = await client.listPendingReviews({ pipeline: name });
    return reviews.length === 2 ? reviews : undefined;
  }, 30_000, 'both pending reviews to be listed after the restart');
  expect(listed.map((r) => [r.itemId, r.stage, r.reason]).sort()).toEqual([
    [ids.review1, 'check', 'always'],
    [ids.review2, 'check', 'always'],
  ]);
  await client.approve(ids.review1, 'check', { reviewer: 'after-restart' });
  await client.reject(ids.review2, 'check', 'seen after the restart', { reviewer: 'after-restart' });
  expect(await client.result(ids.review1)).toEqual(expect.objectContaining({ status: 'completed' }));
  expect(await client.result(ids.review2)).toEqual(expect.objectContaining({ status: 'failed', failedStages: ['check'] }));

  // A new item after the restart runs on the same worker.
  const fresh = `${name}-fresh`;
  await client.start(slow, null, { id: fresh });
  expect(await client.result(fresh)).toEqual(expect.objectContaining({ status: 'completed' }));
  expect(worker!.getState()).toBe('RUNNING');
  expect(workerEnded).toBeUndefined();

  for (const id of [...Object.values(ids), fresh]) {
    const history = await client.client.workflow.getHandle(id).fetchHistory();
    expect({ id, failedTasks: history.events!.filter((e) => e.workflowTaskFailedEventAttributes).length }).toEqual({ id, failedTasks: 0 });
  }
});
