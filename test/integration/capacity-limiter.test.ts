/**
 * The limiter workflow (`treadleLimiter`, src/capacity/workflow.ts) on the real dev server, driven as worker
 * processes drive it: `acquire` by update-with-start, `release`/`renew`/`throttle` by signal. Cases:
 * - four holders acquiring and releasing at once never hold more than the concurrency, by their own count and
 *   by the limiter's `usage` query, and every call is served, at most 10 history events a call;
 * - the worker keeps no workflow cached, so every task replays: the limiter is deterministic;
 * - a holder that stops renewing loses its lease after the bound, and a waiting holder gets it;
 * - a malformed `acquire` is refused by the validator and never reaches the history; limits a process sends are
 *   adopted; a throttle holds grants back;
 * - continue-as-new keeps leases, lease numbering and the window: a lease granted before is released after.
 */
import { WithStartWorkflowOperation, WorkflowUpdateFailedError, type Client } from '@temporalio/client';
import { acquireUpdate, releaseSignal, renewSignal, throttleSignal, usageQuery } from '../../src/capacity/messages';
import type { AcquireInput, AcquireResult, DemandEntry, ScopeLimits } from '../../src/capacity/shapes';
import type { LimiterInput, treadleLimiter } from '../../src/capacity/workflow';
import { eventually, startHarness, type Harness } from '../support/harness';

let h: Harness;
beforeAll(async () => {
  // Every workflow task replays the whole history: any nondeterminism in the limiter fails here.
  h = await startHarness({ worker: { maxCachedWorkflows: 0 } });
});
afterAll(async () => {
  await h?.shutdown();
});

/** A limiter of its own for one test: its id and how to acquire from it (starting it on first use). */
function limiterFor(limits: ScopeLimits, more: Partial<LimiterInput> = {}) {
  const workflowId = `treadle-limiter:test:${h.id('model')}:k`;
  const temporal: Client = h.temporal;
  const input: LimiterInput = { scope: { provider: 'test', model: 'm', keyId: 'k' }, limits, ...more };
  const acquire = (request: AcquireInput): Promise<AcquireResult> =>
    temporal.workflow.executeUpdateWithStart(acquireUpdate, {
      args: [request],
      startWorkflowOperation: new WithStartWorkflowOperation<typeof treadleLimiter>('treadleLimiter', {
        workflowId,
        taskQueue: h.taskQueue,
        args: [input],
        workflowIdConflictPolicy: 'USE_EXISTING',
      }),
    });
  const handle = () => temporal.workflow.getHandle(workflowId);
  return { workflowId, acquire, handle };
}

const demand = (calls: number, more: Partial<DemandEntry> = {}): DemandEntry => ({
  priority: 3,
  fairnessKey: '',
  weight: 1,
  calls,
  inputTokens: 100,
  outputTokens: 100,
  ...more,
});
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

afterEach(async () => {
  // Each test's limiter runs for ever (as in production); end them so the server has nothing left to do.
  const running = h.temporal.workflow.list({
    query: `WorkflowType = 'treadleLimiter' AND ExecutionStatus = 'Running'`,
  });
  for await (const execution of running)
    await h.temporal.workflow.getHandle(execution.workflowId).terminate('test over');
});

