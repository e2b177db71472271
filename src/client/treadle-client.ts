/**
 * `TreadleClient`: the SDK users call to start work items, read their state, review stages and list
 * pending reviews. Every error is a {@link TreadleError} with one clear line.
 */
import { Client, type Connection, WorkflowUpdateFailedError, type WorkflowHandle } from '@temporalio/client';
import type { TreadleTracing } from '../tracing';
import type { AuditEntry } from './audit';
import { resolveArtefact, offloadArtefact, type BlobStore } from '../storage/blob-store';
import { createBlobStore } from '../storage';
import { treadleExternalStorage } from '../storage/external-storage';
import { loadConfig } from '../config';
import { connectClient, refusedCredentials, temporalSettings, type TemporalSettings } from '../connection';
import { summarizeUsage, type UsageSummary } from '../engine/usage';
import type { KnownImplementations } from '../model/pipeline';
import type { ApprovalDecided, ApprovalDecision, ApprovalRequest } from '../kinds/approval/shapes';
import type { Artefact, Json, ReviewOutcome, TreadleEvent } from '../model/shapes';
import type { StateQueryArgs, WorkItemResult, WorkItemState } from '../model/state';
import {
  decideApprovalUpdate,
  eventsQuery,
  loopQueueSignal,
  loopStateQuery,
  resolveReviewUpdate,
  stateQuery,
  tddStateQuery,
  type ReviewAccepted,
} from '../workflows/messages';
import type { LoopState } from '../kinds/loop/shapes';
import { openItemsByEngine, type EngineCount } from './engine-versions';
import type { TddNodeResult, TddNodeState } from '../kinds/tdd/shapes';
import { defaultReviewer, isNotFound, TreadleError } from './errors';
import { listApprovals, listPendingReviews, type ApprovalListing, type PendingReviewListing } from './listings';
import type { StartContext } from './start';
import { listDecisionChanges, listPendingDecisions, type DecisionChange } from './decisions';
import { checkEdit, decide, refuseNonconformingEdit } from './decide';
import { decisionDetail, type DetailOptions } from './decision-detail';
import { resumeFailedLoop, type LoopResumeOptions } from './loop-resume';
import type { SchemaProblem } from './output-schema';
import type { DecisionAnswer, DecisionDetail, DecisionKind, DecisionOutcome, PendingDecision } from '../model/decisions';
import {
  answeredByWorker,
  queueWithoutWorker,
  noWorkerPolls,
  pollersOf,
  resultOf,
  notSent,
  updatedByWorker,
  visibleItem,
  WORKER_ANSWER_WAIT_MS,
  type VisibleItem,
} from './worker-presence';
import { describeDecision, recordedApproval, recordedReview } from './recorded-decisions';
import { AlreadyDecidedError } from './treadle-error';
import { approvalItem, audit, decidedBefore, runIdFor, startTddTree, startWorkItem } from './on-demand';

export { TreadleError, AlreadyDecidedError, runIdFor, type ApprovalListing, type PendingReviewListing };

/** Options for {@link TreadleClient.connect}. */
export interface ConnectOptions {
  /** Overrides the configured address (TLS, API key and the rest stay as configured). */
  address?: string;
  namespace?: string;
  /** Connection settings to use instead of the configured ones (`temporalSettings()`). */
  temporal?: TemporalSettings;
  taskQueue?: string;
  /** Implementation names to check specs against before starting (the CLI passes the built-ins). */
  known?: KnownImplementations;
  blobs?: BlobStore;
  /**
   * How long a query or update waits for a worker to answer before the call says no worker answered (default 2 s).
   * Temporal's poller list keeps a stopped worker for about a minute, so only an answer tells that one runs.
   */
  answerWaitMs?: number;
  /** How long a review, approval or loop resume may take once a worker has answered (default 15 s). */
  reviewTimeoutMs?: number;
  /** OpenTelemetry tracing (see `tracing.ts`): starts become the root span of each work item's trace. */
  tracing?: TreadleTracing;
}

/** Reviews are updates, which need a running worker; one that answered but stalls must not hold the caller. */
const DEFAULT_REVIEW_TIMEOUT_MS = 15_000;

/** How often `watch` reads the state; queries are cheap and never touch the history. */
const WATCH_INTERVAL_MS = 500;

