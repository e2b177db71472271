/**
 * The worker's Prometheus endpoint (docs/deploy.md, "Monitoring"): `treadle worker` with
 * TREADLE_METRICS_PROMETHEUS=127.0.0.1:<port> serves the Temporal SDK's metrics at /metrics, says where on its
 * start line, and they count the work it does (an item run with `run --wait` shows in the workflow and activity
 * schedule-to-start histograms). A setting that cannot work (a host name, a port already taken) is one line
 * naming it and exit code 2, before the worker connects. Before this setting `treadle worker` served no metrics.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import path from 'node:path';
import { runCli, TREADLE_BIN, type CliRun } from '../support/cli';
import { testAddress } from '../support/harness';
import { stopProcess } from '../support/processes';

let root: string;
let env: NodeJS.ProcessEnv;
let worker: ChildProcess | undefined;
let workerLog = '';
let address: string;

/** `treadle …` in the test's folder with the shared environment (and `extra` over it). */
function treadle(args: string[], extra: NodeJS.ProcessEnv = {}): Promise<CliRun> {
  return runCli(args, { cwd: root, env: { ...env, ...extra }, timeoutMs: 90_000 });
}

/** A port nothing listens on now (the kernel's pick, released at once). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** The samples of one metric (any labels) in Prometheus' text format, summed. */
function total(scrape: string, metric: string): number {
  const line = new RegExp(`^${metric}(\\{[^}]*\\})? (\\S+)$`, 'gm');
  return [...scrape.matchAll(line)].reduce((sum, m) => sum + Number(m[2]), 0);
}

beforeAll(async () => {
  root = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'worker-metrics-'));
  const settings = /^(TREADLE_|TEMPORAL_|ANTHROPIC_|OTEL_|CLAUDE_)/;
  address = `127.0.0.1:${await freePort()}`;
  env = {
    ...Object.fromEntries(Object.entries(process.env).filter(([name]) => !settings.test(name))),
    TEMPORAL_ADDRESS: testAddress(),
    TREADLE_TASK_QUEUE: `metrics-${Math.random().toString(36).slice(2, 10)}`,
    TREADLE_HOME: path.join(root, 'home'),
    TREADLE_AGENT: 'scripted',
  };
  worker = spawn(process.execPath, [TREADLE_BIN, 'worker'], {
    cwd: root,
    env: { ...env, TREADLE_METRICS_PROMETHEUS: address },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the worker did not get ready in 150 s:\n${workerLog}`)), 150_000);
    const onData = (d: Buffer): void => {
      workerLog += d.toString();
      if (workerLog.includes('treadle worker: ready\n')) {
        clearTimeout(timer);
        resolve();
      }
    };
    worker!.stdout!.on('data', onData);
    worker!.stderr!.on('data', onData);
    worker!.once('exit', () => {
      clearTimeout(timer);
      reject(new Error(`the worker exited:\n${workerLog}`));
    });
  });
}, 180_000);

afterAll(async () => {
  if (worker) await stopProcess(worker);
}, 60_000);

it('serves the SDK metrics of a running worker at /metrics, counting the work it does', async () => {
  expect(workerLog).toContain(`, metrics on http://${address}/metrics`);
  const idle = await (await fetch(`http://${address}/metrics`)).text();
  // Pollers and task slots are there as soon as the worker polls its queue.
  const queue = `task_queue="${env.TREADLE_TASK_QUEUE}"`;
  expect(idle).toMatch(new RegExp(`^temporal_num_pollers\\{[^}]*${queue}[^}]*\\} [1-9]`, 'm'));
  expect(idle).toMatch(new RegExp(`^temporal_worker_task_slots_available\\{[^}]*${queue}`, 'm'));

  const pipeline = path.join(root, 'one-stage.yaml');
  writeFileSync(pipeline, 'name: one-stage\nstages:\n  - name: only\n    run: scripted\n');
  const run = await treadle(['run', '-f', pipeline, '--wait']);
  expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: '' });

  const busy = await (await fetch(`http://${address}/metrics`)).text();
  expect(total(busy, 'temporal_workflow_task_schedule_to_start_latency_count')).toBeGreaterThan(0);
  expect(total(busy, 'temporal_activity_schedule_to_start_latency_count')).toBeGreaterThan(0);
}, 120_000);

it('refuses an address that is not ip:port, naming the setting, with exit code 2', async () => {
  const run = await treadle(['worker'], { TREADLE_METRICS_PROMETHEUS: 'localhost:9464' });
  expect({ code: run.code, stderr: run.stderr }).toEqual({
    code: 2,
    stderr:
      'treadle: TREADLE_METRICS_PROMETHEUS: localhost:9464 is not an ip:port to listen on ' +
      '(e.g. 127.0.0.1:9464, 0.0.0.0:9464 or [::1]:9464)\n',
  });
}, 60_000);

it('says so when the port is taken, with exit code 2', async () => {
  const taken: Server = createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  const busy = `127.0.0.1:${(taken.address() as { port: number }).port}`;
  try {
    const run = await treadle(['worker'], { TREADLE_METRICS_PROMETHEUS: busy });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(
      new RegExp(`^treadle: TREADLE_METRICS_PROMETHEUS: cannot serve metrics on ${busy}: .*Address already in use`),
    );
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
  } finally {
    await new Promise((resolve) => taken.close(resolve));
  }
}, 60_000);
