/**
 * Issue 26 §2, one rule per task queue: `treadle worker` (the core queue, what Treadle ships) beside a
 * custom worker process (the same shipped set on the core queue, plus `summarize` on its implementations
 * queue), as docs/stages/code.md's recipe runs them. Cases: 50 items of a pipeline whose stage names `summarize` and its
 * `task_queue` all complete, whichever worker takes their workflow tasks (before, both polled `treadle` with
 * different registrations and items failed at random: "the worker refused pipeline summarize", "Activity
 * function summarize is not registered on this Worker"); an approval stage on that queue requests and executes
 * the custom worker's own action type; the custom worker with `summarize` on the core queue
 * refuses to start, saying what to do; `run` and `validate` of the pipeline without a `task_queue` list the
 * problem and name the fix.
 */
import { Client, Connection } from '@temporalio/client';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { TreadleClient } from '../../src/client';
import { FileBlobStore } from '../../src/storage/blob-store';
import { runCommand, TREADLE_BIN as BIN, type CliRun } from '../support/cli';
import { eventually, testAddress } from '../support/harness';
import { pollerCount, stopProcess } from '../support/processes';
import { startTreadleWorker, type TreadleWorkerProcess } from '../support/worker-process';

const SUMMARIES_WORKER = path.join(__dirname, '..', 'fixtures', 'queues', 'summaries-worker.js');
const ITEMS = 50;

let root: string;
let env: NodeJS.ProcessEnv;
const workers: { child: ChildProcess; log: string }[] = [];
const treadleWorkers: TreadleWorkerProcess[] = [];
let connection: Connection;
let client: TreadleClient;
const suffix = Math.random().toString(36).slice(2, 10);
const core = `mixed-${suffix}`;
const summaries = `summaries-${suffix}`;

/** A pipeline whose one stage runs `summarize`, on the queue named (or none). */
function summarizePipeline(queue?: string): Record<string, unknown> {
  return {
    name: 'summaries',
    stages: [{ name: 'summarize', run: 'summarize', ...(queue ? { task_queue: queue } : {}) }],
  };
}

/** Runs `node args…` to its end with the shared environment (and `extra` over it). */
function runToEnd(args: string[], extra: NodeJS.ProcessEnv = {}): Promise<CliRun> {
  return runCommand(process.execPath, args, { cwd: root, env: { ...env, ...extra }, timeoutMs: 90_000 });
}

