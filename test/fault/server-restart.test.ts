/**
 * The dev server goes away and comes back on the same SQLite file while work items run and wait for
 * review, twice: stopped gracefully (SIGTERM), and crashed (SIGKILL of the Temporal process, no shutdown at
 * all). Cases, for each: an activity that finishes while the server is down, one still running when it comes
 * back, items waiting for review (still listed, still answerable), and an item started after the restart;
 * the same worker and client carry on without being recreated.
 *
 * What the 1.24 worker does (found here, asserted below from the history): it survives. While the server is
 * down its polls and heartbeats fail and are retried (Core prints `tcp connect error` warnings); it stays
 * RUNNING and polls the restarted server on its own, through the same NativeConnection. An activity that
 * finished during the outage cannot report it: Core retries the completion call for at most 10 s (its
 * default client retry policy), then drops the result; once the server is back, the activity's heartbeat
 * timeout fires and Temporal runs it again. That is a mechanical retry: one scheduled activity, one quality
 * attempt. (With a shorter outage the retried completion and the heartbeat timeout race on the restarted
 * server, and either may win; CI saw both. The outage is therefore longer than Core's retry window.)
 *
 * The slow stages are held open by the test, not by sleeps, so "finishes during the outage" and "still runs
 * when the server is back" hold however slow the machine is.
 */
import { isAlive } from '../support/processes';
import { Client, Connection } from '@temporalio/client';
import { decodeTimeoutType } from '@temporalio/common';
import { NativeConnection, type Worker } from '@temporalio/worker';
import { mkdtempSync } from 'node:fs';
import path from 'node:path';
import { eventually } from '../support/harness';
import { FileBlobStore } from '../../src/storage/blob-store';
import { TreadleClient } from '../../src/client';
import { pipeline } from '../../src/kinds/builder';
import { startDevServer, type DevServer, type DevServerOptions, freePort } from '../../src/server/dev-server';
import type { WorkItemState } from '../../src/model/state';
import { createWorker, defaultRegistry } from '../../src/worker';

/**
 * Long enough that heartbeats fail, the heartbeat timeout (1 s) is due when the server comes back, and Core
 * has given up retrying the completion of the activity that finished in the outage (10 s at most).
 */
const OUTAGE_MS = 13_000;
/** Two server starts, a graceful stop of up to 10 s, and the items' work, on a loaded machine. */
const RESTART_TEST_MS = 180_000;

/**
 * A `held` stage runs until the test releases its work item; each work item's executions are counted, and
 * so are the executions that returned.
 */
interface Hold {
  release(): void;
  released: Promise<void>;
  executions: number;
  returned: number;
}
const holds = new Map<string, Hold>();
function holdFor(itemId: string): Hold {
  let hold = holds.get(itemId);
  if (!hold) {
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    hold = { release, released, executions: 0, returned: 0 };
    holds.set(itemId, hold);
  }
  return hold;
}

/** A server with a worker and a client on it; the worker and the client outlive restarts of the server. */
interface Setup {
  server: DevServer | undefined;
  serverOptions: DevServerOptions;
  nativeConnection: NativeConnection;
  worker: Worker;
  running: Promise<void>;
  connection: Connection;
  client: TreadleClient;
  taskQueue: string;
}
let setup: Setup | undefined;

async function startSetup(): Promise<Setup> {
  const dir = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'restart-'));
  const serverOptions: DevServerOptions = {
    port: await freePort(),
    dbFile: path.join(dir, 'temporal.sqlite'),
    headless: true,
    allowDownload: false,
    progress: () => undefined,
  };
  const server = await startDevServer(serverOptions);
  const taskQueue = `fault-restart-${Math.random().toString(36).slice(2, 10)}`;
  const blobs = new FileBlobStore(path.join(dir, 'blobs'));
  const registry = defaultRegistry().stage('held', async (ctx) => {
    const hold = holdFor(ctx.itemId);
    hold.executions++;
    await Promise.race([
      hold.released,
      new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason), { once: true })),
    ]);
    hold.returned++;
    return { outcome: 'completed', artefact: { released: true }, summary: 'released' };
  });
  const nativeConnection = await NativeConnection.connect({ address: server.address });
  const worker = await createWorker({
    connection: nativeConnection,
    taskQueue,
    blobs,
    registry,
    workflowBundle: { codePath: process.env.TREADLE_TEST_BUNDLE! },
  });
  const running = worker.run();
  const connection = await Connection.connect({ address: server.address });
  const client = new TreadleClient(new Client({ connection }), { taskQueue, blobs });
  return { server, serverOptions, nativeConnection, worker, running, connection, client, taskQueue };
}

