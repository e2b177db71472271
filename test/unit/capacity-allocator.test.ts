/**
 * src/capacity/allocator.ts, the limiter's pure decisions, driven by simulated time. Cases:
 * - concurrency, requests per minute and tokens per minute are never passed in any 60-s window (checked by an
 *   independent count of grants and releases), with actual usage below and above the estimate;
 * - expiry returns a silent holder's capacity (its estimate charged once, a late release ignored); renewals keep it;
 * - priority: the lowest number is served first; fairness: both backlogged, A:B follows the weights;
 * - throttle: nothing granted until retry-after, then the rate recovers step by step; a burst halves it once;
 * - usage() names the binding limit; nextWakeAt() the next lease expiry or window release;
 * - the state stays the same size after 100,000 calls.
 */
import {
  allocate,
  DEMAND_TTL_MS,
  newAllocator,
  nextWakeAt,
  release,
  renew,
  setDemand,
  throttle,
  usage,
  type AllocatorState,
} from '../../src/capacity/allocator';
import { describeUsage, type DemandEntry, type Grant, type ScopeLimits } from '../../src/capacity/shapes';
import { RECOVERY_STEP_MS } from '../../src/capacity/window';

const T0 = 1_700_000_000_000;

function demand(priority: number, fairnessKey: string, calls: number, more: Partial<DemandEntry> = {}): DemandEntry {
  return { priority, fairnessKey, weight: 1, calls, inputTokens: 400, outputTokens: 100, ...more };
}

interface Call {
  grant: Grant;
  grantedAt: number;
  endsAt: number;
  actual: { inputTokens: number; outputTokens: number };
  releasedAt?: number;
}

/**
 * Runs `holders` backlogged holders (each always asking for `backlog` more calls) against `limits` for
 * `durationMs`, in steps of `stepMs`; each call lasts `latencyMs` and uses `actual(grant)` tokens.
 */
function simulate(options: {
  limits: ScopeLimits;
  holders: { holder: string; demand: DemandEntry[] }[];
  durationMs: number;
  stepMs?: number;
  latencyMs?: number;
  actual?: (grant: Grant, index: number) => { inputTokens: number; outputTokens: number };
  onStep?: (state: AllocatorState, now: number, inFlight: number) => void;
}): { calls: Call[]; state: AllocatorState } {
  const { limits, holders, durationMs, stepMs = 50, latencyMs = 50 } = options;
  const actual = options.actual ?? ((g: Grant) => ({ inputTokens: g.inputTokens, outputTokens: g.outputTokens }));
  const state = newAllocator(limits);
  const calls: Call[] = [];
  const inFlight: Call[] = [];
  for (let now = T0; now < T0 + durationMs; now += stepMs) {
    for (let i = inFlight.length - 1; i >= 0; i--) {
      const call = inFlight[i]!;
      if (call.endsAt > now) continue;
      inFlight.splice(i, 1);
      call.releasedAt = now;
      release(state, call.grant.holder, [{ leaseId: call.grant.leaseId, usage: call.actual }], now);
    }
    for (const h of holders) setDemand(state, h.holder, h.demand, now);
    for (const grant of allocate(state, now)) {
      const call = { grant, grantedAt: now, endsAt: now + latencyMs, actual: actual(grant, calls.length) };
      calls.push(call);
      inFlight.push(call);
    }
    options.onStep?.(state, now, inFlight.length);
  }
  return { calls, state };
}

/** The most calls granted in any 60-s window (checked at each grant: the window ending there). */
function maxRequestsPerMinute(calls: readonly Call[]): number {
  return Math.max(
    0,
    ...calls.map((c) => calls.filter((o) => o.grantedAt > c.grantedAt - 60_000 && o.grantedAt <= c.grantedAt).length),
  );
}

const tokens = (u: { inputTokens: number; outputTokens: number }) => u.inputTokens + u.outputTokens;