/** The Treadle client. */
export class TreadleClient {
  readonly taskQueue: string;
  private readonly known?: KnownImplementations;
  private readonly blobs: BlobStore;
  /** How long a review, approval or loop resume may take once a worker has answered. */
  readonly reviewTimeoutMs: number;
  /** How long a query or update waits for a worker to answer (see {@link ConnectOptions.answerWaitMs}). */
  readonly answerWaitMs: number;
  private readonly blobThresholdBytes: number;
  /** The settings it connected with (none when made from a `Client`): a refused credential names them. */
  private readonly temporal?: TemporalSettings;

  constructor(
    readonly client: Client,
    options: Omit<ConnectOptions, 'address' | 'namespace'> = {},
    private readonly ownedConnection?: Connection,
  ) {
    const config = loadConfig();
    this.taskQueue = options.taskQueue ?? config.taskQueue;
    if (options.known) this.known = options.known;
    this.blobs = options.blobs ?? createBlobStore(config.blobStore);
    this.reviewTimeoutMs = options.reviewTimeoutMs ?? DEFAULT_REVIEW_TIMEOUT_MS;
    this.answerWaitMs = options.answerWaitMs ?? WORKER_ANSWER_WAIT_MS;
    this.blobThresholdBytes = config.blobThresholdBytes;
    if (options.temporal) this.temporal = options.temporal;
  }

  /**
   * Connects to Temporal as configured by the environment and `temporal.toml` profiles (`TEMPORAL_ADDRESS`,
   * `TEMPORAL_NAMESPACE`, `TEMPORAL_API_KEY`, `TEMPORAL_TLS_*`, `TEMPORAL_PROFILE`; see src/connection.ts);
   * `address` and `namespace` override them.
   */
  static async connect(options: ConnectOptions = {}): Promise<TreadleClient> {
    const config = loadConfig();
    const settings = options.temporal
      ? { ...options.temporal, options: { ...options.temporal.options } }
      : temporalSettings();
    if (options.address) {
      settings.address = options.address;
      settings.options.address = options.address;
    }
    const { address: _address, namespace, temporal: _temporal, ...rest } = options;
    // Payloads the worker offloaded (ExternalStorage, over 256 KiB) are read back from the same blob store. Made
    // before connecting, so a store that cannot be made (its package not installed) leaves no connection open.
    const blobs = rest.blobs ?? createBlobStore(config.blobStore);
    const connection = await connectClient(settings);
    const client = new Client({
      connection,
      namespace: namespace ?? settings.namespace,
      dataConverter: { externalStorage: treadleExternalStorage(blobs) },
      ...(options.tracing ? { plugins: [options.tracing.plugin] } : {}),
    });
    return new TreadleClient(client, { ...rest, blobs, temporal: settings }, connection);
  }

  /**
   * Starts a work item, or returns the existing one with the same id (idempotent: the same id never
   * starts twice, even after the first run finished; `existing` says so). Without an id, the id is the
   * pipeline's name and a hash of the input (seed 003's `input_hash`), so starting the same input again
   * returns the run it started. The spec is validated first, listing every problem.
   */
  async start(
    pipeline: unknown,
    input: unknown = null,
    options: { id?: string; tokenBudget?: number | null } = {},
  ): Promise<{ id: string; runId: string; pipeline: string; existing: boolean }> {
    return startWorkItem(this.startContext(), pipeline, input, options).catch(this.rethrow);
  }

  /**
   * Starts a V3 TDD tree (seed 001) on a git repository: the root `tddNode` workflow, whose children appear
   * under it. `spec` is a spec file's content (the seed's Spec plus `tdd:` settings), validated first with
   * every problem listed. `repo` is a path on the workers (they refuse one outside `TREADLE_TDD_REPOS`).
   * `replies` are scripted agent replies (`{ "<spec id>.<node>": [reply, ...] }`), stored by reference.
   * Idempotent like {@link start}: the id defaults to `tdd-<spec id>`.
   */
  async startTdd(
    spec: unknown,
    options: { repo: string; id?: string; replies?: Json },
  ): Promise<{ id: string; runId: string; branch: string; targetBranch: string }> {
    return startTddTree(this.startContext(), spec, options).catch(this.rethrow);
  }

  /** A TDD node's state (the `state` query of a `tddNode` workflow); `timeoutMs` as for {@link getState}. */
  async getTddState(id: string, page: StateQueryArgs = {}, timeoutMs?: number): Promise<TddNodeState> {
    return this.ask(id, (h) => h.query(tddStateQuery, page), timeoutMs);
  }

