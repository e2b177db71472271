/**
 * The limiter workflow `treadleLimiter`: one per scope (provider, model, API key; workflow id from
 * `limiterWorkflowId`), started on demand by the first worker that asks (update-with-start). It holds the
 * pure allocator's state and applies what the workers send (messages.ts); the decisions are allocator.ts's.
 *
 * - `acquire` registers a process's demand and waits (up to 10 s, a long-poll) until capacity is granted to it;
 *   it answers the grants, or none and what binds.
 * - The loop wakes on any message and at the allocator's `nextWakeAt` (a lease expiring, the window freeing
 *   tokens, a throttle ending), and grants to the processes whose `acquire` is open.
 * - It continues as new when Temporal suggests it or the history passes {@link LIMITER_HISTORY_EVENTS},
 *   after letting open `acquire`s answer, carrying only the allocator's state (bounded: see allocator.ts).
 */
import {
  allHandlersFinished,
  condition,
  continueAsNew,
  log,
  setHandler,
  setWorkflowOptions,
  workflowInfo,
} from '@temporalio/workflow';
import {
  allocate,
  newAllocator,
  nextWakeAt,
  release,
  renew,
  setDemand,
  throttle,
  usage,
  type AllocatorState,
} from './allocator';
import {
  acquireUpdate,
  demandProblem,
  demandSignal,
  leasesProblem,
  MAX_RETRY_AFTER_MS,
  releaseSignal,
  renewSignal,
  throttleSignal,
  usageQuery,
  validateAcquire,
} from './messages';
import {
  MAX_ACQUIRE_WAIT_MS,
  type AcquireInput,
  type AcquireResult,
  type Grant,
  type ScopeLimits,
  type WaitingClass,
} from './shapes';

/** A limiter run continues as new past this many history events (sooner when Temporal suggests it). */
export const LIMITER_HISTORY_EVENTS = 10_000;

/** The limiter's input: its scope and limits, and on a continued run the allocator's state. */
export interface LimiterInput {
  /** Which calls it limits (for logs and the Web UI); the key id is a short hash of the key, never the key. */
  scope: { provider: string; model: string; keyId: string };
  limits: ScopeLimits;
  /** The allocator's state from the run before (continue-as-new). */
  carried?: AllocatorState;
  /** Continue as new past this many events (tests set a small one); default {@link LIMITER_HISTORY_EVENTS}. */
  maxHistoryEvents?: number;
}

/** Holds one scope's capacity for every worker (see the module's comment). */
export async function treadleLimiter(input: LimiterInput): Promise<void> {
  const limiter = new Limiter(input);
  limiter.install();
  await limiter.run();
}

// On a versioned worker (docs/deploy.md, "Upgrading workers with Worker Deployment Versioning") the limiter moves to
// the current build at its next task: pinned, it would stay on a build that drains and be lost with its workers,
// while items of every live build call it. Each run's history is short (it continues as new), so the new build
// replays it as it replays any history: a change to its commands takes `patched()`. Not a command, so replay is
// unchanged. Only on a versioned run (its first task ran on a deployment version): an unversioned worker's task
// fails when it names a behaviour.
setWorkflowOptions(
  () => (workflowInfo().currentDeploymentVersion?.deploymentName ? { versioningBehavior: 'AUTO_UPGRADE' } : {}),
  treadleLimiter,
);

/** The limiter's state and message handlers; the decisions are the allocator's. */
class Limiter {
  private readonly state: AllocatorState;
  /** Processes with an `acquire` open (how many: normally one each), the only ones granted to. */
  private readonly waiting = new Map<string, number>();
  /** Grants made to a process, until its open `acquire` answers them. */
  private readonly pending = new Map<string, Grant[]>();
  /** Something arrived since the loop last allocated. */
  private changed = true;
  /** Continuing as new: open `acquire`s answer now with what they have. */
  private draining = false;
  /** The time a fired wake-up proves has come (see {@link Limiter.now}). */
  private clockFloor = 0;

  constructor(private readonly input: LimiterInput) {
    this.state = input.carried ?? newAllocator(input.limits);
  }

  /**
   * The workflow's time, but never before a wake-up that fired: the task that follows one timed out on a dead
   * worker's sticky queue can carry the time of the task before it, and would keep a dead worker's expired leases
   * (and renew the wait for them) for another lease bound.
   */
  private now(): number {
    return Math.max(Date.now(), this.clockFloor);
  }

