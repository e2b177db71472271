/**
 * Worker Deployment Versioning as the upgrade path (issue 41), on the run's server: builds v1 and v2 of one
 * deployment poll the same task queue side by side. Cases: an item started while v1 is current waits for review;
 * `treadle deployments set-current v2` makes v2 current; a new item runs on v2; the v1 item, approved, finishes
 * on v1 (every workflow task of its history completed by the v1 worker, its describe pinned to v1), while the
 * shared limiter workflow, auto-upgrading, moves from v1 to v2 at its next task; then
 * `treadle deployments` shows v1 draining with no open item. A build id without a deployment stops
 * `treadle worker` with exit 2; unknown build ids and deployments are refused with exit 2; a server with deployment
 * versions off (`system.enableDeploymentVersions=false`, a server of the test's own) is named as such, exit 1.
 */
import type { Client } from '@temporalio/client';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from '../../src/kinds/builder';
import type { DeploymentListing } from '../../src/client/deployments';
import { freePort, startDevServer } from '../../src/server/dev-server';
import { TreadleClient } from '../../src/client';
import { runTreadle, runCli, type CliRun } from '../support/cli';
import { startTreadleWorker } from '../support/worker-process';
import { eventually, startHarness, type Harness } from '../support/harness';

jest.setTimeout(180_000);

const deployment = `treadle-${Math.random().toString(36).slice(2, 10)}`;
let v1: Harness;
let v2: Harness | undefined;

beforeAll(async () => {
  v1 = await startHarness({ deployment: { name: deployment, buildId: 'v1' }, worker: { identity: 'worker-v1' } });
});
afterAll(async () => {
  await v2?.shutdown();
  await v1?.shutdown();
});

const treadle = (args: string[]): Promise<CliRun> => runTreadle(v1, args, { TREADLE_DEPLOYMENT: deployment });

/** `treadle deployments --json` for this test's deployment. */
async function listing(): Promise<DeploymentListing> {
  const run = await treadle(['deployments', '--json']);
  expect(run).toMatchObject({ code: 0 });
  const [only] = JSON.parse(run.stdout) as DeploymentListing[];
  return only!;
}

/** Makes `buildId` current through the CLI, once its worker has polled (the server knows a version only then). */
async function setCurrent(buildId: string): Promise<CliRun> {
  await eventually(
    async () => ((await listing()).versions.some((v) => v.buildId === buildId) ? true : undefined),
    30_000,
    `build ${buildId} registered in ${deployment}`,
  );
  const run = await treadle(['deployments', 'set-current', buildId]);
  expect(run.stderr).toBe('');
  expect(run.code).toBe(0);
  return run;
}

/** The build ids and worker identities on an item's completed workflow tasks, and its describe's pin. */
async function tasksOf(temporal: Client, id: string) {
  const handle = temporal.workflow.getHandle(id);
  const history = await handle.fetchHistory();
  const completed = (history.events ?? []).flatMap((event) =>
    event.workflowTaskCompletedEventAttributes ? [event.workflowTaskCompletedEventAttributes] : [],
  );
  const described = await temporal.workflowService.describeWorkflowExecution({
    namespace: temporal.options.namespace,
    execution: { workflowId: id },
  });
  const versioning = described.workflowExecutionInfo?.versioningInfo;
  return {
    builds: [...new Set(completed.map((task) => task.deploymentVersion?.buildId ?? '(none)'))],
    identities: [...new Set(completed.map((task) => task.identity))],
    tasks: completed.length,
    pinnedTo: versioning?.deploymentVersion?.buildId,
    behavior: versioning?.behavior,
  };
}

const waitsForReview = (h: Harness, id: string) =>
  eventually(
    async () => ((await h.client.getState(id)).pendingReviews.length > 0 ? true : undefined),
    60_000,
    `${id} waiting for review`,
  );

/** VersioningBehavior in the API's enum. */
const PINNED = 1;
const AUTO_UPGRADE = 2;

/** A limiter for this test's queue, started while v1 is current (its id is unique to the deployment). */
async function startLimiter(h: Harness): Promise<string> {
  const workflowId = `limiter-${deployment}`;
  await h.temporal.workflow.start('treadleLimiter', {
    workflowId,
    taskQueue: h.taskQueue,
    args: [
      { scope: { provider: 'anthropic', model: deployment, keyId: 'k' }, limits: { concurrency: 1, leaseMs: 30_000 } },
    ],
  });
  return workflowId;
}