  /** Waits for a TDD node to finish: its MergeComplete (by reference) or why it failed. */
  async tddResult(id: string): Promise<TddNodeResult> {
    return this.call(id, (h) => resultOf<TddNodeResult>(h));
  }

  /**
   * The work item's state (the `state` query): stages, attempts, reviews, usage, and one page of events (`eventsAfter`,
   * `eventLimit`; `eventCount` says how many there are). No worker answering within `timeoutMs` (default the client's
   * `answerWaitMs`, 2 s) is a TreadleError `no_worker`: {@link visibleItem} reads what Temporal knows without one.
   */
  async getState(id: string, page: StateQueryArgs = {}, timeoutMs?: number): Promise<WorkItemState> {
    return this.ask(id, (h) => h.query(stateQuery, page), timeoutMs);
  }

  /** Every event of a work item, read page by page. */
  async events(id: string): Promise<TreadleEvent[]> {
    const out: TreadleEvent[] = [];
    for (;;) {
      const page = await this.ask(id, (h) => h.query(eventsQuery, { eventsAfter: out.length }));
      out.push(...page.events);
      if (page.events.length === 0 || out.length >= page.eventCount) return out;
    }
  }

  /**
   * The loop stages of a work item (seed 004), newest attempt of each stage last: their workflow ids and
   * `loopState`. `id` may also name a loop stage's own workflow.
   */
  async loops(id: string): Promise<{ workflowId: string; state: LoopState }[]> {
    const type = await this.workflowType(id);
    const ids =
      type === 'loopStage'
        ? [id]
        : [
            ...new Set(
              (await this.events(id))
                .filter((e) => e.type === 'LoopStarted' && typeof e.details?.workflowId === 'string')
                .map((e) => e.details!.workflowId as string),
            ),
          ];
    return Promise.all(
      ids.map(async (workflowId) => ({
        workflowId,
        state: await this.ask(workflowId, (h) => h.query(loopStateQuery)),
      })),
    );
  }

  /** Whether one of these loop stages failed and waits for a resume (a loop that has ended waits for nothing). */
  private async anyLoopFailed(loopIds: ReadonlySet<string>): Promise<boolean> {
    const states = await Promise.all([...loopIds].map((loopId) => this.getLoopState(loopId).catch(() => undefined)));
    return states.some((state) => state?.status === 'failed');
  }

  /** The workflow type behind an id (`workItem`, `tddNode`, `loopStage`). */
  async workflowType(id: string): Promise<string> {
    return this.call(id, (h) => h.describe()).then((d) => d.type);
  }

  /** A loop stage's state: iterations, decisions, the failure waiting for a resume (`timeoutMs`: see getState). */
  async getLoopState(loopWorkflowId: string, timeoutMs?: number): Promise<LoopState> {
    return this.ask(loopWorkflowId, (h) => h.query(loopStateQuery), timeoutMs);
  }

  /**
   * Resumes a failed loop stage from the iteration that failed (or gives it up: `abandon`). `id` is the work
   * item (then `stage` picks the loop when several are failed) or the loop's own workflow. Rejects with the
   * reason when no loop is failed. `by` (default `$TREADLE_REVIEWER` or `$USER`) is recorded as who decided.
   */
  async resumeLoop(
    id: string,
    options: LoopResumeOptions = {},
  ): Promise<{ workflowId: string; stage: string; from: number; resumed: boolean }> {
    return resumeFailedLoop(this.client, id, await this.loops(id), options, this.reviewTimeoutMs, this.answerWaitMs);
  }

  /** Reports a signal-fed queue's length to a loop stage (its `queue: { provider: signal }`). */
  async reportLoopQueue(loopWorkflowId: string, pending: number): Promise<void> {
    await this.call(loopWorkflowId, (h) => h.signal(loopQueueSignal, { pending }));
  }

