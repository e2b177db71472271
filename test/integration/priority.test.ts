/**
 * Priority and fairness of task dispatch on a real dev server (started, as every Treadle dev server, with
 * `matching.useNewMatcher` and `matching.enableFairness`), on one worker with a single activity slot. Temporal
 * orders each task queue partition on its own, and tasks go to one of 4 at random, so the order of a few dozen
 * tasks is the whole queue's only with one write partition: this file starts its own server with
 * `matching.numTaskqueueWritePartitions` 1 (docs/deploy.md, "Priority and fairness on the server"):
 * - an urgent item (priority 1) started after a backlog of priority-3 items is dispatched before that backlog
 *   drains;
 * - two tenants of equal weight, the second queued after the first's whole backlog, share the slot: the second
 *   gets a fair part of the dispatches while it has work, not what is left after the first;
 * - what an item starts inherits its priority and fairness key (a fan-out's elements' activities see them), and
 *   `treadle status` shows them;
 * - bad flags and a spec with a bad priority are refused before anything starts, naming the problem (exit 2).
 * The order asserted is the order the stage activities started, never wall time.
 */
import { Context } from '@temporalio/activity';
import type { Priority } from '@temporalio/common';
import { mkdtempSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Registry } from '../../src/activities/registry';
import { pipeline } from '../../src/kinds/builder';
import { freePort, startDevServer, type DevServer } from '../../src/server/dev-server';
import { defaultRegistry } from '../../src/worker';
import { EXIT } from '../../src/cli/exit-codes';
import { startHarness, type Harness } from '../support/harness';
import { runTreadle, showRun } from '../support/cli';

/** The stage activities that ran, in the order the worker got them, with the priority Temporal gave each. */
const dispatched: { itemId: string; priority: Priority | undefined }[] = [];

/** Holds the worker's only activity slot while a backlog is queued behind it. */
let releaseHold: () => void = () => undefined;
let holding: Promise<void> = Promise.resolve();
let holdStarted: () => void = () => undefined;

let server: DevServer;
let h: Harness;
beforeAll(async () => {
  server = await startDevServer({
    port: await freePort(),
    dbFile: path.join(
      mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'priority-server-')),
      'temporal.sqlite',
    ),
    headless: true,
    allowDownload: false,
    dynamicConfig: { 'matching.numTaskqueueWritePartitions': 1 },
    progress: () => undefined,
  });
  const registry = defaultRegistry().merge(
    new Registry()
      .stage('hold', async () => {
        holdStarted();
        await holding;
        return { outcome: 'completed' };
      })
      .stage('record', async (ctx) => {
        dispatched.push({ itemId: ctx.itemId, priority: Context.current().info.priority });
        return { outcome: 'completed', artefact: { item: ctx.itemId } };
      })
      .stage('list', async () => ({ outcome: 'completed', artefact: { xs: ['a', 'b', 'c'] } })),
  );
  // One activity slot: every stage activity waits for it, in the order the server dispatches them.
  h = await startHarness({ registry, address: server.address, worker: { maxConcurrentActivityTaskExecutions: 1 } });
}, 120_000);
afterAll(async () => {
  releaseHold();
  await h?.shutdown();
  await server?.stop();
});

const recordOnce = (name: string) => pipeline(name).stage('s', 'record');

/** Starts an item whose stage holds the only activity slot, and resolves once it does. */
async function holdTheSlot(): Promise<{ id: string }> {
  holding = new Promise((resolve) => (releaseHold = resolve));
  const started = new Promise<void>((resolve) => (holdStarted = resolve));
  const id = h.id('hold');
  await h.client.start(pipeline(`hold-${h.taskQueue}`).stage('s', 'hold'), null, { id });
  await started;
  return { id };
}

