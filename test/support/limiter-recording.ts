/**
 * Drives a limiter workflow (`treadleLimiter`, src/capacity/workflow.ts) through what its history can hold, as
 * worker processes drive it, and returns its two runs for the replay test (issue 39):
 * - `limiter`: grants, releases with the replies' usage, a throttle (an acquire answered "throttle", then granted
 *   when it ends), an acquire answered "concurrency", a renewal that moves the wake-up (the leases then end at the
 *   renewed bound, their holder having stopped renewing, and a waiting process gets the capacity), new limits
 *   adopted from a process, and continue-as-new with a lease held across it;
 * - `limiter.2`: the run it continued as, starting from the carried state: the held lease released, more calls.
 */
import { WithStartWorkflowOperation } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';
import { acquireUpdate, releaseSignal, renewSignal, throttleSignal } from '../../src/capacity/messages';
import type { AcquireInput, AcquireResult, DemandEntry, Grant, ScopeLimits } from '../../src/capacity/shapes';
import type { LimiterInput, treadleLimiter } from '../../src/capacity/workflow';
import type { Harness } from './harness';

/** The replay test replays each history under its file's name as the workflow id. */
const ID = 'limiter';

export async function recordLimiter(h: Harness): Promise<Record<string, temporal.api.history.v1.IHistory>> {
  const limits: ScopeLimits = { concurrency: 4, tokensPerMinute: 50_000, leaseMs: 2_000 };
  // Small enough that the run continues as new once the story below is told.
  const input: LimiterInput = {
    scope: { provider: 'anthropic', model: 'claude-sonnet', keyId: '0123456789ab' },
    limits,
    maxHistoryEvents: 160,
  };
  const handle = h.temporal.workflow.getHandle(ID);
  const acquire = (request: AcquireInput): Promise<AcquireResult> =>
    h.temporal.workflow.executeUpdateWithStart(acquireUpdate, {
      args: [request],
      startWorkflowOperation: new WithStartWorkflowOperation<typeof treadleLimiter>('treadleLimiter', {
        workflowId: ID,
        taskQueue: h.taskQueue,
        args: [input],
        workflowIdConflictPolicy: 'USE_EXISTING',
      }),
    });
  const demand = (calls: number, more: Partial<DemandEntry> = {}): DemandEntry[] => [
    { priority: 3, fairnessKey: '', weight: 1, calls, inputTokens: 300, outputTokens: 200, ...more },
  ];
  const release = (holder: string, grants: Grant[]) =>
    handle.signal(releaseSignal, {
      holder,
      releases: grants.map((g) => ({ leaseId: g.leaseId, usage: { inputTokens: 250, outputTokens: 120 } })),
    });
  const check = (what: string, ok: boolean) => {
    if (!ok) throw new Error(`recording the limiter: ${what}`);
  };

  // Two calls granted at once (the first acquire starts the limiter); both end, one before a 429's throttle.
  const first = await acquire({ holder: 'worker-a', demand: demand(2), waitMs: 5_000 });
  check('two grants', first.grants.length === 2);
  await release('worker-a', first.grants.slice(0, 1));
  await handle.signal(throttleSignal, { retryAfterMs: 3_000 });
  await release('worker-a', first.grants.slice(1));
  const paused = await acquire({
    holder: 'worker-b',
    demand: demand(2, { priority: 1, fairnessKey: 'acme', weight: 2 }),
    waitMs: 200,
  });
  check('the throttle binds', paused.waiting[0]?.binds === 'throttle');
  // Granted when the pause ends, at half the concurrency (2): then a third call waits for concurrency.
  const resumed = await acquire({
    holder: 'worker-b',
    demand: demand(2, { priority: 1, fairnessKey: 'acme', weight: 2 }),
    waitMs: 10_000,
  });
  check('two grants after the pause', resumed.grants.length === 2);
  const full = await acquire({ holder: 'worker-c', demand: demand(1, { fairnessKey: 'beta' }), waitMs: 0 });
  check('concurrency binds', full.waiting[0]?.binds === 'concurrency');
  // worker-b renews once (the wake-up moves to the renewed bound), then stops: its leases end there, and
  // worker-c, waiting, gets the capacity.
  await new Promise((resolve) => setTimeout(resolve, 800));
  await handle.signal(renewSignal, { holder: 'worker-b', leaseIds: resumed.grants.map((g) => g.leaseId) });
  const freed = await acquire({ holder: 'worker-c', demand: demand(1, { fairnessKey: 'beta' }), waitMs: 10_000 });
  check('a grant when the leases end', freed.grants.length === 1);
  const originalBound = resumed.grants[0]!.expiresAt;
  check('after the renewed bound', freed.grants[0]!.expiresAt - limits.leaseMs > originalBound);
  await release('worker-c', freed.grants);
  // A process with an edited limits file: the limiter adopts its limits; its lease is held across continue-as-new.
  const firstRun = (await handle.describe()).runId;
  const kept = await acquire({
    holder: 'worker-a',
    demand: demand(1),
    waitMs: 5_000,
    limits: { ...limits, leaseMs: 60_000 },
  });
  check('the kept grant', kept.grants.length === 1 && kept.leaseMs === 60_000);
  check('no continue-as-new yet', (await handle.describe()).runId === firstRun);
  let secondRun = firstRun;
  for (let i = 0; i < 100 && secondRun === firstRun; i++) {
    const short = await acquire({ holder: 'worker-d', demand: demand(1), waitMs: 5_000 });
    await release('worker-d', short.grants);
    secondRun = (await handle.describe()).runId;
  }
  check('continued as new', secondRun !== firstRun);
  // The next run: the lease granted before is released, another call comes and goes.
  await release('worker-a', kept.grants);
  const later = await acquire({ holder: 'worker-d', demand: demand(1), waitMs: 5_000 });
  check('a grant in the next run', later.grants.length === 1);
  await release('worker-d', later.grants);
  const histories = {
    [ID]: await h.temporal.workflow.getHandle(ID, firstRun).fetchHistory(),
    [`${ID}.2`]: await h.temporal.workflow.getHandle(ID, secondRun).fetchHistory(),
  };
  await handle.terminate('recorded');
  return histories;
}
