/**
 * `client.items`: work items — start one, read its state, events, usage and audit, wait for its result, watch it
 * run. The flat `TreadleClient` methods of the same meaning (`start`, `getState`, `result`, …) are aliases.
 */
import type { WorkflowExecutionDescription } from '@temporalio/client';
import type { AuditEntry } from '../audit';
import { resolveArtefact } from '../../storage/blob-store';
import { summarizeUsage, type UsageSummary } from '../../engine/usage';
import { itemPriorityOf, type ItemPriority } from '../../model/priority';
import type { Artefact, Json, TreadleEvent } from '../../model/shapes';
import type { StateQueryArgs, WorkItemResult, WorkItemState } from '../../model/state';
import { eventsQuery, stateQuery } from '../../workflow-kit/messages';
import { openItemsByEngine, type EngineCount } from '../engine-versions';
import { defaultReviewer, GRPC_NOT_FOUND, isNotFound, TreadleError } from '../errors';
import { cancelItem, type CancelOptions, type CancelOutcome } from '../cancel';
import { queueWithoutWorker, resultOf, visibleItem, type VisibleItem } from '../worker-presence';
import { audit, forksOf, startFork, startInputOf, startWorkItem } from '../on-demand';
import type { StartOptions } from '../start';
import { ClientPart } from './context';
import type { ForkListing, ForkOptions, ForkStarted } from '../fork';

import { capacityWaitsOf, withStages, type ActivityCapacityWait } from '../capacity';

/** An activity Temporal is retrying (a second or later try after a failure). */
export interface ActivityRetry {
  activityType: string;
  attempt: number;
  lastFailure?: string;
}

/** The pending activities of a described execution that Temporal is retrying. */
function retriesOf(description: WorkflowExecutionDescription): ActivityRetry[] {
  return (description.raw.pendingActivities ?? [])
    .filter((a) => (a.attempt ?? 1) > 1)
    .map((a) => ({
      activityType: a.activityType?.name ?? '?',
      attempt: a.attempt ?? 1,
      ...(a.lastFailure?.message ? { lastFailure: a.lastFailure.message } : {}),
    }));
}

/** Reads `servedState` tries before giving up (each waits up to the client's `answerWaitMs`). */
const SERVED_READ_TRIES = 15;

/** How often `watch` reads the state; queries are cheap and never touch the history. */
const WATCH_INTERVAL_MS = 500;

/** What `watch` waits for besides the item finishing (see {@link ItemsClient.watch}). */
export interface WatchOptions {
  untilReview?: boolean;
  untilLoopFails?: boolean;
  afterSeq?: number;
  signal?: AbortSignal;
  patient?: boolean;
}

/** The work items part of `TreadleClient` (`client.items`). */
export class ItemsClient extends ClientPart {
  /**
   * Starts a work item, or returns the existing one with the same id (idempotent: the same id never
   * starts twice, even after the first run finished; `existing` says so). Without an id, the id is the
   * pipeline's name and a hash of the input (seed 003's `input_hash`), so starting the same input again
   * returns the run it started. The spec is validated first, listing every problem.
   *
   * `priority` (1 first … 5, default 3), `fairnessKey` (a tenant, a team; at most 64 bytes) and `fairnessWeight`
   * (the key's share, default 1) order the item's tasks in the task queues, over the spec's `priority:`,
   * `fairness_key:` and `fairness_weight:`; everything the item starts (fan-out elements, TDD nodes, loops)
   * inherits them. A bad value is a TreadleError `invalid_input`.
   */
  async start(
    pipeline: unknown,
    input: unknown = null,
    options: StartOptions = {},
  ): Promise<{ id: string; runId: string; pipeline: string; existing: boolean }> {
    return startWorkItem(this.context.startContext(), pipeline, input, options).catch(this.context.rethrow);
  }