  /**
   * Resolves a review; rejects with a clear message when the stage is not waiting or the input is bad. With no
   * worker answering within `answerWaitMs`, nothing is sent: a TreadleError `no_worker` says so, or, when the
   * item's history shows the stage was decided already, an {@link AlreadyDecidedError} says by whom.
   */
  async review(
    id: string,
    stage: string,
    outcome: ReviewOutcome,
    reviewer = defaultReviewer(),
  ): Promise<ReviewAccepted> {
    return this.call(id, async (h) => {
      try {
        return await updatedByWorker(this.client, id, {
          what: `the review of ${stage} of ${id}`,
          send: (updateId) => h.executeUpdate(resolveReviewUpdate, { args: [{ stage, outcome, reviewer }], updateId }),
          answerWaitMs: this.answerWaitMs,
          timeoutMs: this.reviewTimeoutMs,
        });
      } catch (error) {
        if (error instanceof WorkflowUpdateFailedError) {
          throw new TreadleError(`review rejected: ${error.cause?.message ?? error.message}`, 'invalid_review');
        }
        if (error instanceof TreadleError && error.code === 'no_worker')
          throw await this.unsentReview(id, stage, error);
        if (isNotFound(error)) {
          // The id may name a finished item rather than no item at all; say which.
          const status = await h.describe().then(
            (d) => d.status.name,
            () => undefined,
          );
          if (status && status !== 'RUNNING') {
            throw new TreadleError(
              `work item ${id} has finished (${status.toLowerCase()}); no stage is waiting for review`,
              'invalid_review',
            );
          }
        }
        throw error;
      }
    });
  }

  /**
   * Why a review no worker took was not sent: someone decided the stage already (its memo no longer lists it and its
   * history records the decision), or the item has finished, else `unsent` itself (no worker).
   */
  private async unsentReview(id: string, stage: string, unsent: TreadleError): Promise<TreadleError> {
    const description = await this.client.workflow
      .getHandle(id)
      .describe()
      .catch(() => undefined);
    if (!description) return unsent;
    const recorded = await recordedReview(this.client, id, stage, description).catch(() => undefined);
    if (recorded)
      return new AlreadyDecidedError(
        `review refused: stage ${stage} of ${id} was already decided (${describeDecision(recorded)}, as its history records)`,
        recorded,
      );
    const status = description.status.name;
    if (status !== 'RUNNING')
      return new TreadleError(
        `work item ${id} has finished (${status.toLowerCase()}); no stage is waiting for review`,
        'invalid_review',
      );
    return unsent;
  }

  /** Approves a stage (optionally a specific attempt's output). */
  approve(
    id: string,
    stage: string,
    options: { reviewer?: string; note?: string; attempt?: number } = {},
  ): Promise<ReviewAccepted> {
    const outcome: ReviewOutcome = {
      kind: 'approve',
      ...(options.note !== undefined ? { note: options.note } : {}),
      ...(options.attempt !== undefined ? { attempt: options.attempt } : {}),
    };
    return this.review(id, stage, outcome, options.reviewer);
  }

  /** Rejects a stage; the stage fails and its dependents are skipped. */
  reject(
    id: string,
    stage: string,
    reason: string,
    options: { reviewer?: string; note?: string } = {},
  ): Promise<ReviewAccepted> {
    return this.review(
      id,
      stage,
      { kind: 'reject', reason, ...(options.note !== undefined ? { note: options.note } : {}) },
      options.reviewer,
    );
  }

  /**
   * Approves with an edited artefact, which downstream stages receive instead of the original; one that breaks
   * the stage's output schema is refused before anything is sent (`invalid_input`, a problem per line). Edits
   * over the blob threshold go to the blob store and only their reference enters the history, as stage
   * artefacts do (so the blob store must be one the workers read, e.g. a shared `TREADLE_BLOB_DIR`).
   */
  async approveWithEdits(
    id: string,
    stage: string,
    artefact: Json,
    options: { reviewer?: string; note?: string } = {},
  ): Promise<ReviewAccepted> {
    await refuseNonconformingEdit(this, id, stage, artefact).catch(async (error: unknown) => {
      // The check reads the item's state, so with no worker answering nothing is sent either.
      if (!(error instanceof TreadleError && error.code === 'no_worker')) throw error;
      throw await this.unsentReview(id, stage, notSent(`the review of ${stage} of ${id}`, error));
    });
    const stored =
      (await offloadArtefact(artefact, this.blobs, this.blobThresholdBytes, `edited ${stage} of ${id}`)) ?? null;
    return this.review(
      id,
      stage,
      { kind: 'approve_with_edits', artefact: stored, ...(options.note !== undefined ? { note: options.note } : {}) },
      options.reviewer,
    );
  }