function startWorker(args: string[], extra: NodeJS.ProcessEnv = {}): { child: ChildProcess; log: string } {
  const child = spawn(process.execPath, args, {
    cwd: root,
    env: { ...env, ...extra },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const worker = { child, log: '' };
  child.stdout!.on('data', (d: Buffer) => (worker.log += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (worker.log += d.toString()));
  workers.push(worker);
  return worker;
}

beforeAll(async () => {
  root = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'mixed-workers-'));
  const settings = /^(TREADLE_|TEMPORAL_|ANTHROPIC_|OTEL_|CLAUDE_)/;
  env = {
    ...Object.fromEntries(Object.entries(process.env).filter(([name]) => !settings.test(name))),
    TEMPORAL_ADDRESS: testAddress(),
    TREADLE_TASK_QUEUE: core,
    TREADLE_HOME: path.join(root, 'home'),
    TREADLE_AGENT: 'scripted',
  };
  connection = await Connection.connect({ address: testAddress() });
  client = new TreadleClient(new Client({ connection }), {
    taskQueue: core,
    blobs: new FileBlobStore(path.join(root, 'home', 'blobs')),
  });
}, 60_000);

afterAll(async () => {
  for (const { child } of workers) await stopProcess(child);
  for (const worker of treadleWorkers) await worker.stop();
  await connection?.close();
}, 60_000);

it(`runs ${ITEMS} items with a custom implementation beside treadle worker, with no failure`, async () => {
  treadleWorkers.push(await startTreadleWorker({ env, cwd: root }));
  const custom = startWorker([SUMMARIES_WORKER], {
    SUMMARIES_QUEUE: summaries,
    TREADLE_TEST_BUNDLE: process.env.TREADLE_TEST_BUNDLE,
  });
  await eventually(
    async () => {
      if (custom.child.exitCode !== null) throw new Error(`the custom worker exited:\n${custom.log}`);
      return (await pollerCount(connection, core, 1)) >= 2 && (await pollerCount(connection, summaries, 2)) >= 1
        ? true
        : undefined;
    },
    150_000,
    'both workers polling',
  );
  const ids = Array.from({ length: ITEMS }, (_, i) => `summaries-${suffix}-${i}`);
  await Promise.all(
    ids.map((id, i) => client.start(summarizePipeline(summaries), { text: `Item ${i} is here. More text.` }, { id })),
  );
  const results = await Promise.all(ids.map((id) => client.result(id)));
  const failed = results.filter((r) => r.status !== 'completed');
  expect(failed.map((r) => `${r.id}: ${r.error ?? r.failedStages.join(', ')}`)).toEqual([]);
  expect(results.map((r) => r.artefacts.summarize)).toHaveLength(ITEMS);
}, 150_000);

it("requests and executes an action type of its own on the stage's queue", async () => {
  const id = `notes-${suffix}`;
  const spec = {
    name: 'notes',
    stages: [
      { name: 'draft', run: 'scripted' },
      {
        name: 'approve',
        type: 'approval',
        depends_on: ['draft'],
        task_queue: summaries,
        with: { action: 'post_note', items: 'notes' },
      },
    ],
  };
  await client.start(spec, { script: { draft: [{ output: { notes: [{ title: 'ship it' }] } }] } }, { id });
  const [request] = await eventually(
    async () => {
      const listed = (await client.listApprovals()).filter((r) => r.itemId === id);
      return listed.length === 1 ? listed : undefined;
    },
    30_000,
    'the request',
  );
  expect(request).toMatchObject({ actionType: 'post_note', summary: 'note ship it', status: 'pending' });
  await client.decideApproval(request!.id, 'approve', { by: 'test' });
  expect(await client.result(id)).toMatchObject({ status: 'completed' });
}, 60_000);

it('refuses to start a worker that adds implementations to the core queue, saying what to do', async () => {
  const run = await runToEnd([SUMMARIES_WORKER], { TREADLE_TEST_BUNDLE: process.env.TREADLE_TEST_BUNDLE });
  expect(run.code).toBe(2);
  expect(run.stderr).toContain(
    `summaries worker: the core task queue ${core} runs only what Treadle ships, so every worker on it registers the same; this worker adds stage summarize, action type post_note. Give those implementations a queue of their own: runWorker({ registry, implementationsQueue: 'my-queue' })`,
  );
}, 60_000);

it('lists an implementation Treadle does not ship without a task_queue as a problem, and accepts it with one', async () => {
  const without = path.join(root, 'without-queue.json');
  writeFileSync(without, JSON.stringify(summarizePipeline()));
  const hint =
    'Implementations Treadle does not ship run on a queue of their own: name the task_queue their worker polls';
  const run = await runToEnd([BIN, 'run', '--file', without]);
  expect(run.code).toBe(2);
  expect(run.stderr).toContain(
    'pipeline summaries is invalid:\n  - stage summarize: unknown stage implementation "summarize"',
  );
  expect(run.stderr).toContain(hint);
  const validate = await runToEnd([BIN, 'validate', without]);
  expect(validate.code).toBe(1);
  expect(validate.stderr).toContain(hint);

  const withQueue = path.join(root, 'with-queue.json');
  writeFileSync(withQueue, JSON.stringify(summarizePipeline(summaries)));
  expect(await runToEnd([BIN, 'validate', withQueue])).toEqual({
    code: 0,
    stdout: `${withQueue}: pipeline summaries is valid (1 stage)\n`,
    stderr: '',
  });
}, 60_000);
