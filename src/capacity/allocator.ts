/**
 * The limiter's decisions, pure and deterministic (they run inside the limiter workflow; time is passed in):
 * which waiting calls get capacity now, and what each limit's use is.
 *
 * - **Leases**: a grant is a lease for one call, held until released or until it passes `expiresAt` without a
 *   renewal (a dead worker's capacity comes back after the lease bound). An expired lease's estimate is charged
 *   to the window: its call may have reached the provider; a late release of it is then ignored (never counted twice).
 * - **Tokens**: a lease reserves its estimate (input from the prompt, output = `max_tokens`) while the call is in
 *   flight; its release replaces it by the reply's usage, charged at release time (later than any provider
 *   counts it, so the window over-counts, never under). Requests are charged at grant.
 * - **Throttle**: a 429/529's `retry-after` stops all grants until then, and the limits then recover from half
 *   (window.ts).
 * - **Order**: the lowest priority number first; within a priority, weighted fair share by fairness key
 *   (stride scheduling: each grant moves the key's pass on by 1/weight, the lowest pass goes next; a key that
 *   comes back starts at the others' pass, so being idle earns no credit); within a key, holders in turn.
 *   A call that does not fit blocks the ones after it, so a big or urgent call is never starved by small ones.
 *
 * State is plain JSON and bounded by the calls in flight, the holders × classes waiting and the 61 buckets of
 * the window, never by the calls served (test/unit/capacity-allocator.test.ts runs 100,000).
 */
import type {
  BindingLimit,
  DemandEntry,
  Grant,
  LimitUse,
  ScopeLimits,
  TokenUsage,
  UsageSnapshot,
  WaitingClass,
} from './shapes';
import {
  charge,
  NO_THROTTLE,
  pruneWindow,
  ratePercentAt,
  scaled,
  throttleChangesAt,
  throttled,
  windowFreesAt,
  windowTotals,
  type Throttle,
  type WindowBucket,
  type WindowTotals,
} from './window';

/** Calls in flight at most when the limits set no concurrency: keeps the state bounded. */
export const MAX_LEASES = 1_000;
/** A holder's demand is forgotten this long after it last said it (its process died or stopped asking). */
export const DEMAND_TTL_MS = 30_000;
/** Waiting classes a holder may report (priorities × fairness keys it has waiting). */
export const MAX_DEMAND_ENTRIES = 100;

/** A granted call in flight. */
export interface Lease extends Grant {
  grantedAt: number;
}

/** One holder's waiting calls of one class. */
export interface HolderDemand extends DemandEntry {
  holder: string;
  updatedAt: number;
  /** The grant sequence number of this entry's last grant: within a class, the holder served longest ago goes next. */
  lastServed: number;
}

/** A class's place in its priority's fair share (stride scheduling's pass). */
export interface ClassPass {
  priority: number;
  fairnessKey: string;
  pass: number;
}

/** Everything the limiter keeps; carried whole across continue-as-new. */
export interface AllocatorState {
  limits: ScopeLimits;
  leases: Lease[];
  window: WindowBucket[];
  throttle: Throttle;
  demand: HolderDemand[];
  passes: ClassPass[];
  /** Grants made so far: names leases and orders holders. */
  seq: number;
}

/** A fresh limiter for `limits`. */
export function newAllocator(limits: ScopeLimits): AllocatorState {
  return { limits, leases: [], window: [], throttle: { ...NO_THROTTLE }, demand: [], passes: [], seq: 0 };
}

/**
 * Replaces what `holder` has waiting by `demand` (a process always sends its whole demand). Entries of one class
 * are merged; entries with no calls are dropped.
 */
export function setDemand(state: AllocatorState, holder: string, demand: readonly DemandEntry[], now: number): void {
  const previous = state.demand.filter((d) => d.holder === holder);
  state.demand = state.demand.filter((d) => d.holder !== holder);
  for (const entry of demand.slice(0, MAX_DEMAND_ENTRIES)) {
    if (entry.calls <= 0) continue;
    const same = state.demand.find((d) => d.holder === holder && sameClass(d, entry));
    if (same) {
      same.calls += entry.calls;
      same.inputTokens = Math.max(same.inputTokens, entry.inputTokens);
      same.outputTokens = Math.max(same.outputTokens, entry.outputTokens);
      continue;
    }
    const lastServed = previous.find((d) => sameClass(d, entry))?.lastServed ?? 0;
    state.demand.push({ ...entry, holder, updatedAt: now, lastServed });
  }
}

