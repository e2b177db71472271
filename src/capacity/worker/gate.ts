/**
 * A worker process's door to one scope's limiter (issue 39, docs/deploy.md "Model capacity"): model calls wait
 * here for a grant, and the gate talks to the `treadleLimiter` workflow for all of them at once.
 *
 * - At most ONE `acquire` update is open per process and scope (a long-poll carrying the process's whole demand
 *   by class), so a limiter serves ten processes within the server's default `history.maxInFlightUpdates` (10).
 * - Releases (with the reply's usage) and renewals go as signals, batched; a 429's retry-after goes at once.
 * - Grants come per class (priority, fairness key); within a class the calls waiting longest go first.
 * - The limiter is started by the first acquire (update-with-start), so nothing needs setting up. It runs at
 *   the highest priority: its workflow tasks (every grant is one) share the task queues with the items' own, and
 *   a grant queued behind a backlog of items waiting for that grant would slow every call (a continued run keeps it).
 */
import { WithStartWorkflowOperation, WorkflowUpdateStage, type Client } from '@temporalio/client';
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import {
  acquireUpdate,
  demandProblem,
  demandSignal,
  releaseSignal,
  renewSignal,
  throttleSignal,
  usageQuery,
} from '../messages';
import {
  limiterWorkflowId,
  MAX_ACQUIRE_WAIT_MS,
  scopeLimits,
  type AcquireResult,
  type CapacityClass,
  type DemandEntry,
  type Grant,
  type ScopeLimits,
  type ThrottleInput,
  type TokenUsage,
  type UsageSnapshot,
  type WaitingClass,
} from '../shapes';
import type { LimiterInput, treadleLimiter } from '../workflow';
import { HIGHEST_PRIORITY } from '../../model/priority';

/** The limiter's place in the task queues: before any item's tasks (see the module's comment). */
const LIMITER_PRIORITY = { priorityKey: HIGHEST_PRIORITY };
/** Releases wait this long to go out together. */
const RELEASE_BATCH_MS = 10;
/** After a failed acquire (server unreachable, limiter restarting), the gate tries again after this. */
const ACQUIRE_RETRY_MS = 1_000;

/** What a gate needs: the Temporal client, where the limiter runs, and the scope it limits. */
export interface CapacityGateOptions {
  client: Client;
  /** The task queue of the workers that run the limiter workflow (the core queue). */
  taskQueue: string;
  scope: LimiterInput['scope'];
  limits: ScopeLimits;
  /** This process's name at the limiter (default host, pid and a random suffix). */
  holder?: string;
}

/** A call waiting for capacity: its class and its token estimate. */
export interface CapacityRequest extends CapacityClass {
  inputTokens: number;
  outputTokens: number;
}

/** Capacity for one call: release it when the call ends, with the tokens the reply says it used. */
export interface CapacityLease {
  readonly leaseId: string;
  /** Ends the call; `usage` replaces the estimate (omit it when unknown, and the estimate stays charged). */
  release(usage?: TokenUsage): void;
}

interface Waiter {
  request: CapacityRequest;
  resolve: (lease: CapacityLease) => void;
  reject: (error: unknown) => void;
}

/** One scope's capacity for this process (see the module's comment). */
export class CapacityGate {
  private readonly holder: string;
  private readonly queue: Waiter[] = [];
  private readonly held = new Set<string>();
  private releases: { leaseId: string; usage?: TokenUsage }[] = [];
  private releaseTimer: NodeJS.Timeout | undefined;
  private demandTimer: NodeJS.Timeout | undefined;
  private readonly renewTimer: NodeJS.Timeout;
  private polling = false;
  /** The open `acquire` has reached the limiter: a `demand` signal sent now is applied after it. */
  private accepted = false;
  /** Calls arrived since the open `acquire` was sent: the limiter has an older demand than the queue's. */
  private demandChanged = false;
  private closed = false;
  /** What the limiter last said holds this process's classes back (for status lines). */
  lastWaiting: WaitingClass[] = [];

  private readonly options: CapacityGateOptions;