  /**
   * The state as {@link state} reads it, for a caller that knows the item is served (its result has come): a read
   * no worker answers is tried again while a worker polls the item's queue, as `watch` does. After a worker is
   * lost, Temporal hands the item's queries to that worker's sticky queue for a few seconds; with no worker on the
   * queue, or after {@link SERVED_READ_TRIES} tries, the `no_worker` error is thrown.
   */
  async servedState(id: string, page: StateQueryArgs = {}): Promise<WorkItemState> {
    for (let tries = 1; ; tries++) {
      try {
        return await this.state(id, page);
      } catch (error) {
        const unanswered = error instanceof TreadleError && error.code === 'no_worker';
        if (!unanswered || tries >= SERVED_READ_TRIES) throw error;
        if ((await queueWithoutWorker(this.context.client, id)) !== undefined) throw error;
      }
    }
  }

  /**
   * Forks work item `id` from stage `options.from` (see src/client/fork.ts): a new item whose stages that `from`
   * does not lead to, and that completed in the original, are carried as they ended there (no activity, no
   * model call), with `options.overrides` and `options.input` applied to the stages that run again. The original
   * may have completed, failed or been cancelled; reading its stages needs a worker (a `state` query). Forking
   * the same way twice returns the first fork (`existing`). A change to a stage the fork would carry, an
   * unknown stage or an invalid result is a TreadleError listing every problem.
   */
  async fork(id: string, options: ForkOptions): Promise<ForkStarted> {
    const started = await startInputOf(this.context.client, id).catch((error: unknown) => {
      throw isNotFound(error) || (error as { code?: unknown }).code === GRPC_NOT_FOUND
        ? this.context.unknown(id)
        : error;
    });
    const state = await this.state(id, { eventLimit: 1 });
    return startFork(this.context.startContext(), { id, started, state }, options).catch(this.context.rethrow);
  }

  /**
   * The forks of work item `id` (a visibility listing of `TreadleForkOf`, eventually consistent): each fork's id,
   * the stage it runs again from, its status and when it started, oldest first.
   */
  async forks(id: string): Promise<ForkListing[]> {
    return forksOf(this.context.client, id).catch(this.context.rethrow);
  }

  /**
   * The work item's state (the `state` query): stages, attempts, reviews, usage, and one page of events (`eventsAfter`,
   * `eventLimit`; `eventCount` says how many there are). No worker answering within `timeoutMs` (default the client's
   * `answerWaitMs`, 2 s) is a TreadleError `no_worker`: {@link visible} reads what Temporal knows without one.
   */
  async state(id: string, page: StateQueryArgs = {}, timeoutMs?: number): Promise<WorkItemState> {
    return this.context.ask(id, (h) => h.query(stateQuery, page), timeoutMs);
  }

  /** Every event of a work item, read page by page. */
  async events(id: string): Promise<TreadleEvent[]> {
    const out: TreadleEvent[] = [];
    for (;;) {
      const page = await this.context.ask(id, (h) => h.query(eventsQuery, { eventsAfter: out.length }));
      out.push(...page.events);
      if (page.events.length === 0 || out.length >= page.eventCount) return out;
    }
  }

  /** Waits for the work item to finish and returns its result, failed or not (engine 6 fails the workflow). */
  async result(id: string): Promise<WorkItemResult> {
    return this.context.call(id, (h) => resultOf<WorkItemResult>(h));
  }

  /**
   * Cancels a work item (issue 40): it records who cancels it and why, then its run is cancelled, and with it its
   * stages' activities (they learn it by their heartbeats), its children and its waits for people; its decisions
   * leave the inbox and approval actions not yet run never run. Its state ends `cancelled` with `cancelledBy`
   * and `cancelReason` (items started before engine 8 end `cancelled` without them). A finished item refuses
   * (`invalid_input`, "has already completed"); with no worker answering nothing is sent (`no_worker`).
   */
  async cancel(id: string, options: CancelOptions = {}): Promise<CancelOutcome> {
    const { client, answerWaitMs, reviewTimeoutMs } = this.context;
    return this.context.call(id, (h) =>
      cancelItem(
        { client, answerWaitMs, timeoutMs: reviewTimeoutMs },
        h,
        options.by ?? defaultReviewer(),
        options.reason,
      ),
    );
  }