it('four holders acquiring and releasing at once never hold more than the concurrency', async () => {
  const limiter = limiterFor({ concurrency: 3, leaseMs: 30_000 });
  let held = 0;
  let most = 0;
  let served = 0;
  const usageSeen: number[] = [];
  const holder = async (name: string, calls: number) => {
    let left = calls;
    while (left > 0) {
      const { grants } = await limiter.acquire({ holder: name, demand: [demand(left)], waitMs: 5_000 });
      await Promise.all(
        grants.map(async (grant) => {
          held += 1;
          most = Math.max(most, held);
          await sleep(150);
          held -= 1;
          await limiter.handle().signal(releaseSignal, {
            holder: name,
            releases: [{ leaseId: grant.leaseId, usage: { inputTokens: 80, outputTokens: 20 } }],
          });
        }),
      );
      left -= grants.length;
      served += grants.length;
    }
  };
  const watching = (async () => {
    while (served < 20) {
      const usage = await limiter
        .handle()
        .query(usageQuery)
        .catch(() => undefined);
      if (usage) usageSeen.push(usage.inFlight);
      await sleep(100);
    }
  })();
  await Promise.all(['p1', 'p2', 'p3', 'p4'].map((name) => holder(name, 5)));
  await watching;
  expect(served).toBe(20);
  expect(most).toBeLessThanOrEqual(3);
  expect(most).toBeGreaterThanOrEqual(2);
  expect(Math.max(...usageSeen)).toBeLessThanOrEqual(3);
  const after = await eventually(async () => {
    const usage = await limiter.handle().query(usageQuery);
    return usage.inFlight === 0 ? usage : undefined;
  });
  expect(after.requestsPerMinute).toBeUndefined();
  expect(after.concurrency).toEqual({ used: 0, limit: 3, configured: 3 });
  const history = await limiter.handle().fetchHistory();
  expect(history.events!.some((e) => e.workflowTaskFailedEventAttributes)).toBe(false);
  // The cost per call in history (docs/deploy.md): an acquire's update and timer, a release signal, their tasks.
  expect(history.events!.length).toBeLessThanOrEqual(20 * 10);
}, 60_000);

it('a holder that stops renewing loses its lease after the bound; one that renews keeps it', async () => {
  const leaseMs = 2_000;
  const limiter = limiterFor({ concurrency: 2, leaseMs });
  const first = await limiter.acquire({ holder: 'renews', demand: [demand(1)], waitMs: 5_000 });
  const dead = await limiter.acquire({ holder: 'dies', demand: [demand(1)], waitMs: 5_000 });
  expect(first.grants).toHaveLength(1);
  expect(dead.grants).toHaveLength(1);
  const kept = first.grants[0]!;
  const lost = dead.grants[0]!;
  // Granted first, the renewed lease would end first, before the other's bound, if its renewals were not kept.
  expect(kept.expiresAt).toBeLessThan(lost.expiresAt);
  // Live holders renew what they hold, as a gate does (several times a lease bound), until the test ends.
  const held = new Map([['renews', [kept.leaseId]]]);
  let renewing = true;
  const renewals = (async () => {
    while (renewing) {
      for (const [holder, leaseIds] of held) await limiter.handle().signal(renewSignal, { holder, leaseIds });
      await sleep(200);
    }
  })();
  try {
    const waited = await limiter.acquire({ holder: 'waits', demand: [demand(1)], waitMs: 10_000 });
    expect(waited.grants).toHaveLength(1);
    held.set('waits', [waited.grants[0]!.leaseId]);
    // Times in the limiter's own clock (a grant's expiry is its grant time plus the bound), so the machine's load
    // cannot reorder them: the slot came free at the unrenewed lease's bound, not before (the renewed lease,
    // whose own bound came first, did not free it), and when that bound came, not a later event.
    const grantedAt = waited.grants[0]!.expiresAt - leaseMs;
    expect(grantedAt).toBeGreaterThanOrEqual(lost.expiresAt);
    expect(grantedAt).toBeLessThan(lost.expiresAt + leaseMs);
    // The renewed lease is still held: the limiter counts it and the one just granted, and a new call waits.
    const none = await limiter.acquire({ holder: 'late', demand: [demand(1)], waitMs: 0 });
    expect(none).toEqual({
      grants: [],
      leaseMs,
      waiting: [{ priority: 3, fairnessKey: '', calls: 1, binds: 'concurrency' }],
    });
    const usage = await limiter.handle().query(usageQuery);
    expect(usage.inFlight).toBe(2);
    expect(usage.holders).toBe(3);
  } finally {
    renewing = false;
    await renewals;
  }
}, 60_000);