describe('limits are never passed', () => {
  it('concurrency: at most 8 in flight, and all 8 used while calls wait', () => {
    let most = 0;
    let full = 0;
    let steps = 0;
    const { calls } = simulate({
      limits: { concurrency: 8, leaseMs: 60_000 },
      holders: ['a', 'b', 'c'].map((holder) => ({ holder, demand: [demand(3, '', 20)] })),
      durationMs: 10_000,
      latencyMs: 120,
      onStep: (_state, _now, inFlight) => {
        most = Math.max(most, inFlight);
        steps += 1;
        if (inFlight === 8) full += 1;
      },
    });
    expect(most).toBe(8);
    expect(full).toBe(steps);
    expect(calls.length).toBeGreaterThan(500);
  });

  it('requests per minute: never more than 30 granted in any 60-s window', () => {
    const { calls } = simulate({
      limits: { requestsPerMinute: 30, leaseMs: 60_000 },
      holders: [{ holder: 'a', demand: [demand(3, '', 50)] }],
      durationMs: 5 * 60_000,
      stepMs: 250,
    });
    expect(maxRequestsPerMinute(calls)).toBe(30);
    expect(calls.length).toBeGreaterThanOrEqual(5 * 30 - 5);
  });

  it('tokens per minute, actual below the estimate: the tokens released in any 60-s window stay under the limit', () => {
    const limit = 20_000;
    const { calls } = simulate({
      limits: { concurrency: 8, tokensPerMinute: limit, leaseMs: 60_000 },
      holders: [{ holder: 'a', demand: [demand(3, '', 50, { inputTokens: 800, outputTokens: 400 })] }],
      durationMs: 4 * 60_000,
      stepMs: 100,
      latencyMs: 2_000,
      actual: (_g, i) => ({ inputTokens: 800, outputTokens: i % 3 === 0 ? 400 : 50 }),
    });
    const released = calls.filter((c) => c.releasedAt !== undefined);
    for (const end of released) {
      const inWindow = released.filter(
        (c) => c.releasedAt! > end.releasedAt! - 60_000 && c.releasedAt! <= end.releasedAt!,
      );
      expect(inWindow.reduce((sum, c) => sum + tokens(c.actual), 0)).toBeLessThanOrEqual(limit);
    }
    // The corrections count: more calls than the estimate alone (1,200 a call) would allow (16 a minute).
    expect(calls.length).toBeGreaterThan(4 * 16 + 10);
  });

  it('tokens per minute, actual above the estimate: no call is granted while the minute holds the limit', () => {
    const limit = 10_000;
    const { calls } = simulate({
      limits: { tokensPerMinute: limit, leaseMs: 60_000 },
      holders: [{ holder: 'a', demand: [demand(3, '', 5, { inputTokens: 500, outputTokens: 500 })] }],
      durationMs: 3 * 60_000,
      stepMs: 100,
      latencyMs: 1_000,
      actual: () => ({ inputTokens: 2_000, outputTokens: 1_000 }),
    });
    for (const call of calls) {
      const g = call.grantedAt;
      const releasedBefore = calls.filter(
        (c) => c.releasedAt !== undefined && c.releasedAt > g - 60_000 && c.releasedAt <= g,
      );
      const heldAtGrant = calls.filter((c) => c.grantedAt <= g && (c.releasedAt === undefined || c.releasedAt > g));
      const counted =
        releasedBefore.reduce((s, c) => s + tokens(c.actual), 0) + heldAtGrant.reduce((s, c) => s + tokens(c.grant), 0);
      expect(counted).toBeLessThanOrEqual(limit);
    }
    // The first minute's 10 estimates fill the limit; their actual usage (3x) holds every grant back until it
    // leaves the window, so the overshoot is bounded by one minute's estimates, never compounded.
    expect(calls.filter((c) => c.grantedAt >= T0 + 1_000 && c.grantedAt < T0 + 60_000)).toEqual([]);
    expect(calls.filter((c) => c.grantedAt < T0 + 1_000)).toHaveLength(limit / 1_000);
    expect(calls.length).toBeLessThanOrEqual(3 * (limit / 1_000));
  });

  it('input and output tokens per minute bind on their own', () => {
    const state = newAllocator({ inputTokensPerMinute: 1_000, outputTokensPerMinute: 10_000, leaseMs: 60_000 });
    setDemand(state, 'a', [demand(3, '', 10, { inputTokens: 400, outputTokens: 100 })], T0);
    expect(allocate(state, T0)).toHaveLength(2);
    expect(usage(state, T0).waiting).toEqual([
      { priority: 3, fairnessKey: '', calls: 8, binds: 'input_tokens_per_minute' },
    ]);
  });

  it('a call larger than the token limit runs alone rather than never', () => {
    const state = newAllocator({ tokensPerMinute: 1_000, leaseMs: 60_000 });
    setDemand(state, 'a', [demand(3, '', 2, { inputTokens: 5_000, outputTokens: 1_000 })], T0);
    const [first, ...rest] = allocate(state, T0);
    expect(rest).toEqual([]);
    release(state, 'a', [{ leaseId: first!.leaseId, usage: { inputTokens: 5_000, outputTokens: 800 } }], T0 + 1_000);
    setDemand(state, 'a', [demand(3, '', 1, { inputTokens: 5_000, outputTokens: 1_000 })], T0 + 30_000);
    expect(allocate(state, T0 + 30_000)).toEqual([]);
    setDemand(state, 'a', [demand(3, '', 1, { inputTokens: 5_000, outputTokens: 1_000 })], T0 + 61_999);
    expect(allocate(state, T0 + 61_999)).toEqual([]);
    expect(allocate(state, T0 + 62_000)).toHaveLength(1);
  });
});