  /** The workflow type behind an id (`workItem`, `tddNode`, `loopStage`). */
  async workflowType(id: string): Promise<string> {
    return (await this.execution(id)).type;
  }

  /**
   * What Temporal holds of the execution behind an id, from one describe: its workflow type, its priority and
   * fairness key in the task queues (what it was started with, or inherited from the item that started it; empty
   * when Temporal's defaults apply), its activities Temporal is retrying, and its calls waiting for model capacity
   * (their last heartbeat; without the stage, which {@link capacityWaits} adds from the state).
   */
  async execution(id: string): Promise<{
    type: string;
    priority: ItemPriority;
    retries: ActivityRetry[];
    capacityWaits: ActivityCapacityWait[];
  }> {
    const description = await this.context.call(id, (h) => h.describe());
    return {
      type: description.type,
      priority: itemPriorityOf(description.priority),
      retries: retriesOf(description),
      capacityWaits: await capacityWaitsOf(this.context.client, description),
    };
  }

  /**
   * The item's calls waiting for model capacity now ("waiting for claude-sonnet-4-6: 8/8 calls in flight, …"),
   * from its pending activities' last heartbeats (one describe), each with its stage when `state` tells which.
   */
  async capacityWaits(id: string, state?: Pick<WorkItemState, 'stages'>): Promise<ActivityCapacityWait[]> {
    const { capacityWaits } = await this.execution(id);
    return state ? withStages(capacityWaits, state) : capacityWaits;
  }

  /**
   * What Temporal knows of an item without asking a worker: its execution status, pipeline, Treadle status
   * and pending reviews from visibility and memo, and a closed item's result (for `status` with no worker).
   */
  async visible(id: string): Promise<VisibleItem> {
    return this.context.call(id, () => visibleItem(this.context.client, id));
  }

  /**
   * Model usage of a work item: calls, tokens, latency and estimated cost, per stage and in total (only the
   * total for a closed item when no worker runs).
   */
  async usage(id: string): Promise<UsageSummary> {
    try {
      return (await this.state(id)).usage ?? summarizeUsage({});
    } catch (error) {
      // With no worker, a closed item's result still has its total (not the per-stage split).
      const ended = error instanceof TreadleError && error.code === 'no_worker' ? await this.visible(id) : undefined;
      if (ended?.result === undefined) throw error;
      return { total: ended.result.usage ?? summarizeUsage({}).total, stages: {} };
    }
  }

  /**
   * The item's activities that Temporal is retrying (a second or later try after a failure), as the server
   * reports them: seed 003's `retrying`, below the stage's own attempts.
   */
  async activityRetries(id: string): Promise<ActivityRetry[]> {
    return (await this.execution(id)).retries;
  }

  /**
   * The audit of a run (seed 003): steps, attempts, reviews, approvals and model calls in time order, read
   * from the workflow history (no worker needed, finished runs too). A correlation id covers the run and
   * its fan-out elements. Call records an activity stored in the blob store are read from this client's.
   */
  async audit(idOrCorrelation: string): Promise<AuditEntry[]> {
    try {
      return await audit(this.context.client, idOrCorrelation, this.context.blobs);
    } catch (error) {
      if (isNotFound(error)) throw this.context.unknown(idOrCorrelation);
      throw error;
    }
  }

  /**
   * Open work items per engine version, newest first (src/client/engine-versions.ts): all in the namespace, or
   * only those on `taskQueue`. One visibility listing plus the first page of each open item's history.
   */
  openByEngine(options: { taskQueue?: string } = {}): Promise<EngineCount[]> {
    return openItemsByEngine(this.context.client, options);
  }