  /**
   * Open work items per engine version, newest first (src/client/engine-versions.ts): all in the namespace, or only
   * those on `taskQueue`. One visibility listing plus the first page of each open item's history.
   */
  openItemsByEngine(options: { taskQueue?: string } = {}): Promise<EngineCount[]> {
    return openItemsByEngine(this.client, options);
  }

  /**
   * Pending reviews across all work items, from visibility alone (one listing call reading attributes and memo:
   * no item is queried, no worker needed). Eventually consistent: a new review may take a second to appear.
   */
  async listPendingReviews(options: { pipeline?: string } = {}): Promise<PendingReviewListing[]> {
    return listPendingReviews(this.client, options).catch(this.rethrow);
  }

  /**
   * Pending approval requests across all work items, from visibility alone (one listing call: each waiting
   * item's memo carries its first 50 requests; `treadle status` shows all). Payloads are left out: read
   * them with {@link getApproval}. Eventually consistent, like {@link listPendingReviews}.
   */
  async listApprovals(options: { pipeline?: string } = {}): Promise<ApprovalListing[]> {
    return listApprovals(this.client, options).catch(this.rethrow);
  }

  /** Every pending decision of every kind, oldest first, from one visibility listing (no worker needed). */
  listPendingDecisions(options: { pipeline?: string; kinds?: DecisionKind[] } = {}): Promise<PendingDecision[]> {
    return listPendingDecisions(this.client, options).catch(this.rethrow);
  }

  /** The workflows whose pending decisions changed since `since` (engine 7 items), or that closed since then. */
  listDecisionChanges(since: Date): Promise<DecisionChange[]> {
    return listDecisionChanges(this.client, since).catch(this.rethrow);
  }

  /** Answers a pending decision by key as `reviewer`; someone deciding first is `already_decided` (decide.ts). */
  decide(key: string, answer: DecisionAnswer, reviewer = defaultReviewer()): Promise<DecisionOutcome> {
    return decide(this, key, answer, reviewer);
  }

  /** What a reviewer needs to judge one pending decision (see decision-detail.ts). */
  decisionDetail(key: string, options?: DetailOptions): Promise<DecisionDetail> {
    return decisionDetail(this, key, this.blobs, options);
  }

  /** An edited artefact's problems against the stage's output schema (none: send it); see decide.ts. */
  checkEdit(key: string, artefact: unknown): Promise<SchemaProblem[]> {
    return checkEdit(this, key, artefact);
  }

  /** An approval request with its payload resolved (for reviewing it); `status` says whether it is still pending. */
  async getApproval(id: string): Promise<ApprovalRequest> {
    const itemId = await approvalItem(this.client, id);
    const state = await this.getState(itemId, { eventLimit: 1 });
    const request = state.approvals?.find((r) => r.id === id);
    if (!request) throw new TreadleError(`work item ${itemId} has no approval request ${id}`, 'not_found');
    return { ...request, payload: (await resolveArtefact(request.payload, this.blobs)) ?? null };
  }

  /**
   * Approves or rejects a pending approval request by id. A request already decided (or expired) is refused
   * saying how it was decided (by whom, what, when); an id no item has is "not found". Nothing enters the history.
   * With no worker answering within `answerWaitMs` nothing is sent: a TreadleError `no_worker`, or an
   * {@link AlreadyDecidedError} when the item's history shows the request was decided already.
   */
  async decideApproval(
    id: string,
    decision: 'approve' | 'reject',
    options: { by?: string; reason?: string } = {},
  ): Promise<ApprovalDecided> {
    const itemId = await approvalItem(this.client, id);
    const payload: ApprovalDecision = {
      id,
      decision,
      by: options.by ?? defaultReviewer(),
      ...(options.reason !== undefined ? { reason: options.reason } : {}),
    };
    return this.call(itemId, async (h) => {
      try {
        return await updatedByWorker(this.client, itemId, {
          what: `the decision on ${id} (work item ${itemId})`,
          send: (updateId) => h.executeUpdate(decideApprovalUpdate, { args: [payload], updateId }),
          answerWaitMs: this.answerWaitMs,
          timeoutMs: this.reviewTimeoutMs,
        });
      } catch (error) {
        if (error instanceof WorkflowUpdateFailedError)
          throw new TreadleError(`decision refused: ${error.cause?.message ?? error.message}`, 'invalid_review');
        // The item exists (visibility found it) but takes no more updates: it has finished.
        if (isNotFound(error)) throw await decidedBefore(this.client, id, itemId);
        if (error instanceof TreadleError && error.code === 'no_worker') {
          // Nothing was sent; the history may still say who decided first.
          const description = await h.describe().catch(() => undefined);
          const recorded =
            description && (await recordedApproval(this.client, itemId, id, description).catch(() => undefined));
          if (recorded)
            throw new AlreadyDecidedError(
              `decision refused: approval request ${id} is already ${describeDecision(recorded)} (as work item ${itemId}'s history records)`,
              recorded,
            );
          if (description && description.status.name !== 'RUNNING')
            throw await decidedBefore(this.client, id, itemId, 0);
        }
        throw error;
      }
    });
  }