/** Wakes the limiter (a release of no lease changes nothing) until its latest task ran on `buildId`. */
async function limiterMovesTo(h: Harness, workflowId: string, buildId: string) {
  return eventually(
    async () => {
      await h.temporal.workflow.getHandle(workflowId).signal('release', { holder: 'test', releases: [] });
      const tasks = await tasksOf(h.temporal, workflowId);
      return tasks.builds.at(-1) === buildId ? tasks : undefined;
    },
    30_000,
    `the limiter on ${buildId}`,
  );
}

it('an item started on v1 finishes on v1 while v2, made current, serves new items; v1 then drains', async () => {
  const spec = pipeline('versioned').stage('draft', 'scripted').reviewPolicy('draft', 'always');
  const setV1 = await setCurrent('v1');
  expect(setV1.stdout).toContain(`${deployment}: build v1 is current (before: none)`);

  const limiter = await startLimiter(v1);
  expect(await limiterMovesTo(v1, limiter, 'v1')).toMatchObject({ behavior: AUTO_UPGRADE });

  const first = v1.id('on-v1');
  await v1.client.start(spec, {}, { id: first });
  await waitsForReview(v1, first);

  v2 = await startHarness({
    taskQueue: v1.taskQueue,
    deployment: { name: deployment, buildId: 'v2' },
    worker: { identity: 'worker-v2' },
  });
  // Versioned workers still show as the queue's pollers (the CLI's no-worker answer reads them).
  await eventually(async () => {
    const polling = await v2!.client.workers.polling();
    return polling.includes('worker-v1') && polling.includes('worker-v2') ? true : undefined;
  }, 30_000);
  const setV2 = await setCurrent('v2');
  expect(setV2.stdout).toContain(`${deployment}: build v2 is current (before: v1)`);

  const second = v2.id('on-v2');
  await v2.client.start(spec, {}, { id: second });
  await waitsForReview(v2, second);
  expect(await tasksOf(v2.temporal, second)).toMatchObject({ builds: ['v2'], pinnedTo: 'v2', behavior: PINNED });
  // The shared limiter follows the current build, where the pinned v1 item stays.
  expect(await limiterMovesTo(v2, limiter, 'v2')).toMatchObject({ builds: ['v1', 'v2'], behavior: AUTO_UPGRADE });
  await v2.temporal.workflow.getHandle(limiter).terminate('test over');

  // Both builds hold an open item: v2 is current, v1 drains (visibility is eventually consistent).
  const both = await eventually(async () => {
    const versions = (await listing()).versions;
    const byBuild = Object.fromEntries(versions.map((v) => [v.buildId, v]));
    return byBuild.v1?.openItems === 1 && byBuild.v2?.openItems === 1 ? byBuild : undefined;
  }, 30_000);
  expect(both.v2).toMatchObject({ state: 'current' });
  expect(both.v1).toMatchObject({ state: 'draining' });
  const table = await treadle(['deployments']);
  expect(table.stdout).toMatch(new RegExp(`deployment ${deployment}\\n.*BUILD +STATE +OPEN ITEMS +CREATED`));
  expect(table.stdout).toMatch(/v2 +current +1 /);
  expect(table.stdout).toMatch(/v1 +draining +1 /);

  // The v1 item, approved after v2 became current, finishes on v1: every task its v1 worker's.
  await v1.client.approve(first, 'draft');
  expect((await v1.client.result(first)).status).toBe('completed');
  const onV1 = await tasksOf(v1.temporal, first);
  expect(onV1).toMatchObject({ builds: ['v1'], identities: ['worker-v1'], pinnedTo: 'v1', behavior: PINNED });
  expect(onV1.tasks).toBeGreaterThan(2); // tasks after the approval, not only those before v2

  await v2.client.approve(second, 'draft');
  expect((await v2.client.result(second)).status).toBe('completed');
  expect(await tasksOf(v2.temporal, second)).toMatchObject({ builds: ['v2'], identities: ['worker-v2'] });

  // v1 has drained: no item open, and Temporal says so (the test servers refresh drainage every 3 s; production
  // servers every 3 minutes), so its workers may stop.
  const drained = await eventually(async () => {
    const versions = (await listing()).versions;
    const old = versions.find((v) => v.buildId === 'v1');
    return old?.openItems === 0 && old.state === 'drained' ? old : undefined;
  }, 60_000);
  expect(drained).toMatchObject({ state: 'drained', openItems: 0 });
  expect((await treadle(['deployments'])).stdout).toMatch(/v1 +drained +0 /);
});

