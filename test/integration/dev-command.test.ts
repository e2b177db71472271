/**
 * `treadle dev` and `treadle demo` as users run them: each starts its own real dev server (SQLite file,
 * Web UI) and worker, serves work items, persists them across restarts, and shuts down cleanly on Ctrl-C.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { TreadleClient } from '../../src/client';
import { eventually } from '../support/harness';
import { resolveTemporalCli } from '../../src/server/temporal-cli';
import { freePort } from '../../src/server/dev-server';

const BIN = path.join(__dirname, '..', '..', 'bin', 'treadle.js');
const dir = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'dev-'));


interface Spawned {
  child: ChildProcess;
  output: () => { stdout: string; stderr: string };
  exited: Promise<number | null>;
}

function start(args: string[], env: Record<string, string>): Spawned {
  const { TEMPORAL_ADDRESS: _ignored, ...rest } = process.env;
  const child = spawn(process.execPath, [BIN, ...args], { env: { ...rest, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, output: () => ({ stdout, stderr }), exited };
}

async function clientFor(address: string, taskQueue: string): Promise<{ client: TreadleClient; close: () => Promise<void> }> {
  const connection = await Connection.connect({ address });
  return { client: new TreadleClient(new Client({ connection }), { taskQueue }), close: () => connection.close() };
}

const PIPELINE = { name: 'dev-check', stages: [{ name: 'a', run: 'scripted' }, { name: 'b', run: 'scripted', depends_on: ['a'], review_policy: 'always' }] };

it('treadle dev serves work items with its own server and worker, persists them, and stops on Ctrl-C', async () => {
  const [port, uiPort] = [await freePort(), await freePort()];
  const db = path.join(dir, 'dev.sqlite');
  const env = { TREADLE_TASK_QUEUE: 'dev-test', TREADLE_BLOB_DIR: path.join(dir, 'blobs') };
  const args = ['dev', '--port', String(port), '--ui-port', String(uiPort), '--db', db];
  const first = start(args, env);
  await eventually(async () => (first.output().stderr.includes('Ready.') ? true : undefined), 60_000, `treadle dev to be ready: ${first.output().stderr}`);
  expect(first.output().stderr).toContain(`Temporal dev server: 127.0.0.1:${port} (SQLite ${db}`);
  expect(first.output().stderr).toContain(`Web UI: http://127.0.0.1:${uiPort}/namespaces/default/workflows`);
  const ui = await eventually(async () => {
    const response = await fetch(`http://127.0.0.1:${uiPort}/`).catch(() => undefined);
    return response?.ok ? response : undefined;
  }, 30_000, 'the Web UI');
  expect(ui.status).toBe(200);

  const { client, close } = await clientFor(`127.0.0.1:${port}`, 'dev-test');
  await client.start(PIPELINE, null, { id: 'persisted-item' });
  await eventually(async () => ((await client.getState('persisted-item')).status === 'waiting_review' ? true : undefined), 30_000, 'the review');
  await close();

  first.child.kill('SIGINT');
  expect(await first.exited).toBe(0);
  expect(first.output().stderr).toContain('Stopped.');

  // A restart on the same SQLite file finds the waiting item, and the review still works.
  const second = start(args, env);
  await eventually(async () => (second.output().stderr.includes('Ready.') ? true : undefined), 60_000, 'the restart');
  const again = await clientFor(`127.0.0.1:${port}`, 'dev-test');
  expect((await again.client.getState('persisted-item')).pendingReviews.map((r) => r.stage)).toEqual(['b']);
  await again.client.approve('persisted-item', 'b');
  expect((await again.client.result('persisted-item')).status).toBe('completed');
  await again.close();
  second.child.kill('SIGTERM');
  expect(await second.exited).toBe(0);
});

it('treadle demo runs the review demo to the end when reviews are answered from elsewhere', async () => {
  const [port, uiPort] = [await freePort(), await freePort()];
  const demo = start(['demo', '--port', String(port), '--ui-port', String(uiPort), '--db', path.join(dir, 'demo.sqlite'), '--exit'], {
    TREADLE_TASK_QUEUE: 'demo-test',
    TREADLE_BLOB_DIR: path.join(dir, 'demo-blobs'),
  });
  const id = await eventually(async () => /Started work item (\S+) on pipeline review-demo/.exec(demo.output().stderr)?.[1], 60_000, 'the demo item');
  const { client, close } = await clientFor(`127.0.0.1:${port}`, 'demo-test');
  for (const stage of ['draft', 'publish']) {
    await eventually(async () => ((await client.getState(id)).pendingReviews.some((r) => r.stage === stage) ? true : undefined), 30_000, `${stage} review`);
    await client.approve(id, stage, { reviewer: 'tester' });
  }
  await close();
  expect(await demo.exited).toBe(0);
  const { stdout } = demo.output();
  expect(stdout).toMatch(/RetryAttempt\s+draft attempt 3\/3 because: claims lack sources/);
  expect(stdout).toMatch(/Escalated\s+draft escalated to review/);
  expect(stdout).toMatch(/ItemCompleted\s+work item completed/);
  expect(stdout).toContain(`${id} · pipeline review-demo · completed`);
});

it('treadle dev reuses a plain Temporal server already on the port and registers the search attributes it lacks', async () => {
  const port = await freePort();
  const { binary } = await resolveTemporalCli({ allowBuild: false });
  const plain = spawn(binary!.path, ['server', 'start-dev', '--headless', '--ip', '127.0.0.1', '--port', String(port), '--log-level', 'error'], { stdio: 'ignore' });
  try {
    const address = `127.0.0.1:${port}`;
    await eventually(async () => {
      const connection = await Connection.connect({ address, connectTimeout: 500 });
      await connection.close();
      return true;
    }, 30_000, 'the plain server');
    const dev = start(['dev', '--port', String(port)], { TREADLE_TASK_QUEUE: 'reuse-test', TREADLE_BLOB_DIR: path.join(dir, 'reuse-blobs') });
    await eventually(async () => (dev.output().stderr.includes('Ready.') ? true : undefined), 60_000, `treadle dev on the plain server: ${dev.output().stderr}`);
    expect(dev.output().stderr).toContain(`A Temporal server already answers at ${address}; using it.`);
    expect(dev.output().stderr).toContain('Registered search attributes TreadlePipeline, TreadleStatus, TreadlePendingReviews in namespace default.');
    const { client, close } = await clientFor(address, 'reuse-test');
    await client.start(PIPELINE, null, { id: 'on-plain-server' });
    const listed = await eventually(async () => {
      const reviews = await client.listPendingReviews();
      return reviews.length ? reviews : undefined;
    }, 30_000, 'the review to be listed');
    expect(listed.map((r) => [r.itemId, r.stage])).toEqual([['on-plain-server', 'b']]);
    await close();
    dev.child.kill('SIGINT');
    expect(await dev.exited).toBe(0);
  } finally {
    plain.kill('SIGKILL');
  }
});