  /**
   * The audit of a run (seed 003): steps, attempts, reviews, approvals and model calls in time order, read
   * from the workflow history (no worker needed, finished runs too). A correlation id covers the run and
   * its fan-out elements. Call records an activity stored in the blob store are read from this client's.
   */
  async audit(idOrCorrelation: string): Promise<AuditEntry[]> {
    try {
      return await audit(this.client, idOrCorrelation, this.blobs);
    } catch (error) {
      if (isNotFound(error))
        throw new TreadleError(
          `unknown work item "${idOrCorrelation}" in namespace ${this.client.options.namespace}`,
          'not_found',
        );
      throw error;
    }
  }

  /**
   * The item's activities that Temporal is retrying (a second or later try after a failure), as the server
   * reports them: seed 003's `retrying`, below the stage's own attempts.
   */
  async activityRetries(id: string): Promise<{ activityType: string; attempt: number; lastFailure?: string }[]> {
    const description = await this.call(id, (h) => h.describe());
    return (description.raw.pendingActivities ?? [])
      .filter((a) => (a.attempt ?? 1) > 1)
      .map((a) => ({
        activityType: a.activityType?.name ?? '?',
        attempt: a.attempt ?? 1,
        ...(a.lastFailure?.message ? { lastFailure: a.lastFailure.message } : {}),
      }));
  }

  /**
   * Model usage of a work item: calls, tokens, latency and estimated cost, per stage and in total (only the
   * total for a closed item when no worker runs).
   */
  async usage(id: string): Promise<UsageSummary> {
    try {
      return (await this.getState(id)).usage ?? summarizeUsage({});
    } catch (error) {
      // With no worker, a closed item's result still has its total (not the per-stage split).
      const ended =
        error instanceof TreadleError && error.code === 'no_worker' ? await this.visibleItem(id) : undefined;
      if (ended?.result === undefined) throw error;
      return { total: ended.result.usage ?? summarizeUsage({}).total, stages: {} };
    }
  }

  /**
   * What Temporal knows of an item without asking a worker: its execution status, pipeline, Treadle status
   * and pending reviews from visibility and memo, and a closed item's result (for `status` with no worker).
   */
  async visibleItem(id: string): Promise<VisibleItem> {
    return this.call(id, () => visibleItem(this.client, id));
  }

  /** Waits for the work item to finish and returns its result, failed or not (engine 6 fails the workflow). */
  async result(id: string): Promise<WorkItemResult> {
    return this.call(id, (h) => resultOf<WorkItemResult>(h));
  }

