/**
 * `treadle dev` and `treadle demo` as users run them: each starts its own real dev server (SQLite file,
 * Web UI) and worker, serves work items, persists them across restarts, and shuts down cleanly on Ctrl-C.
 * Each boot runs a server and bundles the workflow code with webpack, so the timeouts allow for a loaded
 * machine; whatever a test started is killed after it, passed or failed.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { TreadleClient } from '../../src/client';
import { eventually } from '../support/harness';
import { resolveTemporalCli } from '../../src/server/temporal-cli';
import { freePort } from '../../src/server/dev-server';
import { temporalAnswers } from '../../src/server/probes';

const BIN = path.join(__dirname, '..', '..', 'bin', 'treadle.js');
const dir = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'dev-'));

/** One `treadle dev`/`demo` boot: server start plus a webpack bundle of the workflows, on a shared 2-core box. */
const BOOT_MS = 120_000;
/** A test with one boot, and one with two (a restart). */
const ONE_BOOT_TEST_MS = BOOT_MS + 90_000;
const TWO_BOOT_TEST_MS = 2 * BOOT_MS + 90_000;
/** How long a process has to exit after Ctrl-C or SIGTERM (worker drain plus a graceful server stop). */
const STOP_MS = 30_000;

/** Every process a test started; afterEach kills the ones still running. */
const running = new Set<ChildProcess>();

afterEach(async () => {
  const left = [...running].filter((child) => child.exitCode === null && child.signalCode === null);
  running.clear();
  // SIGKILL is enough: a killed `treadle` takes its dev server with it (the server's watchdog stops it).
  await Promise.all(
    left.map(
      (child) =>
        new Promise<void>((resolve) => {
          child.once('exit', () => resolve());
          child.kill('SIGKILL');
        }),
    ),
  );
});

interface Spawned {
  child: ChildProcess;
  output: () => { stdout: string; stderr: string };
  exited: Promise<number | null>;
}

function start(args: string[], env: Record<string, string>): Spawned {
  const { TEMPORAL_ADDRESS: _ignored, ...rest } = process.env;
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { ...rest, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, output: () => ({ stdout, stderr }), exited };
}

/** Resolves once `treadle dev` printed "Ready."; fails with its output if it exits or takes too long. */
function ready(spawned: Spawned, what: string): Promise<true> {
  return eventually(
    async () => {
      if (spawned.child.exitCode !== null)
        throw new Error(`it exited with code ${spawned.child.exitCode}: ${spawned.output().stderr}`);
      return spawned.output().stderr.includes('Ready.') ? true : undefined;
    },
    BOOT_MS,
    what,
  );
}

/** The exit code within {@link STOP_MS} of sending `signal` (or, without one, of now). */
async function stopWith(spawned: Spawned, signal?: NodeJS.Signals): Promise<number | null> {
  if (signal) spawned.child.kill(signal);
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new Error(
            `still running ${STOP_MS / 1000}s after ${signal ?? 'it should have finished'}: ${spawned.output().stderr}`,
          ),
        ),
      STOP_MS,
    );
  });
  try {
    return await Promise.race([spawned.exited, late]);
  } finally {
    clearTimeout(timer);
  }
}

async function clientFor(
  address: string,
  taskQueue: string,
): Promise<{ client: TreadleClient; close: () => Promise<void> }> {
  const connection = await Connection.connect({ address });
  return { client: new TreadleClient(new Client({ connection }), { taskQueue }), close: () => connection.close() };
}

const PIPELINE = {
  name: 'dev-check',
  stages: [
    { name: 'a', run: 'scripted' },
    { name: 'b', run: 'scripted', depends_on: ['a'], review_policy: 'always' },
  ],
};

it(
  'treadle dev serves work items with its own server and worker, persists them, and stops on Ctrl-C',
  async () => {
    const [port, uiPort] = [await freePort(), await freePort()];
    const db = path.join(dir, 'dev.sqlite');
    const env = { TREADLE_TASK_QUEUE: 'dev-test', TREADLE_BLOB_DIR: path.join(dir, 'blobs') };
    const args = ['dev', '--port', String(port), '--ui-port', String(uiPort), '--db', db];
    const first = start(args, env);
    await ready(first, 'treadle dev to be ready');
    expect(first.output().stderr).toContain(`Temporal dev server: 127.0.0.1:${port} (SQLite ${db}`);
    expect(first.output().stderr).toContain(`Web UI: http://127.0.0.1:${uiPort}/namespaces/default/workflows`);
    const ui = await eventually(
      async () => {
        const response = await fetch(`http://127.0.0.1:${uiPort}/`).catch(() => undefined);
        return response?.ok ? response : undefined;
      },
      30_000,
      'the Web UI',
    );
    expect(ui.status).toBe(200);

    const { client, close } = await clientFor(`127.0.0.1:${port}`, 'dev-test');
    await client.start(PIPELINE, null, { id: 'persisted-item' });
    await eventually(
      async () => ((await client.getState('persisted-item')).status === 'waiting_review' ? true : undefined),
      30_000,
      'the review',
    );
    await close();

    expect(await stopWith(first, 'SIGINT')).toBe(0);
    expect(first.output().stderr).toContain('Stopped.');

    // A restart on the same SQLite file finds the waiting item, and the review still works.
    const second = start(args, env);
    await ready(second, 'the restart');
    const again = await clientFor(`127.0.0.1:${port}`, 'dev-test');
    expect((await again.client.getState('persisted-item')).pendingReviews.map((r) => r.stage)).toEqual(['b']);
    await again.client.approve('persisted-item', 'b');
    expect((await again.client.result('persisted-item')).status).toBe('completed');
    await again.close();
    expect(await stopWith(second, 'SIGTERM')).toBe(0);
  },
  TWO_BOOT_TEST_MS,
);