it('refuses an unknown build id and an unknown deployment with exit 2', async () => {
  const unknownBuild = await treadle(['deployments', 'set-current', 'v9']);
  expect(unknownBuild.code).toBe(2);
  expect(unknownBuild.stderr).toContain(`no build v9 in deployment ${deployment}`);
  const unknownDeployment = await treadle(['deployments', '--deployment', `${deployment}-none`]);
  expect(unknownDeployment.code).toBe(2);
  expect(unknownDeployment.stderr).toContain(`no deployment ${deployment}-none in namespace default`);
  const noName = await runTreadle(v1, ['deployments', 'set-current', 'v1'], { TREADLE_DEPLOYMENT: '' });
  expect(noName.code).toBe(2);
  expect(noName.stderr).toContain('which deployment? Give --deployment <name> or set TREADLE_DEPLOYMENT');
});

it('treadle worker takes its deployment version from the environment, and its items run pinned there', async () => {
  const name = `${deployment}-env`;
  const taskQueue = `${v1.taskQueue}-env`;
  const worker = await startTreadleWorker({
    env: {
      ...process.env,
      TEMPORAL_ADDRESS: v1.address,
      TREADLE_TASK_QUEUE: taskQueue,
      TREADLE_BLOB_DIR: v1.blobs.dir,
      TREADLE_DEPLOYMENT: name,
      TREADLE_BUILD_ID: 'p1',
    },
  });
  try {
    expect(worker.log()).toContain(`, deployment ${name} build p1 (work items pinned)`);
    // The server knows a build once its worker's first poll has reached it, a moment after the ready line.
    const run = await eventually(async () => {
      const attempt = await runTreadle(v1, ['deployments', 'set-current', 'p1', '--deployment', name]);
      return attempt.code === 0 ? attempt : undefined;
    }, 30_000);
    expect(run.stdout).toContain(`${name}: build p1 is current (before: none)`);
    const client = new TreadleClient(v1.temporal, { taskQueue, blobs: v1.blobs });
    const id = v1.id('env');
    await client.start(pipeline('versioned-env').stage('draft', 'scripted'), {}, { id });
    expect((await client.result(id)).status).toBe('completed');
    expect(await tasksOf(v1.temporal, id)).toMatchObject({ builds: ['p1'], pinnedTo: 'p1', behavior: PINNED });
  } finally {
    await worker.stop();
  }
});

it('treadle worker with a build id but no deployment stops with exit 2 before connecting', async () => {
  const run = await runCli(['worker'], {
    env: { ...process.env, TREADLE_BUILD_ID: 'v3', TREADLE_DEPLOYMENT: '', TEMPORAL_ADDRESS: '127.0.0.1:1' },
    timeoutMs: 30_000,
  });
  expect(run.code).toBe(2);
  expect(run.stderr).toContain('a build id (TREADLE_BUILD_ID=v3) needs the deployment it belongs to');
});

it('says so when the server has Worker Deployment Versioning off', async () => {
  const port = await freePort();
  const server = await startDevServer({
    port,
    dbFile: path.join(process.env.TREADLE_TEST_DIR ?? os.tmpdir(), `no-versioning-${port}.sqlite`),
    headless: true,
    allowDownload: false,
    dynamicConfig: { 'system.enableDeploymentVersions': false },
  });
  try {
    const run = await runCli(['deployments', '--deployment', deployment], {
      env: { ...process.env, TEMPORAL_ADDRESS: server.address },
      timeoutMs: 30_000,
    });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      'this Temporal server does not offer Worker Deployment Versioning (Worker Deployment Versions are disabled on this namespace.)',
    );
  } finally {
    await server.stop();
  }
});