  /**
   * Calls `onEvent` for each new event until the item finishes or (with `untilReview`) waits for a human
   * (a review or an approval), or (with `untilLoopFails`) one of its loop stages failed and waits for
   * `resumeLoop`: the item is still `running` then, and {@link loops} says which.
   * Returns the last state read; its `events` are the last ones delivered, and every event up to its
   * `eventCount` has been delivered once.
   *
   * A first read no worker answers within `answerWaitMs` rejects `no_worker` (a watch of an item nobody serves
   * says so at once). After that, or from the start with `patient` (the caller has just started the item, which a
   * busy worker may take a moment to run), an unanswered read is waited out while a worker polls the item's queue
   * (its worker crashed and Temporal hands the item to another, or the machine is busy); with none, it rejects.
   */
  async watch(
    id: string,
    onEvent: (event: TreadleEvent) => void,
    options: {
      untilReview?: boolean;
      untilLoopFails?: boolean;
      afterSeq?: number;
      signal?: AbortSignal;
      patient?: boolean;
    } = {},
  ): Promise<WorkItemState> {
    let seen = options.afterSeq ?? 0;
    let answered = options.patient === true;
    const stillServed = async (error: unknown): Promise<boolean> =>
      answered &&
      !options.signal?.aborted &&
      error instanceof TreadleError &&
      error.code === 'no_worker' &&
      (await queueWithoutWorker(this.client, id)) === undefined;
    const loopIds = new Set<string>();
    // The whole state is read once, at the end; events that arrived since the last poll are delivered too,
    // so every event up to the returned state's `eventCount` has been seen exactly once.
    const finalState = async (): Promise<WorkItemState> => {
      const state = await this.getState(id, { eventsAfter: seen });
      for (const event of state.events) onEvent(event);
      return state;
    };
    for (;;) {
      // Only new events travel on each poll.
      const page = await this.ask(id, (h) => h.query(eventsQuery, { eventsAfter: seen })).catch(async (error) => {
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
      if (options.untilLoopFails && (await this.anyLoopFailed(loopIds))) return finalState();
      // Terminated or timed-out executions never reach the workflow's own finish; Temporal knows.
      const execution = (await this.client.workflow.getHandle(id).describe()).status.name;
      if (execution !== 'RUNNING') {
        const state = await finalState();
        return {
          ...state,
          status: execution === 'COMPLETED' ? 'completed' : 'failed',
          error: state.error ?? `the workflow execution is ${execution.toLowerCase()}`,
        };
      }
      await new Promise((r) => setTimeout(r, WATCH_INTERVAL_MS));
    }
  }

  /**
   * The identities of the workers that polled `taskQueue` (default: this client's) for workflow tasks in the
   * last minute or so; empty when none did, so work started there waits until one does.
   */
  async workersPolling(taskQueue: string = this.taskQueue): Promise<string[]> {
    return pollersOf(this.client, taskQueue);
  }

  /**
   * Whether no worker polls `taskQueue` (default: this client's), checked a few times over two seconds: right
   * after a server restart a queue's pollers take a moment to show, so one empty answer proves nothing.
   */
  async noWorkerPolls(taskQueue: string = this.taskQueue): Promise<boolean> {
    return noWorkerPolls(this.client, taskQueue);
  }

  /** Reads an artefact, following a blob reference into the blob store. */
  async readArtefact(artefact: Artefact | undefined): Promise<Json | undefined> {
    return resolveArtefact(artefact, this.blobs);
  }

  /** Closes the connection when this client opened it. */
  async close(): Promise<void> {
    await this.ownedConnection?.close();
  }

  /** What the start functions need from this client. */
  private startContext(): StartContext {
    return {
      client: this.client,
      taskQueue: this.taskQueue,
      ...(this.known ? { known: this.known } : {}),
      blobs: this.blobs,
      blobThresholdBytes: this.blobThresholdBytes,
    };
  }

  /** A query: as {@link call}, `no_worker` when no worker answers within `timeoutMs` (default `answerWaitMs`). */
  private ask<T>(id: string, fn: (handle: WorkflowHandle) => Promise<T>, timeoutMs?: number): Promise<T> {
    return this.call(id, (h) => answeredByWorker(this.client, id, () => fn(h), timeoutMs ?? this.answerWaitMs));
  }

  /** Runs a call on a work item's handle, turning "not found" into a clear error. */
  private async call<T>(id: string, fn: (handle: WorkflowHandle) => Promise<T>): Promise<T> {
    try {
      return await fn(this.client.workflow.getHandle(id));
    } catch (error) {
      if (error instanceof TreadleError) throw error;
      if (isNotFound(error)) {
        throw new TreadleError(`unknown work item "${id}" in namespace ${this.client.options.namespace}`, 'not_found');
      }
      throw this.explainFailure(error);
    }
  }

  /**
   * What a failed call should throw: when the server accepted the connection but refused the call for its
   * credentials (a proxy that lets the connection check through; a key without access to the namespace), the
   * one-line `config` error a refused connection gives; else `error` itself.
   */
  explainFailure(error: unknown): unknown {
    return (this.temporal && refusedCredentials(error, this.temporal)) ?? error;
  }

  /** {@link explainFailure}, thrown: for a promise's `catch`. */
  private readonly rethrow = (error: unknown): never => {
    throw this.explainFailure(error);
  };
}