  /** Registers every handler before the first await. */
  install(): void {
    setHandler(acquireUpdate, (request) => this.acquire(request), { validator: validateAcquire });
    setHandler(releaseSignal, (signal) => {
      const problem = leasesProblem(signal, 'releases');
      if (problem) return log.warn('release signal ignored', { problem });
      release(this.state, signal.holder, signal.releases, this.now());
      this.changed = true;
    });
    setHandler(renewSignal, (signal) => {
      const problem = leasesProblem(signal, 'leaseIds');
      if (problem) return log.warn('renew signal ignored', { problem });
      renew(this.state, signal.holder, signal.leaseIds, this.now());
      // The loop's wake-up moves to the new first expiry: a dead worker's leases end when it comes, not later.
      this.changed = true;
    });
    setHandler(throttleSignal, ({ retryAfterMs }) => {
      if (typeof retryAfterMs !== 'number' || !(retryAfterMs >= 0)) return log.warn('throttle signal ignored', {});
      throttle(this.state, Math.min(retryAfterMs, MAX_RETRY_AFTER_MS), this.now());
      this.changed = true;
    });
    setHandler(demandSignal, (signal) => {
      const problem = demandProblem(signal);
      if (problem) return log.warn('demand signal ignored', { problem });
      setDemand(this.state, signal.holder, signal.demand, this.now());
      this.changed = true;
    });
    setHandler(usageQuery, () => usage(this.state, this.now()));
  }

  /** Registers the process's demand and waits for grants, up to its wait; answers them, or what binds. */
  private async acquire({
    holder,
    demand,
    waitMs = MAX_ACQUIRE_WAIT_MS,
    limits,
  }: AcquireInput): Promise<AcquireResult> {
    if (limits && JSON.stringify(limits) !== JSON.stringify(this.state.limits)) {
      log.info('limiter adopts new limits', { holder, limits });
      this.state.limits = limits;
    }
    setDemand(this.state, holder, demand, this.now());
    this.waiting.set(holder, (this.waiting.get(holder) ?? 0) + 1);
    this.changed = true;
    try {
      // Grants at once what is free; otherwise waits for the loop to grant (or the wait to end).
      if (!this.draining) this.grant();
      const granted = () => (this.pending.get(holder)?.length ?? 0) > 0;
      if (!granted() && !this.draining && waitMs > 0) await condition(() => granted() || this.draining, waitMs);
    } finally {
      const open = (this.waiting.get(holder) ?? 1) - 1;
      if (open > 0) this.waiting.set(holder, open);
      else this.waiting.delete(holder);
    }
    const grants = this.pending.get(holder) ?? [];
    this.pending.delete(holder);
    return { grants, leaseMs: this.state.limits.leaseMs, waiting: grants.length > 0 ? [] : this.waitingOf(holder) };
  }

  /** What holds back the classes `holder` has waiting. */
  private waitingOf(holder: string): WaitingClass[] {
    const mine = this.state.demand.filter((d) => d.holder === holder);
    return usage(this.state, this.now()).waiting.filter((w) =>
      mine.some((d) => d.priority === w.priority && d.fairnessKey === w.fairnessKey),
    );
  }

  /** Grants to open `acquire`s whenever something changed or time moved a limit; continues as new when due. */
  async run(): Promise<never> {
    const maxEvents = this.input.maxHistoryEvents ?? LIMITER_HISTORY_EVENTS;
    for (;;) {
      this.changed = false;
      this.grant();
      const info = workflowInfo();
      if (info.continueAsNewSuggested || info.historyLength > maxEvents) return this.continueAsNew();
      const wake = nextWakeAt(this.state, this.now());
      if (wake === undefined) await condition(() => this.changed);
      else if (!(await condition(() => this.changed, Math.max(1, wake - this.now()))))
        this.clockFloor = Math.max(this.clockFloor, wake);
    }
  }

  /** Moves the allocator to now (expiring leases) and hands what it grants to the open `acquire`s. */
  private grant(): void {
    for (const grant of allocate(this.state, this.now(), new Set(this.waiting.keys()))) {
      const list = this.pending.get(grant.holder) ?? [];
      list.push(grant);
      this.pending.set(grant.holder, list);
    }
  }

  /** Lets open `acquire`s answer (no new grants meanwhile), then carries the allocator's state to a new run. */
  private async continueAsNew(): Promise<never> {
    this.draining = true;
    await condition(allHandlersFinished);
    log.info('limiter continues as new', { leases: this.state.leases.length, demand: this.state.demand.length });
    return continueAsNew<typeof treadleLimiter>({ ...this.input, limits: this.state.limits, carried: this.state });
  }
}