describe('leases', () => {
  it("expire when not renewed: a silent holder's capacity returns after the lease bound, charged once", () => {
    const state = newAllocator({ concurrency: 2, tokensPerMinute: 100_000, leaseMs: 10_000 });
    setDemand(state, 'dead', [demand(3, '', 2)], T0);
    const held = allocate(state, T0);
    expect(held).toHaveLength(2);
    setDemand(state, 'alive', [demand(3, '', 5)], T0 + 1_000);
    expect(allocate(state, T0 + 9_999)).toEqual([]);
    expect(usage(state, T0 + 9_999).waiting[0]?.binds).toBe('concurrency');
    expect(nextWakeAt(state, T0 + 9_999)).toBe(T0 + 10_000);
    const after = allocate(state, T0 + 10_000);
    expect(after.map((g) => g.holder)).toEqual(['alive', 'alive']);
    // The dead holder's estimates (500 each) were charged at expiry; its late release is not counted again.
    expect(usage(state, T0 + 10_000).tokensPerMinute?.used).toBe(2 * 500 + 2 * 500);
    release(
      state,
      'dead',
      held.map((g) => ({ leaseId: g.leaseId, usage: { inputTokens: 9_000, outputTokens: 0 } })),
      T0 + 11_000,
    );
    expect(usage(state, T0 + 11_000).tokensPerMinute?.used).toBe(2_000);
  });

  it('renewals keep a long call holding its lease; only its own holder may renew or release it', () => {
    const state = newAllocator({ concurrency: 1, leaseMs: 10_000 });
    setDemand(state, 'a', [demand(3, '', 1)], T0);
    const [grant] = allocate(state, T0);
    renew(state, 'a', [grant!.leaseId], T0 + 8_000);
    renew(state, 'b', [grant!.leaseId], T0 + 17_000);
    release(state, 'b', [{ leaseId: grant!.leaseId }], T0 + 17_000);
    expect(usage(state, T0 + 17_000).inFlight).toBe(1);
    expect(usage(state, T0 + 18_000).inFlight).toBe(0);
  });

  it('a release with no usage charges the estimate', () => {
    const state = newAllocator({ tokensPerMinute: 10_000, leaseMs: 10_000 });
    setDemand(state, 'a', [demand(3, '', 1)], T0);
    const [grant] = allocate(state, T0);
    release(state, 'a', [{ leaseId: grant!.leaseId }], T0 + 100);
    expect(usage(state, T0 + 100).tokensPerMinute).toEqual({ used: 500, limit: 10_000, configured: 10_000 });
  });

  it('only holders with an acquire open are served; forgotten demand goes', () => {
    const state = newAllocator({ concurrency: 4, leaseMs: 10_000 });
    setDemand(state, 'a', [demand(3, '', 3)], T0);
    setDemand(state, 'b', [demand(3, '', 3)], T0);
    expect(allocate(state, T0, new Set(['b'])).map((g) => g.holder)).toEqual(['b', 'b', 'b']);
    expect(allocate(state, T0 + DEMAND_TTL_MS)).toEqual([]);
    expect(usage(state, T0 + DEMAND_TTL_MS).waiting).toEqual([]);
  });
});