  /** Reads an artefact, following a blob reference into the blob store. */
  async readArtefact(artefact: Artefact | undefined): Promise<Json | undefined> {
    return resolveArtefact(artefact, this.context.blobs);
  }

  /**
   * Calls `onEvent` for each new event until the item finishes or (with `untilReview`) waits for a human
   * (a review or an approval), or (with `untilLoopFails`) one of its loop stages failed and waits for
   * a resume: the item is still `running` then, and `loopStages.list` says which.
   * Returns the last state read; its `events` are the last ones delivered, and every event up to its
   * `eventCount` has been delivered once.
   *
   * A first read no worker answers within `answerWaitMs` rejects `no_worker` (a watch of an item nobody serves
   * says so at once). After that, or from the start with `patient` (the caller has just started the item, which a
   * busy worker may take a moment to run), an unanswered read is waited out while a worker polls the item's queue
   * (its worker crashed and Temporal hands the item to another, or the machine is busy); with none, it rejects.
   */
  async watch(id: string, onEvent: (event: TreadleEvent) => void, options: WatchOptions = {}): Promise<WorkItemState> {
    let seen = options.afterSeq ?? 0;
    let answered = options.patient === true;
    const stillServed = async (error: unknown): Promise<boolean> =>
      answered &&
      !options.signal?.aborted &&
      error instanceof TreadleError &&
      error.code === 'no_worker' &&
      (await queueWithoutWorker(this.context.client, id)) === undefined;
    const loopIds = new Set<string>();
    // The whole state is read once, at the end; events that arrived since the last poll are delivered too,
    // so every event up to the returned state's `eventCount` has been seen exactly once. Unanswered, it is waited
    // out as the polls are: the item may have just ended on a worker that was then lost, whose sticky queue
    // Temporal keeps handing the read to for a few seconds, while another worker polls the item's queue.
    const finalState = async (): Promise<WorkItemState> => {
      for (;;) {
        const state = await this.state(id, { eventsAfter: seen }).catch(async (error) => {
          if (await stillServed(error)) return undefined;
          throw error;
        });
        if (state === undefined) continue;
        for (const event of state.events) onEvent(event);
        return state;
      }
    };
    for (;;) {
      // Only new events travel on each poll.
      const page = await this.context
        .ask(id, (h) => h.query(eventsQuery, { eventsAfter: seen }))
        .catch(async (error) => {
          if (await stillServed(error)) return undefined;
          throw error;
        });
      if (page === undefined) continue;
      answered = true;
      for (const event of page.events) {
        onEvent(event);
        seen = event.seq;
        if (event.type === 'LoopStarted' && typeof event.details?.workflowId === 'string')
          loopIds.add(event.details.workflowId);
      }
      if (page.events.length > 0 && seen < page.eventCount) continue;
      const waiting = page.status === 'waiting_review' || page.status === 'waiting_approval';
      const done = page.status !== 'running' && !waiting;
      if (done || (options.untilReview && waiting) || options.signal?.aborted) return finalState();
      if (options.untilLoopFails && (await this.parts.loopStages.anyFailed(loopIds))) return finalState();
      const ended = await this.endedExecution(id, finalState);
      if (ended) return ended;
      await new Promise((r) => setTimeout(r, WATCH_INTERVAL_MS));
    }
  }

  /**
   * The final state of an execution that was terminated or timed out (these never reach the workflow's own
   * finish; Temporal knows), or undefined while it runs.
   */
  private async endedExecution(
    id: string,
    finalState: () => Promise<WorkItemState>,
  ): Promise<WorkItemState | undefined> {
    const execution = (await this.context.client.workflow.getHandle(id).describe()).status.name;
    if (execution === 'RUNNING') return undefined;
    const state = await finalState();
    return {
      ...state,
      status: execution === 'COMPLETED' ? 'completed' : 'failed',
      error: state.error ?? `the workflow execution is ${execution.toLowerCase()}`,
    };
  }
}