/** Extends `holder`'s leases among `leaseIds` by the lease bound from `now`. */
export function renew(state: AllocatorState, holder: string, leaseIds: readonly string[], now: number): void {
  const ids = new Set(leaseIds);
  for (const lease of state.leases)
    if (lease.holder === holder && ids.has(lease.leaseId)) lease.expiresAt = now + state.limits.leaseMs;
}

/**
 * Ends `holder`'s calls: each lease's reservation is replaced by the tokens the call used (its estimate when the
 * usage is unknown), charged at `now`. A lease that already expired was charged its estimate then: ignored.
 */
export function release(
  state: AllocatorState,
  holder: string,
  releases: readonly { leaseId: string; usage?: TokenUsage }[],
  now: number,
): void {
  for (const { leaseId, usage } of releases) {
    const index = state.leases.findIndex((l) => l.leaseId === leaseId && l.holder === holder);
    if (index < 0) continue;
    const [lease] = state.leases.splice(index, 1);
    const used = usage ?? lease!;
    charge(state.window, now, { inputTokens: used.inputTokens, outputTokens: used.outputTokens });
  }
}

/** A provider's 429/529 asking to wait `retryAfterMs`: everyone waits, then the limits recover from half. */
export function throttle(state: AllocatorState, retryAfterMs: number, now: number): void {
  state.throttle = throttled(state.throttle, retryAfterMs, now);
}

/**
 * Moves the state to `now`: expired leases end (their estimates charged), forgotten demand goes, the window
 * drops what no longer counts, a recovered throttle is cleared.
 */
export function tick(state: AllocatorState, now: number): void {
  const expired = state.leases.filter((l) => l.expiresAt <= now);
  if (expired.length > 0) {
    state.leases = state.leases.filter((l) => l.expiresAt > now);
    for (const lease of expired)
      charge(state.window, now, { inputTokens: lease.inputTokens, outputTokens: lease.outputTokens });
  }
  state.demand = state.demand.filter((d) => d.updatedAt + DEMAND_TTL_MS > now);
  pruneWindow(state.window, now);
  if (state.throttle.until !== 0 && ratePercentAt(state.throttle, now) >= 100) state.throttle = { ...NO_THROTTLE };
  prunePasses(state);
}

/**
 * Grants capacity to waiting calls at `now`, in order (priority, fair share, holders in turn), until a call does
 * not fit. Only holders in `waiting` (those with an `acquire` open) are served; all when it is undefined.
 */
export function allocate(state: AllocatorState, now: number, waiting?: ReadonlySet<string>): Grant[] {
  tick(state, now);
  const grants: Grant[] = [];
  const room = roomAt(state, now);
  for (;;) {
    const eligible = state.demand.filter((d) => d.calls > 0 && (!waiting || waiting.has(d.holder)));
    const next = nextClass(state, eligible);
    if (!next || bindingLimit(room, next.entry) !== undefined) break;
    const entry = next.entry;
    state.seq += 1;
    const grant: Grant = {
      leaseId: `L${state.seq}`,
      holder: entry.holder,
      priority: entry.priority,
      fairnessKey: entry.fairnessKey,
      weight: entry.weight,
      inputTokens: entry.inputTokens,
      outputTokens: entry.outputTokens,
      expiresAt: now + state.limits.leaseMs,
    };
    state.leases.push({ ...grant, grantedAt: now });
    charge(state.window, now, { requests: 1 });
    take(room, entry);
    next.pass.pass += 1 / entry.weight;
    entry.calls -= 1;
    entry.lastServed = state.seq;
    grants.push(grant);
  }
  state.demand = state.demand.filter((d) => d.calls > 0);
  prunePasses(state);
  return grants;
}

/** The class that goes next among `eligible`, the holder's entry to serve in it and the class's pass. */
function nextClass(
  state: AllocatorState,
  eligible: readonly HolderDemand[],
): { entry: HolderDemand; pass: ClassPass } | undefined {
  if (eligible.length === 0) return undefined;
  const priority = Math.min(...eligible.map((d) => d.priority));
  const ofPriority = eligible.filter((d) => d.priority === priority);
  let best: { entry: HolderDemand; pass: ClassPass } | undefined;
  for (const entry of ofPriority) {
    const pass = passOf(state, entry);
    const better =
      !best ||
      pass.pass < best.pass.pass ||
      (pass === best.pass && entry.lastServed < best.entry.lastServed) ||
      (pass !== best.pass && pass.pass === best.pass.pass && entry.fairnessKey < best.entry.fairnessKey);
    if (better) best = { entry, pass };
  }
  return best;
}

