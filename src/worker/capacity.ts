/**
 * Model capacity on the worker (issue 39, docs/configuration.md "Model capacity"): with a limits file
 * (`TREADLE_LIMITS`), every model call of the process waits at its scope's {@link CapacityGate} for a grant
 * from the limiter workflow shared by every worker, and a 429/529 slows that limiter for all of them. This is
 * the adapter between the agents' {@link CallThrottle} and the gates: the call's class (priority, fairness key
 * and weight) comes from the activity's Temporal priority, the wait is heartbeated as `CapacityWaitDetails`
 * (src/capacity/waiting.ts), and the process's Prometheus metrics count calls and tokens by scope.
 */
import { Context } from '@temporalio/activity';
import { Client } from '@temporalio/client';
import type { MetricGauge, MetricHistogram, MetricCounter } from '@temporalio/common';
import { Runtime, type NativeConnection } from '@temporalio/worker';
import path from 'node:path';
import {
  PROCESS_THROTTLE,
  type CallCapacityRequest,
  type CallLease,
  type CallThrottle,
  type CapacityWait as ThrottleWait,
  type ProcessThrottle,
  type ThrottleScope,
} from '../agents/call-throttle';
import { heartbeatWith } from '../activities/supervision';
import { DEFAULT_FAIRNESS_KEY, DEFAULT_PRIORITY, describeUsage, type CapacityLimits } from '../capacity/shapes';
import type { CapacityWaitDetails } from '../capacity/waiting';
import type { CapacityGate, CapacityLease } from '../capacity/worker/gate';
import { CapacityGates } from '../capacity/worker/gates';
import { readLimitsFile } from '../capacity/worker/limits-file';
import { TreadleError } from '../config/errors';
import { itemPriorityOf } from '../model/priority';

/** The setting naming the limits file. */
export const LIMITS_ENV = 'TREADLE_LIMITS';
/** A call that has not got its grant after this long heartbeats that it waits for capacity. */
const WAIT_NOTICE_MS = 500;
/** While it waits, the call says again what holds it back this often. */
const WAIT_REFRESH_MS = 5_000;
/** ... and this soon when the limiter did not say (not started yet, busy): the next answer names the limit. */
const WAIT_RETRY_MS = 1_000;

/**
 * The limits `TREADLE_LIMITS` names (a path, relative to the working directory), or undefined when it is unset
 * or empty (no shared limiter: each process throttles only itself). A file that cannot be read or holds
 * anything wrong is a configuration error listing every problem with its file and line.
 */
export function limitsFromEnv(env: NodeJS.ProcessEnv = process.env): CapacityLimits | undefined {
  const file = env[LIMITS_ENV]?.trim();
  if (!file) return undefined;
  const parsed = readLimitsFile(path.resolve(file));
  if (parsed.ok) return parsed.limits;
  const list = parsed.problems.map((problem) => `\n  ${problem}`).join('');
  throw new TreadleError(`${LIMITS_ENV} names a limits file that cannot be used:${list}`, 'config', parsed.problems);
}

/** What {@link GatedThrottle} needs: where the limiters run and what they limit. */
export interface GatedThrottleOptions {
  connection: NativeConnection;
  namespace: string;
  /** The core task queue: its workers run the limiter workflows. */
  taskQueue: string;
  limits: CapacityLimits;
  /** This process's name at the limiters (default host, pid and a random suffix). */
  holder?: string;
  /** The process-local hold-off after a 429 (default {@link PROCESS_THROTTLE}). */
  local?: ProcessThrottle;
}

/**
 * A {@link CallThrottle} whose calls wait at the process's capacity gates: `acquire` asks the scope's limiter
 * for a grant, `reportRetryAfter` slows it for every worker (and holds this process off at once).
 */
export class GatedThrottle implements CallThrottle {
  private readonly gates: CapacityGates;
  private readonly local: ProcessThrottle;
  private readonly metrics = new CapacityMetrics();