describe('priority and fairness', () => {
  it('the lowest priority number is served first, whatever arrived before', () => {
    const state = newAllocator({ concurrency: 3, leaseMs: 60_000 });
    setDemand(state, 'bulk', [demand(3, 'acme', 500)], T0);
    setDemand(state, 'urgent', [demand(1, 'beta', 2)], T0);
    const grants = allocate(state, T0);
    expect(grants.map((g) => g.priority)).toEqual([1, 1, 3]);
    expect(usage(state, T0).waiting).toEqual([{ priority: 3, fairnessKey: 'acme', calls: 499, binds: 'concurrency' }]);
  });

  const shares = (weights: { a: number; b: number }) => {
    const { calls } = simulate({
      limits: { concurrency: 4, leaseMs: 60_000 },
      holders: [
        { holder: 'w1', demand: [demand(3, 'A', 100, { weight: weights.a })] },
        {
          holder: 'w2',
          demand: [demand(3, 'A', 100, { weight: weights.a }), demand(3, 'B', 10, { weight: weights.b })],
        },
      ],
      durationMs: 20_000,
      latencyMs: 100,
    });
    const b = calls.filter((c) => c.grant.fairnessKey === 'B').length;
    return b / calls.length;
  };

  it('equal weights, both backlogged: B gets half the calls, though A has ten times its demand', () => {
    expect(shares({ a: 1, b: 1 })).toBeCloseTo(0.5, 1);
  });

  it('weights 3:1 give A three calls for each of B', () => {
    expect(shares({ a: 3, b: 1 })).toBeCloseTo(0.25, 1);
  });

  it('a key that was idle earns no credit: it joins at the others’ pass', () => {
    const state = newAllocator({ concurrency: 100, leaseMs: 60_000 });
    setDemand(state, 'w', [demand(3, 'A', 50)], T0);
    expect(allocate(state, T0)).toHaveLength(50);
    const next = newAllocator({ concurrency: 10, leaseMs: 60_000 });
    Object.assign(next, { passes: state.passes, seq: state.seq });
    setDemand(next, 'w', [demand(3, 'A', 50), demand(3, 'B', 50)], T0);
    const keys = allocate(next, T0).map((g) => g.fairnessKey);
    expect(keys.filter((k) => k === 'B')).toHaveLength(5);
  });

  it('holders of one class take turns', () => {
    const state = newAllocator({ concurrency: 6, leaseMs: 60_000 });
    for (const holder of ['h1', 'h2', 'h3']) setDemand(state, holder, [demand(3, 'A', 10)], T0);
    expect(allocate(state, T0).map((g) => g.holder)).toEqual(['h1', 'h2', 'h3', 'h1', 'h2', 'h3']);
  });
});

describe('throttle', () => {
  it('stops every grant until retry-after, then the rate halves and recovers step by step', () => {
    const state = newAllocator({ concurrency: 10, leaseMs: 60_000 });
    throttle(state, 5_000, T0);
    throttle(state, 4_000, T0 + 10); // the same burst: only extends the pause, the rate halves once
    setDemand(state, 'a', [demand(3, '', 100)], T0);
    expect(allocate(state, T0 + 4_999)).toEqual([]);
    expect(usage(state, T0 + 4_999).waiting[0]?.binds).toBe('throttle');
    expect(nextWakeAt(state, T0 + 4_999)).toBe(T0 + 5_000);
    expect(allocate(state, T0 + 5_000)).toHaveLength(5);
    expect(describeUsage(usage(state, T0 + 5_000))).toBe('5/5 calls in flight, slowed to 50% after a 429');
    expect(nextWakeAt(state, T0 + 5_000)).toBe(T0 + 5_000 + RECOVERY_STEP_MS);
    expect(allocate(state, T0 + 5_000 + RECOVERY_STEP_MS)).toHaveLength(1);
    setDemand(state, 'a', [demand(3, '', 94)], T0 + 5_000 + 5 * RECOVERY_STEP_MS); // demand is re-sent while it waits
    expect(allocate(state, T0 + 5_000 + 5 * RECOVERY_STEP_MS)).toHaveLength(4);
    expect(usage(state, T0 + 5_000 + 5 * RECOVERY_STEP_MS).throttle).toBeUndefined();
    expect(state.throttle).toEqual({ until: 0, percent: 100 });
  });

  it('a second 429 after the pause halves the rate again', () => {
    const state = newAllocator({ requestsPerMinute: 100, leaseMs: 60_000 });
    throttle(state, 1_000, T0);
    throttle(state, 1_000, T0 + 2_000);
    expect(usage(state, T0 + 3_000).requestsPerMinute).toEqual({ used: 0, limit: 25, configured: 100 });
  });
});

describe('bounded state', () => {
  it('stays the same size after 100,000 calls', () => {
    const sizes: number[] = [];
    const { calls, state } = simulate({
      limits: { concurrency: 8, tokensPerMinute: 100_000_000, requestsPerMinute: 1_000_000, leaseMs: 60_000 },
      holders: ['a', 'b', 'c'].map((holder, i) => ({
        holder,
        demand: [demand(1 + i, `tenant-${i}`, 50), demand(3, 'shared', 50, { weight: 2 })],
      })),
      durationMs: 13_000 * 50,
      onStep: (s, now) => {
        if ((now - T0) % 60_000 === 0) sizes.push(JSON.stringify(s).length);
      },
    });
    expect(calls.length).toBeGreaterThanOrEqual(100_000);
    expect(state.leases.length).toBeLessThanOrEqual(8);
    expect(state.window.length).toBeLessThanOrEqual(61);
    expect(Math.max(...sizes)).toBeLessThan(20_000);
    expect(Math.max(...sizes.slice(2)) - Math.min(...sizes.slice(2))).toBeLessThan(1_000);
  });
});