/** The class's pass; a class that comes back starts at the lowest pass of its priority (no credit for idling). */
function passOf(state: AllocatorState, entry: HolderDemand): ClassPass {
  const found = state.passes.find((p) => sameClassKey(p, entry));
  if (found) return found;
  const ofPriority = state.passes.filter((p) => p.priority === entry.priority).map((p) => p.pass);
  const lowest = ofPriority.length > 0 ? Math.min(...ofPriority) : 0;
  const pass = { priority: entry.priority, fairnessKey: entry.fairnessKey, pass: lowest };
  state.passes.push(pass);
  return pass;
}

/** Keeps the passes of classes with demand, each priority's moved so its lowest is 0: bounded, however long it runs. */
function prunePasses(state: AllocatorState): void {
  state.passes = state.passes.filter((p) => state.demand.some((d) => d.calls > 0 && sameClassKey(p, d)));
  for (const priority of new Set(state.passes.map((p) => p.priority))) {
    const ofPriority = state.passes.filter((p) => p.priority === priority);
    const lowest = Math.min(...ofPriority.map((p) => p.pass));
    for (const p of ofPriority) p.pass -= lowest;
  }
}

function sameClassKey(a: { priority: number; fairnessKey: string }, b: { priority: number; fairnessKey: string }) {
  return a.priority === b.priority && a.fairnessKey === b.fairnessKey;
}

function sameClass(a: DemandEntry, b: DemandEntry): boolean {
  return sameClassKey(a, b) && a.weight === b.weight;
}

/** What is used and what is allowed at one instant, kept up to date while one `allocate` grants. */
interface Room {
  paused: boolean;
  percent: number;
  limits: ScopeLimits;
  inFlight: number;
  used: WindowTotals;
  /** Tokens reserved by calls in flight. */
  reserved: { inputTokens: number; outputTokens: number };
}

function roomAt(state: AllocatorState, now: number): Room {
  const percent = ratePercentAt(state.throttle, now);
  const reserved = { inputTokens: 0, outputTokens: 0 };
  for (const lease of state.leases) {
    reserved.inputTokens += lease.inputTokens;
    reserved.outputTokens += lease.outputTokens;
  }
  const used = windowTotals(state.window, now);
  return { paused: percent === 0, percent, limits: state.limits, inFlight: state.leases.length, used, reserved };
}

function take(room: Room, call: { inputTokens: number; outputTokens: number }): void {
  room.inFlight += 1;
  room.used.requests += 1;
  room.reserved.inputTokens += call.inputTokens;
  room.reserved.outputTokens += call.outputTokens;
}

/** The limits at the throttle's rate now (concurrency capped at {@link MAX_LEASES}). */
function effective(room: Room): Required<Omit<ScopeLimits, 'leaseMs'>> & { configured: ScopeLimits } {
  const at = (limit: number | undefined) => (limit === undefined ? Infinity : scaled(limit, room.percent));
  const { limits } = room;
  return {
    concurrency: Math.min(MAX_LEASES, at(limits.concurrency)),
    requestsPerMinute: at(limits.requestsPerMinute),
    tokensPerMinute: at(limits.tokensPerMinute),
    inputTokensPerMinute: at(limits.inputTokensPerMinute),
    outputTokensPerMinute: at(limits.outputTokensPerMinute),
    configured: limits,
  };
}

/**
 * The limit a call of this size would pass if granted now, or undefined when it fits. A call larger than a token
 * limit fits only when nothing else is counted (else it would wait for ever).
 */