/** Resolves once every item has an activity scheduled (queued behind the held slot), so the backlog is real. */
async function untilQueued(ids: string[]): Promise<void> {
  for (const id of ids) {
    for (;;) {
      const description = await h.temporal.workflow.getHandle(id).describe();
      if ((description.raw.pendingActivities ?? []).length > 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

it('dispatches an urgent item (priority 1) before a backlog of priority-3 items started before it', async () => {
  dispatched.length = 0;
  const hold = await holdTheSlot();
  const backlog = Array.from({ length: 16 }, () => h.id('backlog'));
  for (const id of backlog) await h.client.start(recordOnce(`backlog-${h.taskQueue}`), null, { id });
  await untilQueued(backlog);
  const urgent = h.id('urgent');
  await h.client.start(recordOnce(`urgent-${h.taskQueue}`), null, { id: urgent, priority: 1 });
  await untilQueued([urgent]);
  releaseHold();
  for (const id of [hold.id, ...backlog, urgent]) expect((await h.client.result(id)).status).toBe('completed');

  const order = dispatched.map((d) => d.itemId);
  expect(order).toHaveLength(backlog.length + 1);
  // First in, first out would run it last; by priority it runs first.
  expect(order.indexOf(urgent)).toBe(0);
  expect(dispatched.find((d) => d.itemId === urgent)!.priority).toMatchObject({ priorityKey: 1 });
  expect(dispatched.find((d) => d.itemId === backlog[0])!.priority?.priorityKey ?? 0).not.toBe(1);
}, 120_000);

it('shares the slot between two tenants of equal weight, the second queued after the whole backlog of the first', async () => {
  dispatched.length = 0;
  const hold = await holdTheSlot();
  const tenantA = Array.from({ length: 24 }, () => h.id('tenant-a'));
  const tenantB = Array.from({ length: 8 }, () => h.id('tenant-b'));
  for (const id of tenantA) await h.client.start(recordOnce(`a-${h.taskQueue}`), null, { id, fairnessKey: 'tenant-a' });
  await untilQueued(tenantA);
  for (const id of tenantB) await h.client.start(recordOnce(`b-${h.taskQueue}`), null, { id, fairnessKey: 'tenant-b' });
  await untilQueued(tenantB);
  releaseHold();
  for (const id of [hold.id, ...tenantA, ...tenantB]) expect((await h.client.result(id)).status).toBe('completed');

  const order = dispatched.map((d) => (tenantB.includes(d.itemId) ? 'B' : 'A'));
  expect(order).toHaveLength(tenantA.length + tenantB.length);
  // While B has work (its 8 items), first in, first out would give it none of the first 16 dispatches; shared
  // fairly, it gets half of them.
  const firstWindow = order.slice(0, 2 * tenantB.length);
  const shareOfB = firstWindow.filter((t) => t === 'B').length / firstWindow.length;
  expect({ order: order.join(''), shareOfB }).toEqual({ order: order.join(''), shareOfB: 0.5 });
  expect(dispatched.find((d) => d.itemId === tenantB[0])!.priority).toMatchObject({ fairnessKey: 'tenant-b' });
}, 120_000);

it("gives the fan-out's elements the item's priority and fairness key (inherited on the server)", async () => {
  dispatched.length = 0;
  const id = h.id('fan');
  const spec = pipeline(`fan-${h.taskQueue}`)
    .stage('list', 'list')
    .stage('each', 'fan_out', { dependsOn: ['list'], with: { items: 'xs', stage: { run: 'record' } } })
    .priority(2)
    .fairness('acme', 3);
  await h.client.start(spec, null, { id });
  expect((await h.client.result(id)).status).toBe('completed');
  expect(dispatched).toHaveLength(3);
  for (const element of dispatched) {
    expect(element.itemId).not.toBe(id);
    expect(element.priority).toMatchObject({ priorityKey: 2, fairnessKey: 'acme', fairnessWeight: 3 });
  }
  // The caller's values win over the spec's.
  const urgent = h.id('fan-urgent');
  await h.client.start(spec, { other: true }, { id: urgent, priority: 1 });
  expect((await h.client.result(urgent)).status).toBe('completed');
  expect(dispatched.slice(3).map((d) => d.priority)).toEqual(
    Array(3).fill(expect.objectContaining({ priorityKey: 1, fairnessKey: 'acme', fairnessWeight: 3 })),
  );
}, 120_000);

describe('the CLI', () => {
  const dir = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'priority-'));
  const specFile = (name: string, head: string): string => {
    const file = path.join(dir, `${name}.yaml`);
    writeFileSync(file, `name: ${name}\n${head}\nstages:\n  - name: s\n    run: scripted\n`);
    return file;
  };

  it('starts an item with --priority and --fairness-key, and status shows them (text and --json)', async () => {
    const id = h.id('cli');
    const file = specFile('cli-priority', 'priority: 4\nfairness_key: spec-key');
    const run = await runTreadle(h, [
      'run',
      '-f',
      file,
      '--id',
      id,
      '--priority',
      '1',
      '--fairness-key',
      'acme',
      '--fairness-weight',
      '2',
      '--wait',
    ]);
    expect({ code: run.code, run: showRun(run) }).toEqual({ code: EXIT.completed, run: showRun(run) });
    const status = await runTreadle(h, ['status', id]);
    expect(status.stdout).toContain('priority 1 · fairness key acme (weight 2)');
    const json = await runTreadle(h, ['status', id, '--json']);
    expect(JSON.parse(json.stdout)).toMatchObject({ id, priority: 1, fairnessKey: 'acme', fairnessWeight: 2 });
    const description = await h.temporal.workflow.getHandle(id).describe();
    expect(description.priority).toMatchObject({ priorityKey: 1, fairnessKey: 'acme', fairnessWeight: 2 });
  }, 60_000);

  it.each([
    [['--priority', '7'], 'must be a whole number from 1 (highest) to 5 (lowest); 3 is the default, got 7'],
    [['--priority', 'high'], 'must be a whole number from 1 (highest) to 5 (lowest); 3 is the default, got "high"'],
    [['--fairness-key', 'k'.repeat(65)], "must be at most 64 bytes (Temporal's limit), got 65 bytes"],
    [['--fairness-weight', '0'], "must be a number from 0.001 to 1000 (Temporal's range; 1 is the default), got 0"],
    [
      ['--fairness-weight', '2'],
      "--fairness-weight needs a --fairness-key: the weight is that key's share of the queue",
    ],
  ])(
    'refuses %j before connecting, naming the problem (exit 2)',
    async (flags, problem) => {
      const file = specFile('cli-flags', '');
      // An address nobody listens on: the refusal comes before any connection.
      const run = await runTreadle(h, ['run', '-f', file, ...flags], { TEMPORAL_ADDRESS: '127.0.0.1:1' });
      expect({ code: run.code, stderr: run.stderr }).toEqual({
        code: EXIT.usage,
        stderr: expect.stringContaining(problem),
      });
    },
    30_000,
  );

  it('refuses a spec with an invalid priority, listing every problem (exit 2)', async () => {
    const file = specFile('cli-bad-spec', 'priority: 0\nfairness_key: acme\nfairness_weight: 5000');
    const run = await runTreadle(h, ['run', '-f', file], { TEMPORAL_ADDRESS: '127.0.0.1:1' });
    expect(run.code).toBe(EXIT.usage);
    expect(run.stderr).toContain('pipeline cli-bad-spec is invalid:');
    expect(run.stderr).toContain('  - priority: must be a whole number from 1 (highest) to 5 (lowest)');
    expect(run.stderr).toContain("  - fairness_weight: must be a number from 0.001 to 1000 (Temporal's range");
  }, 30_000);
});