  constructor(options: CapacityGateOptions) {
    this.options = { ...options, limits: scopeLimits(options.limits) };
    this.holder = options.holder ?? `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
    // Renew three times per lease bound: a renewal lost or late still leaves two chances.
    this.renewTimer = setInterval(() => this.renew(), Math.max(500, options.limits.leaseMs / 3));
    this.renewTimer.unref();
  }

  /** Waits for capacity for one call; rejects when `signal` aborts first or the gate closes. */
  acquire(request: CapacityRequest, signal?: AbortSignal): Promise<CapacityLease> {
    if (this.closed) return Promise.reject(new Error('the capacity gate is closed'));
    // The limiter would refuse the whole process's acquire for one bad request: refuse that request here.
    const problem = demandProblem({ holder: this.holder, demand: [{ ...request, calls: 1 }] });
    if (problem) return Promise.reject(new TypeError(`capacity request: ${problem.replace(/^demand\.0\./, '')}`));
    return new Promise<CapacityLease>((resolve, reject) => {
      const waiter: Waiter = { request, resolve, reject };
      this.queue.push(waiter);
      signal?.addEventListener(
        'abort',
        () => {
          const index = this.queue.indexOf(waiter);
          if (index >= 0) this.queue.splice(index, 1);
          reject(signal.reason);
        },
        { once: true },
      );
      if (this.polling) this.scheduleDemand();
      else void this.poll();
    });
  }

  /**
   * A call that arrives while an `acquire` is open tells the limiter at once (a `demand` signal, batched), so an
   * urgent call does not wait for the open long-poll to end. Not before the limiter has accepted that `acquire`:
   * a signal can overtake an update on its way, and the update's older demand would then replace the newer one.
   */
  private scheduleDemand(): void {
    this.demandChanged = true;
    if (!this.accepted) return;
    this.demandTimer ??= setTimeout(() => {
      this.demandTimer = undefined;
      // A newer `acquire` is on its way: the change goes out when it is accepted (or it carries it).
      if (!this.accepted) return;
      this.demandChanged = false;
      if (!this.polling || this.queue.length === 0) return;
      void this.handle()
        .signal(demandSignal, { holder: this.holder, demand: this.demand() })
        .catch(() => undefined);
    }, RELEASE_BATCH_MS);
  }

  /** A provider's 429/529 asked to wait `retryAfterMs`: every process of the scope waits (sent at once). */
  async throttle(retryAfterMs: number): Promise<void> {
    const { client, taskQueue, scope, limits } = this.options;
    await client.workflow.signalWithStart<typeof treadleLimiter, [ThrottleInput]>('treadleLimiter', {
      workflowId: this.workflowId(),
      taskQueue,
      args: [{ scope, limits }],
      signal: throttleSignal,
      signalArgs: [{ retryAfterMs: Math.max(0, Math.round(retryAfterMs)) }],
      priority: LIMITER_PRIORITY,
    });
  }

  /** Each limit's use now, as the limiter says (a query: no history). */
  usage(): Promise<UsageSnapshot> {
    return this.handle().query(usageQuery);
  }

  /** Stops renewing, sends what is left to release and rejects the calls still waiting. */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.renewTimer);
    clearTimeout(this.demandTimer);
    for (const waiter of this.queue.splice(0)) waiter.reject(new Error('the capacity gate is closed'));
    await this.flushReleases();
  }

  /** The process's demand: its waiting calls summed by class, each with the largest estimate of the class. */
  private demand(): DemandEntry[] {
    const entries: DemandEntry[] = [];
    for (const { request } of this.queue) {
      const same = entries.find((e) => e.priority === request.priority && e.fairnessKey === request.fairnessKey);
      if (!same) {
        entries.push({ ...request, calls: 1 });
        continue;
      }
      same.calls += 1;
      same.inputTokens = Math.max(same.inputTokens, request.inputTokens);
      same.outputTokens = Math.max(same.outputTokens, request.outputTokens);
    }
    return entries;
  }

  /** The one open `acquire` of this process: asks while calls wait, hands each grant to a waiting call of its class. */
  private async poll(): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    try {
      while (this.queue.length > 0 && !this.closed) {
        let grants: Grant[];
        try {
          const result = await this.acquireOnce();
          grants = result.grants;
          this.lastWaiting = result.waiting;
        } catch {
          await new Promise((resolve) => setTimeout(resolve, ACQUIRE_RETRY_MS));
          continue;
        }
        for (const grant of grants) this.hand(grant);
      }
    } finally {
      this.polling = false;
    }
  }

  /**
   * One long-poll carrying the whole demand now. It returns once the limiter has accepted it (and with the answer
   * when that came at once), so calls that arrived meanwhile are then told by a `demand` signal the limiter
   * applies after it.
   */
  private async acquireOnce(): Promise<AcquireResult> {
    const { client, taskQueue, scope, limits } = this.options;
    this.accepted = false;
    this.demandChanged = false;
    try {
      const update = await client.workflow.startUpdateWithStart(acquireUpdate, {
        args: [{ holder: this.holder, demand: this.demand(), waitMs: MAX_ACQUIRE_WAIT_MS, limits }],
        waitForStage: WorkflowUpdateStage.ACCEPTED,
        startWorkflowOperation: new WithStartWorkflowOperation<typeof treadleLimiter>('treadleLimiter', {
          workflowId: this.workflowId(),
          taskQueue,
          args: [{ scope, limits }],
          workflowIdConflictPolicy: 'USE_EXISTING',
          priority: LIMITER_PRIORITY,
        }),
      });
      this.accepted = true;
      if (this.demandChanged) this.scheduleDemand();
      return await update.result();
    } finally {
      this.accepted = false;
    }
  }

  /** Gives a grant to the call of its class waiting longest; a grant nobody waits for any more goes back. */
  private hand(grant: Grant): void {
    const index = this.queue.findIndex(
      (w) => w.request.priority === grant.priority && w.request.fairnessKey === grant.fairnessKey,
    );
    this.held.add(grant.leaseId);
    const lease = this.lease(grant.leaseId);
    if (index < 0) return lease.release({ inputTokens: 0, outputTokens: 0 });
    const [waiter] = this.queue.splice(index, 1);
    waiter!.resolve(lease);
  }

  private lease(leaseId: string): CapacityLease {
    let released = false;
    return {
      leaseId,
      release: (usage) => {
        if (released) return;
        released = true;
        this.held.delete(leaseId);
        this.releases.push(usage ? { leaseId, usage } : { leaseId });
        this.releaseTimer ??= setTimeout(() => void this.flushReleases(), RELEASE_BATCH_MS);
      },
    };
  }

  private async flushReleases(): Promise<void> {
    clearTimeout(this.releaseTimer);
    this.releaseTimer = undefined;
    const releases = this.releases.splice(0);
    if (releases.length === 0) return;
    // A release that cannot be sent is not retried: the lease expires and its estimate stays charged.
    await this.handle()
      .signal(releaseSignal, { holder: this.holder, releases })
      .catch(() => undefined);
  }

  private renew(): void {
    if (this.held.size === 0) return;
    void this.handle()
      .signal(renewSignal, { holder: this.holder, leaseIds: [...this.held] })
      .catch(() => undefined);
  }

  private workflowId(): string {
    const { provider, model, keyId } = this.options.scope;
    return limiterWorkflowId(provider, model, keyId);
  }

  private handle() {
    return this.options.client.workflow.getHandle(this.workflowId());
  }
}
