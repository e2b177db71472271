/**
 * The per-process capacity gate (src/capacity/worker/gate.ts) against a real limiter on the dev server. Cases:
 * - two gates (two processes) sharing a limiter of concurrency 2: never more than 2 calls at once, all served;
 * - an urgent call that arrives while a long-poll is open goes before the backlog of its own process, also when it
 *   arrives as the long-poll is sent (its demand must not be overwritten by the long-poll's older one);
 * - a throttle reported before any acquire starts the limiter and holds grants back; an aborted call is dropped;
 * - a process's gates (gates.ts): one per scope, a `*` limit shared by its models, the key only as a hash.
 */
import { CapacityGate, type CapacityRequest } from '../../src/capacity/worker/gate';
import { CapacityGates, capacityKeyId } from '../../src/capacity/worker/gates';
import { usageQuery } from '../../src/capacity/messages';
import { limiterWorkflowId, type ScopeLimits } from '../../src/capacity/shapes';
import { eventually, startHarness, type Harness } from '../support/harness';

let h: Harness;
const gates: CapacityGate[] = [];
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await Promise.all(gates.map((g) => g.close()));
  const running = h.temporal.workflow.list({
    query: `WorkflowType = 'treadleLimiter' AND ExecutionStatus = 'Running'`,
  });
  for await (const execution of running)
    await h.temporal.workflow.getHandle(execution.workflowId).terminate('test over');
  await h?.shutdown();
});

function gatesFor(limits: ScopeLimits, count: number): { gates: CapacityGate[]; workflowId: string } {
  const scope = { provider: 'test', model: h.id('model'), keyId: 'k' };
  const made = Array.from(
    { length: count },
    (_, i) => new CapacityGate({ client: h.temporal, taskQueue: h.taskQueue, scope, limits, holder: `p${i}` }),
  );
  gates.push(...made);
  return { gates: made, workflowId: limiterWorkflowId(scope.provider, scope.model, scope.keyId) };
}

const call = (priority = 3, fairnessKey = ''): CapacityRequest => ({
  priority,
  fairnessKey,
  weight: 1,
  inputTokens: 100,
  outputTokens: 50,
});
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

it('two processes sharing a limit of 2 never run more than 2 calls at once', async () => {
  const {
    gates: [a, b],
    workflowId,
  } = gatesFor({ concurrency: 2, leaseMs: 30_000 }, 2);
  let running = 0;
  let most = 0;
  const run = async (gate: CapacityGate) => {
    const lease = await gate.acquire(call());
    running += 1;
    most = Math.max(most, running);
    await sleep(100);
    running -= 1;
    lease.release({ inputTokens: 90, outputTokens: 40 });
  };
  await Promise.all([...Array.from({ length: 6 }, () => run(a!)), ...Array.from({ length: 6 }, () => run(b!))]);
  expect(most).toBe(2);
  const usage = await eventually(async () => {
    const u = await h.temporal.workflow.getHandle(workflowId).query(usageQuery);
    return u.inFlight === 0 ? u : undefined;
  });
  expect(usage.concurrency).toEqual({ used: 0, limit: 2, configured: 2 });
}, 60_000);

it('an urgent call arriving during a long-poll goes before the backlog', async () => {
  const {
    gates: [busy, gate],
  } = gatesFor({ concurrency: 1, leaseMs: 30_000 }, 2);
  const holding = await busy!.acquire(call());
  const order: string[] = [];
  const run = async (name: string, priority: number) => {
    const lease = await gate!.acquire(call(priority));
    order.push(name);
    await sleep(50);
    lease.release();
  };
  // The backlog's long-poll is open (the one slot is held elsewhere) when the urgent call arrives.
  const backlog = Array.from({ length: 3 }, (_, i) => run(`bulk${i}`, 3));
  await sleep(500);
  const urgent = run('urgent', 1);
  await sleep(500);
  holding.release();
  await Promise.all([...backlog, urgent]);
  expect(order[0]).toBe('urgent');
  expect(order).toHaveLength(4);
}, 60_000);