function bindingLimit(room: Room, call: { inputTokens: number; outputTokens: number }): BindingLimit | undefined {
  if (room.paused) return 'throttle';
  const limit = effective(room);
  if (room.inFlight + 1 > limit.concurrency) return 'concurrency';
  if (room.used.requests + 1 > limit.requestsPerMinute) return 'requests_per_minute';
  const input = room.used.inputTokens + room.reserved.inputTokens;
  const output = room.used.outputTokens + room.reserved.outputTokens;
  const over = (used: number, need: number, max: number) => used > 0 && used + Math.min(need, max) > max;
  if (over(input + output, call.inputTokens + call.outputTokens, limit.tokensPerMinute)) return 'tokens_per_minute';
  if (over(input, call.inputTokens, limit.inputTokensPerMinute)) return 'input_tokens_per_minute';
  if (over(output, call.outputTokens, limit.outputTokensPerMinute)) return 'output_tokens_per_minute';
  return undefined;
}

/** Each limit's use at `now`, and what each waiting class waits for. Reads only: queries may call it. */
export function usage(state: AllocatorState, now: number): UsageSnapshot {
  const live = { ...state, leases: state.leases.filter((l) => l.expiresAt > now) };
  const room = roomAt(live, now);
  const limit = effective(room);
  const { configured } = limit;
  const use = (used: number, max: number, written: number | undefined): LimitUse | undefined =>
    written === undefined ? undefined : { used, limit: max, configured: written };
  const tokens = {
    input: room.used.inputTokens + room.reserved.inputTokens,
    output: room.used.outputTokens + room.reserved.outputTokens,
  };
  const holders = new Set([...live.leases.map((l) => l.holder), ...state.demand.map((d) => d.holder)]).size;
  const snapshot: UsageSnapshot = {
    at: now,
    inFlight: room.inFlight,
    waiting: waitingClasses(state, room, now),
    holders,
  };
  const fields = {
    concurrency: use(room.inFlight, limit.concurrency, configured.concurrency),
    requestsPerMinute: use(room.used.requests, limit.requestsPerMinute, configured.requestsPerMinute),
    tokensPerMinute: use(tokens.input + tokens.output, limit.tokensPerMinute, configured.tokensPerMinute),
    inputTokensPerMinute: use(tokens.input, limit.inputTokensPerMinute, configured.inputTokensPerMinute),
    outputTokensPerMinute: use(tokens.output, limit.outputTokensPerMinute, configured.outputTokensPerMinute),
  };
  for (const [name, value] of Object.entries(fields)) if (value) Object.assign(snapshot, { [name]: value });
  if (state.throttle.until !== 0 && room.percent < 100)
    snapshot.throttle = { until: state.throttle.until, ratePercent: room.percent };
  return snapshot;
}

/** The classes with calls waiting (summed over holders), each with the limit that holds it back. */
function waitingClasses(state: AllocatorState, room: Room, now: number): WaitingClass[] {
  const classes: (WaitingClass & { inputTokens: number; outputTokens: number })[] = [];
  for (const d of state.demand) {
    if (d.calls <= 0 || d.updatedAt + DEMAND_TTL_MS <= now) continue;
    const same = classes.find((c) => sameClassKey(c, d));
    if (same) {
      same.calls += d.calls;
      same.inputTokens = Math.max(same.inputTokens, d.inputTokens);
      same.outputTokens = Math.max(same.outputTokens, d.outputTokens);
    } else {
      const { priority, fairnessKey, calls, inputTokens, outputTokens } = d;
      classes.push({ priority, fairnessKey, calls, inputTokens, outputTokens, binds: 'queue' });
    }
  }
  classes.sort((a, b) => a.priority - b.priority || (a.fairnessKey < b.fairnessKey ? -1 : 1));
  return classes.map((c) => ({
    priority: c.priority,
    fairnessKey: c.fairnessKey,
    calls: c.calls,
    binds: bindingLimit(room, c) ?? 'queue',
  }));
}

/**
 * When something may change by time alone: a lease expires, forgotten demand goes, and while calls wait, the
 * window frees capacity or the throttle moves on. Undefined when nothing will.
 */
export function nextWakeAt(state: AllocatorState, now: number): number | undefined {
  const times = state.leases.map((l) => l.expiresAt);
  if (state.demand.length > 0) {
    times.push(...state.demand.map((d) => d.updatedAt + DEMAND_TTL_MS));
    const frees = windowFreesAt(state.window, now);
    const throttleMoves = throttleChangesAt(state.throttle, now);
    if (frees !== undefined) times.push(frees);
    if (throttleMoves !== undefined) times.push(throttleMoves);
  }
  return times.length > 0 ? Math.max(now, Math.min(...times)) : undefined;
}