it.each([
  ['completed', 0, 'ItemCompleted\\s+work item completed'],
  ['failed', 1, 'ItemFailed\\s+work item failed'],
] as const)(
  'treadle demo --exit runs the review demo to the end when reviews are answered from elsewhere: %s, exit %i',
  async (outcome, code, lastEvent) => {
    const [port, uiPort] = [await freePort(), await freePort()];
    const demo = start(
      [
        'demo',
        '--port',
        String(port),
        '--ui-port',
        String(uiPort),
        '--db',
        path.join(dir, `demo-${outcome}.sqlite`),
        '--exit',
      ],
      {
        TREADLE_TASK_QUEUE: 'demo-test',
        TREADLE_BLOB_DIR: path.join(dir, 'demo-blobs'),
      },
    );
    const id = await eventually(
      async () => {
        if (demo.child.exitCode !== null)
          throw new Error(`it exited with code ${demo.child.exitCode}: ${demo.output().stderr}`);
        return /Started work item (\S+) on pipeline review-demo/.exec(demo.output().stderr)?.[1];
      },
      BOOT_MS,
      'the demo item',
    );
    const { client, close } = await clientFor(`127.0.0.1:${port}`, 'demo-test');
    for (const stage of ['draft', 'publish']) {
      await eventually(
        async () => ((await client.getState(id)).pendingReviews.some((r) => r.stage === stage) ? true : undefined),
        30_000,
        `${stage} review`,
      );
      // The sign-off decides the outcome: approved, the item completes; rejected, it fails.
      if (stage === 'publish' && outcome === 'failed') await client.reject(id, stage, 'not this week');
      else await client.approve(id, stage, { reviewer: 'tester' });
    }
    await close();
    // --exit: the demo stops its worker and server by itself once the item ends, with its exit code.
    expect(await stopWith(demo)).toBe(code);
    const { stdout } = demo.output();
    expect(stdout).toMatch(/RetryAttempt\s+draft attempt 3\/3 because: claims lack sources/);
    expect(stdout).toMatch(/Escalated\s+draft escalated to review/);
    expect(stdout).toMatch(new RegExp(lastEvent));
    expect(stdout).toContain(`${id} · pipeline review-demo · ${outcome}`);
  },
  ONE_BOOT_TEST_MS,
);

it(
  'treadle dev reuses a plain Temporal server already on the port and registers the search attributes it lacks',
  async () => {
    const port = await freePort();
    const { binary } = await resolveTemporalCli({ allowBuild: false });
    const plain = spawn(
      binary!.path,
      ['server', 'start-dev', '--headless', '--ip', '127.0.0.1', '--port', String(port), '--log-level', 'error'],
      { stdio: 'ignore' },
    );
    running.add(plain);
    const address = `127.0.0.1:${port}`;
    // temporalAnswers, not Connection.connect: failed connects in this process would leave the address's
    // shared gRPC subchannel in reconnect backoff for the connections below (see src/server/probes.ts).
    await eventually(async () => ((await temporalAnswers(address)) ? true : undefined), 30_000, 'the plain server');
    const dev = start(['dev', '--port', String(port)], {
      TREADLE_TASK_QUEUE: 'reuse-test',
      TREADLE_BLOB_DIR: path.join(dir, 'reuse-blobs'),
    });
    await ready(dev, 'treadle dev on the plain server');
    expect(dev.output().stderr).toContain(`A Temporal server already answers at ${address}; using it.`);
    expect(dev.output().stderr).toContain(
      'Registered search attributes TreadlePipeline, TreadleStatus, TreadlePendingReviews, TreadleApprovals, TreadleCorrelationId, TreadleDecisionAt, TreadleForkOf, TreadleEvalRun in namespace default.',
    );
    const { client, close } = await clientFor(address, 'reuse-test');
    await client.start(PIPELINE, null, { id: 'on-plain-server' });
    const listed = await eventually(
      async () => {
        const reviews = await client.listPendingReviews();
        return reviews.length ? reviews : undefined;
      },
      30_000,
      'the review to be listed',
    );
    expect(listed.map((r) => [r.itemId, r.stage])).toEqual([['on-plain-server', 'b']]);
    await close();
    expect(await stopWith(dev, 'SIGINT')).toBe(0);
  },
  ONE_BOOT_TEST_MS,
);