// A call that arrives while the process's long-poll is still on its way to the limiter is told by a `demand`
// signal; a signal can reach the limiter before the update it follows is accepted, and the update's older demand
// then replaced it: the urgent call was forgotten until that long-poll ended (up to 10 s), and went after the
// backlog. The gate now sends the signal once the limiter has accepted the long-poll.
it('an urgent call arriving as a long-poll is sent is not forgotten, and goes before the backlog', async () => {
  for (let round = 0; round < 3; round++) {
    const {
      gates: [busy, gate],
    } = gatesFor({ concurrency: 1, leaseMs: 30_000 }, 2);
    const holding = await busy!.acquire(call());
    const order: string[] = [];
    const run = async (name: string, priority: number) => {
      const lease = await gate!.acquire(call(priority));
      order.push(name);
      lease.release();
    };
    // The backlog opens the long-poll; the urgent call comes in the same instant, before the limiter has it.
    const calls = [...Array.from({ length: 3 }, (_, i) => run(`bulk${i}`, 3)), run('urgent', 1)];
    await sleep(1_000);
    holding.release();
    await Promise.all(calls);
    expect(order).toHaveLength(4);
    expect(order[0]).toBe('urgent');
  }
}, 60_000);

it('a throttle starts the limiter and holds grants back; an aborted call is never served', async () => {
  const {
    gates: [gate],
    workflowId,
  } = gatesFor({ concurrency: 3, leaseMs: 30_000 }, 1);
  await expect(gate!.acquire(call(7))).rejects.toThrow(
    'capacity request: priority: must be a whole number from 1 to 5',
  );
  await gate!.throttle(1_500);
  const aborted = new AbortController();
  const gone = gate!.acquire(call(), aborted.signal);
  const started = Date.now();
  const waiting = gate!.acquire(call());
  aborted.abort(new Error('stage cancelled'));
  await expect(gone).rejects.toThrow('stage cancelled');
  const lease = await waiting;
  expect(Date.now() - started).toBeGreaterThan(1_000);
  const usage = await h.temporal.workflow.getHandle(workflowId).query(usageQuery);
  expect(usage.inFlight).toBe(1);
  expect(usage.throttle?.ratePercent).toBe(50);
  lease.release();
}, 60_000);

it("a process's gates: one per scope, a `*` limit shared by its models, none where no limit applies", async () => {
  const model = h.id('model');
  const limits = {
    limits: [
      { provider: 'test', model, key: 'TEST_KEY', concurrency: 1, leaseMs: 30_000 },
      { provider: 'test', model: '*', key: 'TEST_KEY', concurrency: 2, leaseMs: 30_000 },
    ],
    fairness: { weights: { acme: 3 }, defaultWeight: 1 },
  };
  const processGates = new CapacityGates({
    client: h.temporal,
    taskQueue: h.taskQueue,
    limits,
    env: { TEST_KEY: `secret-${model}` },
  });
  try {
    const own = processGates.forCall('test', model, 'TEST_KEY');
    expect(processGates.forCall('test', model, 'TEST_KEY')).toBe(own);
    const star = processGates.forCall('test', 'other-model', 'TEST_KEY');
    expect(processGates.forCall('test', 'third-model', 'TEST_KEY')).toBe(star);
    expect(star).not.toBe(own);
    expect(processGates.forCall('test', model, 'OTHER_KEY')).toBeUndefined();
    expect(processGates.forCall('elsewhere', model, 'TEST_KEY')).toBeUndefined();
    expect([processGates.weightOf('acme'), processGates.weightOf('beta')]).toEqual([3, 1]);
    const lease = await star!.acquire(call(2, 'acme'));
    const keyId = capacityKeyId(`secret-${model}`);
    const usage = await h.temporal.workflow.getHandle(limiterWorkflowId('test', '*', keyId)).query(usageQuery);
    expect(usage.concurrency).toEqual({ used: 1, limit: 2, configured: 2 });
    expect(keyId).toMatch(/^[0-9a-f]{12}$/);
    lease.release();
  } finally {
    await processGates.close();
  }
}, 60_000);