  constructor(private readonly options: GatedThrottleOptions) {
    const { connection, namespace, taskQueue, limits, holder } = options;
    const client = new Client({ connection, namespace });
    this.gates = new CapacityGates({ client, taskQueue, limits, ...(holder !== undefined && { holder }) });
    this.local = options.local ?? PROCESS_THROTTLE;
  }

  waitForCapacity(scope: ThrottleScope, wait?: ThrottleWait): Promise<boolean> {
    return this.local.waitForCapacity(scope, wait);
  }

  reportRetryAfter(scope: ThrottleScope, retryAfterMs: number): void {
    this.local.reportRetryAfter(scope, retryAfterMs);
    const gate = this.gates.forCall(scope.provider, scope.model);
    if (!gate) return;
    this.metrics.throttled(scope);
    // Sent at once; a lost report still leaves this process held off, and the next 429 reports again.
    void gate.throttle(retryAfterMs).catch(() => undefined);
  }

  async acquire(scope: ThrottleScope, request: CallCapacityRequest): Promise<CallLease | undefined> {
    const gate = this.gates.forCall(scope.provider, scope.model);
    if (!gate) return undefined;
    const item = itemPriorityOf(activityPriority());
    const fairnessKey = item.fairnessKey ?? DEFAULT_FAIRNESS_KEY;
    const { fairness } = this.options.limits;
    const weight = fairness.weights[fairnessKey] ?? item.fairnessWeight ?? fairness.defaultWeight;
    const capacityRequest = { priority: item.priority ?? DEFAULT_PRIORITY, fairnessKey, weight, ...request.estimate };
    const started = Date.now();
    const waiting = new WaitNotice(gate, `${scope.provider}/${scope.model}`);
    this.metrics.waiting(scope, +1);
    let lease: CapacityLease;
    try {
      lease = await withDeadline((signal) => gate.acquire(capacityRequest, signal), request);
    } finally {
      this.metrics.waiting(scope, -1);
      this.metrics.waited(scope, Date.now() - started);
      waiting.end();
    }
    this.metrics.granted(scope, request.estimate.inputTokens + request.estimate.outputTokens);
    let released = false;
    return {
      release: (usage) => {
        if (released) return;
        released = true;
        this.metrics.released(scope, usage.inputTokens + usage.outputTokens);
        lease.release(usage);
      },
    };
  }

  /** Sends what is left to release and stops the gates (the worker is stopping). */
  close(): Promise<void> {
    return this.gates.close();
  }
}

/** The activity's Temporal priority, or undefined outside an activity. */
function activityPriority() {
  try {
    return Context.current().info.priority;
  } catch {
    return undefined;
  }
}

/** Runs `wait` with a signal that aborts with the request's, or when its `until` passes (with a reason saying so). */
async function withDeadline<T>(wait: (signal: AbortSignal) => Promise<T>, request: ThrottleWait): Promise<T> {
  const controller = new AbortController();
  const onAbort = (): void => controller.abort(request.signal!.reason);
  request.signal?.addEventListener('abort', onAbort, { once: true });
  if (request.signal?.aborted) onAbort();
  const timer =
    request.until === undefined
      ? undefined
      : setTimeout(
          () => controller.abort(new Error('no capacity was granted in time; the call gives up as retryable')),
          Math.max(0, request.until - Date.now()),
        );
  try {
    return await wait(controller.signal);
  } finally {
    clearTimeout(timer);
    request.signal?.removeEventListener('abort', onAbort);
  }
}

/**
 * Says, in the activity's heartbeats, that a call waits for capacity and what holds it back, once it has waited
 * {@link WAIT_NOTICE_MS} (a grant that comes at once says nothing), again every {@link WAIT_REFRESH_MS}, and
 * takes it back when the wait ends.
 */
class WaitNotice {
  private timer: NodeJS.Timeout | undefined;
  private said = false;
  private ended = false;
  private readonly since = new Date().toISOString();

