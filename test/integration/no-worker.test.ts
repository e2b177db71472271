/**
 * No worker, no answer (issue 26 §4): on a task queue nobody polls, commands that need a worker say so within
 * 5 s instead of hanging half a minute on "Failed to query Workflow". `status` still prints what Temporal
 * knows and exits 0; `watch`, `usage` and `review` exit 1 with the message. The < 5 s bounds are part of the
 * behaviour under test, not a benchmark.
 */
import { TreadleClient } from '../../src/client';
import { startHarness, type Harness } from '../support/harness';
import { runTreadle, type CliRun } from '../support/cli';

let h: Harness;
let elsewhere: TreadleClient;
const queue = `nobody-polls-${Math.random().toString(36).slice(2, 8)}`;

beforeAll(async () => {
  h = await startHarness();
  // A client whose items land on a queue no worker polls.
  elsewhere = await TreadleClient.connect({ address: h.address, taskQueue: queue, blobs: h.blobs });
});
afterAll(async () => {
  await elsewhere?.close();
  await h?.shutdown();
});

// Not the default queue: `treadle worker` alone would poll another one.
const message = `no worker is polling task queue ${queue}; start one with \`TREADLE_TASK_QUEUE=${queue} treadle worker\``;

/** Runs `treadle …` and asserts it answered within 5 s. */
async function timed(args: string[]): Promise<CliRun> {
  const started = Date.now();
  const run = await runTreadle(h, args);
  expect(Date.now() - started).toBeLessThan(5_000);
  return run;
}

test('status prints what visibility knows and exits 0; watch, usage and review exit 1 with the message, each within 5 s', async () => {
  const id = h.id('no-worker');
  await elsewhere.start({ name: 'unserved', stages: [{ name: 'only', run: 'scripted' }] }, null, { id });

  const status = await timed(['status', id]);
  expect(status.code).toBe(0);
  expect(status.stdout).toContain(`${id} · pipeline unserved · running (Temporal: RUNNING)`);
  expect(status.stderr).toBe(`treadle: ${message}\n`);

  for (const args of [
    ['watch', id],
    ['usage', id],
    ['review', id, 'only', '--approve'],
  ]) {
    const run = await timed(args);
    expect({ args, code: run.code, stderr: run.stderr }).toEqual({ args, code: 1, stderr: `treadle: ${message}\n` });
  }
}, 60_000);

test('the SDK says the same: getState rejects with a no_worker TreadleError within 5 s', async () => {
  const id = h.id('no-worker-sdk');
  await elsewhere.start({ name: 'unserved', stages: [{ name: 'only', run: 'scripted' }] }, null, { id });
  const started = Date.now();
  await expect(elsewhere.getState(id)).rejects.toMatchObject({ code: 'no_worker', message });
  expect(Date.now() - started).toBeLessThan(5_000);
  // A closed item's result needs no worker: status shows it.
  await h.temporal.workflow.getHandle(id).terminate('gone');
  const status = await timed(['status', id]);
  expect({ code: status.code, stderr: status.stderr }).toEqual({ code: 0, stderr: `treadle: ${message}\n` });
  expect(status.stdout).toMatch(/\(Temporal: TERMINATED\)\nfailure: .*gone/);
}, 60_000);