afterEach(async () => {
  // Whatever failed, stop the worker and the server (the server first would leave the worker retrying).
  const s = setup;
  setup = undefined;
  if (!s) return;
  if (s.worker.getState() === 'RUNNING') s.worker.shutdown();
  await s.running.catch(() => undefined);
  await s.connection.close();
  await s.nativeConnection.close();
  await s.server?.stop();
});

/** Stops the server gracefully: SIGTERM, and it shuts down. */
async function stopGracefully(server: DevServer): Promise<void> {
  await server.stop();
}

/** Crashes the server: SIGKILL to the Temporal process itself (not its watchdog), no chance to shut down. */
async function crash(server: DevServer): Promise<void> {
  const pid = server.pid;
  if (pid === undefined) throw new Error('the dev server has no pid: it was not started by Treadle');
  process.kill(pid, 'SIGKILL');
  await eventually(async () => (isAlive(pid) ? undefined : true), 10_000, `the Temporal process ${pid} to die`);
  // Its watchdog saw it die and exited: nothing is left to stop, this only waits for the watchdog to be gone.
  await server.stop();
}

describe.each([
  ['stopped gracefully', stopGracefully],
  ['crashed (SIGKILL)', crash],
] as const)('the server %s and restarted', (how, takeDown) => {
  it(
    'items running and waiting for review finish after the restart; the worker reconnects on its own; an activity that ended in the outage runs again',
    async () => {
      setup = await startSetup();
      const s = setup;
      const until = (id: string, done: (state: WorkItemState) => boolean, what: string) =>
        eventually(
          async () => {
            const state = await s.client.getState(id);
            return done(state) ? state : undefined;
          },
          30_000,
          `${id} ${what}`,
        );

      const name = `restart-${s.taskQueue}`;
      const reviewed = pipeline(name)
        .stage('check', 'scripted')
        .stage('after', 'scripted', { dependsOn: ['check'] })
        .reviewPolicy('check', 'always');
      const held = pipeline(name)
        .stage('work', 'held')
        .stage('after', 'scripted', { dependsOn: ['work'] })
        .activityOptions('work', { heartbeatTimeout: '1s', retry: { initialInterval: '100ms' } });
      const ids = {
        review1: `${name}-review-1`,
        review2: `${name}-review-2`,
        endsInOutage: `${name}-ends-in-outage`,
        outlivesOutage: `${name}-outlives-outage`,
      };
      await s.client.start(reviewed, null, { id: ids.review1 });
      await s.client.start(reviewed, null, { id: ids.review2 });
      await s.client.start(held, null, { id: ids.endsInOutage });
      await s.client.start(held, null, { id: ids.outlivesOutage });
      for (const id of [ids.review1, ids.review2])
        await until(id, (state) => state.status === 'waiting_review', 'to wait for review');
      for (const id of [ids.endsInOutage, ids.outlivesOutage])
        await until(id, (state) => state.stages.work?.status === 'running', 'to run its held stage');
      await eventually(
        async () =>
          holdFor(ids.endsInOutage).executions > 0 && holdFor(ids.outlivesOutage).executions > 0 ? true : undefined,
        30_000,
        'both held stages to run',
      );

      let workerEnded: string | undefined;
      void s.running.then(
        () => (workerEnded = `stopped (state ${s.worker.getState()})`),
        (error: unknown) => (workerEnded = `failed: ${(error as Error).message}`),
      );
      await takeDown(s.server!);
      s.server = undefined;
      // One held stage finishes while the server is down: its worker cannot report the result.
      holdFor(ids.endsInOutage).release();
      await eventually(
        async () => (holdFor(ids.endsInOutage).returned > 0 ? true : undefined),
        10_000,
        'the held stage to return during the outage',
      );
      await new Promise((r) => setTimeout(r, OUTAGE_MS));
      expect(s.worker.getState()).toBe('RUNNING');
      s.server = await startDevServer(s.serverOptions);
      // The other one was still running when the server came back.
      expect(holdFor(ids.outlivesOutage).returned).toBe(0);
      holdFor(ids.outlivesOutage).release();

      // The same worker and client: nothing was recreated.
      for (const id of [ids.endsInOutage, ids.outlivesOutage]) {
        expect(await s.client.result(id)).toEqual(
          expect.objectContaining({ id, status: 'completed', failedStages: [] }),
        );
        // Just after a restart the worker's polls may still be backing off (up to 10 s), past a read's usual 2 s.
        const state = await s.client.getState(id, {}, 30_000);
        // The outage cost mechanical retries at most; the stage has one attempt and the events have no gaps.
        expect(state.stages.work!.attempts.map((a) => a.attempt)).toEqual([1]);
        expect(state.events.map((e) => e.seq)).toEqual(state.events.map((_, i) => i + 1));
      }

      // The history says what happened to the stage that finished in the outage: its result was lost, the
      // heartbeat timeout fired once the server was back, and Temporal ran the same activity again.
      const events = (await s.client.client.workflow.getHandle(ids.endsInOutage).fetchHistory()).events!;
      const scheduled = events.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'held');
      expect(scheduled).toHaveLength(1);
      const ofHeld = (scheduledEventId: unknown): boolean => String(scheduledEventId) === String(scheduled[0]!.eventId);
      // Only the execution that completed gets a started event: its attempt number counts the executions.
      const started = events.filter((e) => ofHeld(e.activityTaskStartedEventAttributes?.scheduledEventId));
      expect(started).toHaveLength(1);
      const rerun = started[0]!.activityTaskStartedEventAttributes!;
      expect({
        how,
        rerun: rerun.attempt! >= 2,
        after: decodeTimeoutType(rerun.lastFailure?.timeoutFailureInfo?.timeoutType),
      }).toEqual({ how, rerun: true, after: 'HEARTBEAT' });
      expect(events.filter((e) => ofHeld(e.activityTaskCompletedEventAttributes?.scheduledEventId))).toHaveLength(1);
      expect(holdFor(ids.endsInOutage).executions).toBeGreaterThanOrEqual(2);

      const listed = await eventually(
        async () => {
          const reviews = await s.client.listPendingReviews({ pipeline: name });
          return reviews.length === 2 ? reviews : undefined;
        },
        30_000,
        'both pending reviews to be listed after the restart',
      );
      expect(listed.map((r) => [r.itemId, r.stage, r.reason]).sort()).toEqual([
        [ids.review1, 'check', 'always'],
        [ids.review2, 'check', 'always'],
      ]);
      await s.client.approve(ids.review1, 'check', { reviewer: 'after-restart' });
      await s.client.reject(ids.review2, 'check', 'seen after the restart', { reviewer: 'after-restart' });
      expect(await s.client.result(ids.review1)).toEqual(expect.objectContaining({ status: 'completed' }));
      expect(await s.client.result(ids.review2)).toEqual(
        expect.objectContaining({ status: 'failed', failedStages: ['check'] }),
      );

      // A new item after the restart runs on the same worker.
      const fresh = `${name}-fresh`;
      await s.client.start(
        pipeline(name)
          .stage('work', 'scripted')
          .stage('after', 'scripted', { dependsOn: ['work'] }),
        null,
        { id: fresh },
      );
      expect(await s.client.result(fresh)).toEqual(expect.objectContaining({ status: 'completed' }));
      expect(s.worker.getState()).toBe('RUNNING');
      expect(workerEnded).toBeUndefined();

      for (const id of [...Object.values(ids), fresh]) {
        const history = await s.client.client.workflow.getHandle(id).fetchHistory();
        expect({ id, failedTasks: history.events!.filter((e) => e.workflowTaskFailedEventAttributes).length }).toEqual({
          id,
          failedTasks: 0,
        });
      }
    },
    RESTART_TEST_MS,
  );
});