it('refuses a malformed acquire; a throttle holds every grant back until its retry-after', async () => {
  const limiter = limiterFor({ concurrency: 5, leaseMs: 30_000 });
  await expect(limiter.acquire({ holder: 'p', demand: [demand(1, { priority: 9 })] })).rejects.toThrow(
    WorkflowUpdateFailedError,
  );
  const refused = await limiter.acquire({ holder: 'p', demand: [demand(1, { priority: 9 })] }).catch((e: Error) => e);
  expect(String((refused as Error & { cause?: Error }).cause?.message)).toMatch(
    /demand\.0\.priority: must be a whole number from 1 to 5/,
  );
  const started = await limiter.acquire({ holder: 'p', demand: [], waitMs: 0 });
  // A process with an edited limits file sends its limits: the limiter adopts them.
  const raised = await limiter.acquire({
    holder: 'p',
    demand: [],
    waitMs: 0,
    limits: { concurrency: 7, leaseMs: 20_000 },
  });
  expect(raised.leaseMs).toBe(20_000);
  expect((await limiter.handle().query(usageQuery)).concurrency?.limit).toBe(7);
  expect(started.grants).toEqual([]);
  await limiter.handle().signal(throttleSignal, { retryAfterMs: 2_000 });
  const paused = await limiter.acquire({ holder: 'p', demand: [demand(1)], waitMs: 500 });
  expect(paused.waiting).toEqual([{ priority: 3, fairnessKey: '', calls: 1, binds: 'throttle' }]);
  const granted = await limiter.acquire({ holder: 'p', demand: [demand(1)], waitMs: 5_000 });
  expect(granted.grants).toHaveLength(1);
  const history = await limiter.handle().fetchHistory();
  const updates = history.events!.filter((e) => e.workflowExecutionUpdateAcceptedEventAttributes).length;
  expect(updates).toBe(4);
}, 60_000);

it('continue-as-new keeps the leases, their numbering and the window', async () => {
  const limiter = limiterFor({ concurrency: 2, requestsPerMinute: 100, leaseMs: 30_000 }, { maxHistoryEvents: 40 });
  const kept = await limiter.acquire({ holder: 'p', demand: [demand(1)], waitMs: 5_000 });
  expect(kept.grants).toHaveLength(1);
  const firstRun = (await limiter.handle().describe()).runId;
  const ids = new Set([kept.grants[0]!.leaseId]);
  // Short calls until the history passes 40 events and the limiter continues as new.
  let calls = 1;
  await eventually(
    async () => {
      const { grants } = await limiter.acquire({ holder: 'q', demand: [demand(1)], waitMs: 5_000 });
      for (const grant of grants) {
        ids.add(grant.leaseId);
        calls += 1;
        await limiter.handle().signal(releaseSignal, { holder: 'q', releases: [{ leaseId: grant.leaseId }] });
      }
      const { runId } = await limiter.handle().describe();
      return runId !== firstRun ? runId : undefined;
    },
    40_000,
    'the limiter to continue as new',
  );
  const usage = await limiter.handle().query(usageQuery);
  expect(usage.inFlight).toBe(1);
  expect(usage.requestsPerMinute?.used).toBe(calls);
  const next = await limiter.acquire({ holder: 'q', demand: [demand(1)], waitMs: 5_000 });
  expect(ids.has(next.grants[0]!.leaseId)).toBe(false);
  const full = await limiter.acquire({ holder: 'r', demand: [demand(1)], waitMs: 500 });
  expect(full.waiting[0]?.binds).toBe('concurrency');
  await limiter.handle().signal(releaseSignal, { holder: 'p', releases: [{ leaseId: kept.grants[0]!.leaseId }] });
  const freed = await limiter.acquire({ holder: 'r', demand: [demand(1)], waitMs: 5_000 });
  expect(freed.grants).toHaveLength(1);
}, 60_000);