  constructor(
    private readonly gate: CapacityGate,
    private readonly scope: string,
  ) {
    this.timer = setTimeout(() => void this.say(), WAIT_NOTICE_MS);
  }

  private async say(): Promise<void> {
    let waitingFor: string;
    let answered = true;
    try {
      waitingFor = describeUsage(await this.gate.usage());
    } catch {
      answered = false;
      const binds = this.gate.lastWaiting[0]?.binds;
      waitingFor = binds ? `the ${binds.replace(/_/g, ' ')} limit` : 'capacity (the limiter has not answered yet)';
    }
    if (this.ended) return;
    const details: CapacityWaitDetails = { capacity: { scope: this.scope, waitingFor, since: this.since } };
    heartbeatWith({ ...details });
    this.said = true;
    this.timer = setTimeout(() => void this.say(), answered ? WAIT_REFRESH_MS : WAIT_RETRY_MS);
  }

  end(): void {
    this.ended = true;
    clearTimeout(this.timer);
    if (this.said) heartbeatWith({ capacity: undefined });
  }
}

/**
 * The process's capacity metrics, by scope (`provider`, `model`; never the key), on the worker's Prometheus
 * endpoint (docs/deploy.md "Monitoring"). Made on first use: the Temporal runtime exists by then.
 */
class CapacityMetrics {
  private made:
    | {
        inFlight: MetricGauge;
        waiting: MetricGauge;
        granted: MetricCounter;
        used: MetricCounter;
        throttled: MetricCounter;
        waitLatency: MetricHistogram;
      }
    | undefined;
  private readonly counts = new Map<string, { inFlight: number; waiting: number }>();

  private meter() {
    if (this.made) return this.made;
    const meter = Runtime.instance().metricMeter;
    this.made = {
      inFlight: meter.createGauge('treadle_capacity_calls_in_flight', 'int', '', 'Model calls holding a grant'),
      waiting: meter.createGauge('treadle_capacity_calls_waiting', 'int', '', 'Model calls waiting for a grant'),
      granted: meter.createCounter('treadle_capacity_tokens_granted', '', 'Tokens charged at grant (estimates)'),
      used: meter.createCounter('treadle_capacity_tokens_used', '', 'Tokens the replies said they used'),
      throttled: meter.createCounter('treadle_capacity_throttled', '', 'Calls answered 429 or 529'),
      // In ms, like the SDK's own latencies (its default buckets run from 50 ms to 10 s and more).
      waitLatency: meter.createHistogram(
        'treadle_capacity_wait_latency',
        'int',
        'ms',
        'Time a call waited for its grant',
      ),
    };
    return this.made;
  }

  private count(scope: ThrottleScope) {
    const key = `${scope.provider}/${scope.model}`;
    let counts = this.counts.get(key);
    if (!counts) this.counts.set(key, (counts = { inFlight: 0, waiting: 0 }));
    return counts;
  }

  private tags(scope: ThrottleScope) {
    return { provider: scope.provider, model: scope.model };
  }

  waiting(scope: ThrottleScope, change: number): void {
    const counts = this.count(scope);
    counts.waiting += change;
    this.meter().waiting.set(counts.waiting, this.tags(scope));
  }

  waited(scope: ThrottleScope, ms: number): void {
    this.meter().waitLatency.record(Math.round(ms), this.tags(scope));
  }

  granted(scope: ThrottleScope, tokens: number): void {
    const counts = this.count(scope);
    counts.inFlight += 1;
    this.meter().inFlight.set(counts.inFlight, this.tags(scope));
    this.meter().granted.add(tokens, this.tags(scope));
  }

  released(scope: ThrottleScope, tokens: number): void {
    const counts = this.count(scope);
    counts.inFlight -= 1;
    this.meter().inFlight.set(counts.inFlight, this.tags(scope));
    this.meter().used.add(tokens, this.tags(scope));
  }

  throttled(scope: ThrottleScope): void {
    this.meter().throttled.add(1, this.tags(scope));
  }
}
