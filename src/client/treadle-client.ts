/**
 * `TreadleClient`: the SDK users call to start work items, read their state, review stages and list pending
 * reviews. A front over parts, as Temporal's `Client` fronts `workflow`, `schedule` and `taskQueue`:
 * `client.items`, `client.decisions`, `client.approvals`, `client.loopStages`, `client.trees`, `client.workers`, `client.limits`,
 * `client.evals`, `client.schedules`,
 * sharing one connection context (parts/context.ts). Its flat methods (`start`, `getState`, `review`, …) are
 * aliases of the parts' methods, kept so code written against them keeps working. Every error is a
 * {@link TreadleError} with one clear line.
 */
import { Client, type Connection } from '@temporalio/client';
import type { TreadleTracing } from '../observability/tracing';
import type { AuditEntry } from './audit';
import type { BlobStore } from '../storage/blob-store';
import { createBlobStore } from '../storage';
import { treadleExternalStorage } from '../storage/external-storage';
import { loadConfig } from '../config';
import { connectClient, temporalSettings, type TemporalSettings } from '../config/connection';
import type { UsageSummary } from '../engine/usage';
import type { KnownImplementations } from '../model/pipeline';
import type { ApprovalDecided, ApprovalRequest } from '../kinds/approval/shapes';
import type { Artefact, Json, ReviewOutcome, TreadleEvent } from '../model/shapes';
import type { StateQueryArgs, WorkItemResult, WorkItemState } from '../model/state';
import type { ReviewAccepted } from '../workflow-kit/messages';
import type { LoopState } from '../kinds/loop/shapes';
import type { EngineCount } from './engine-versions';
import type { TddNodeResult, TddNodeState } from '../kinds/tdd/shapes';
import { defaultReviewer, TreadleError } from './errors';
import type { ApprovalListing, PendingReviewListing } from './listings';
import type { DecisionChange } from './decisions';
import type { DetailOptions } from './decision-kind';
import type { LoopResumeOptions } from './loop-resume';
import type { SchemaProblem } from '../agents/output-schema-checks';
import type {
  DecisionAnswer,
  DecisionDetail,
  DecisionKind,
  DecisionOutcome,
  PendingDecision,
} from '../model/decisions';
import { WORKER_ANSWER_WAIT_MS, type VisibleItem } from './worker-presence';
import { AlreadyDecidedError } from '../config/errors';
import { decisionKey } from '../model/decisions';
import { runIdFor } from './on-demand';
import type { StartOptions, TddStartOptions } from './start';
import type { CancelOptions, CancelOutcome } from './cancel';
import { ClientContext, type ClientParts } from './parts/context';
import { ItemsClient, type WatchOptions } from './parts/items';
import { DecisionsClient } from './parts/decisions';
import { ApprovalsClient } from './parts/approvals';
import { LoopStagesClient, type LoopStageListing } from './parts/loop-stages';
import { TreesClient } from './parts/trees';
import { WorkersClient } from './parts/workers';
import { LimitsClient } from './parts/limits';
import { EvalsClient } from './parts/evals';
import { SchedulesClient } from './parts/schedules';

export { TreadleError, AlreadyDecidedError, runIdFor, type ApprovalListing, type PendingReviewListing };
export type { LimiterUsage, ActivityCapacityWait } from './capacity';
export type { CancelOptions, CancelOutcome } from './cancel';
export type { UsageSnapshot } from '../capacity/shapes';
export type {
  ScheduleCreateOptions,
  ScheduleDetail,
  ScheduleFiring,
  ScheduleListing,
  ScheduleOverlap,
  TriggerOutcome,
} from './schedule-shapes';
export {
  ItemsClient,
  DecisionsClient,
  ApprovalsClient,
  LoopStagesClient,
  TreesClient,
  WorkersClient,
  LimitsClient,
  EvalsClient,
  SchedulesClient,
  type ClientParts,
  type WatchOptions,
  type LoopStageListing,
};

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

/** The Treadle client: a front over its parts (see the file's comment). */
export class TreadleClient implements ClientParts {
  /** Work items: start, state, events, result, watch, usage, audit. */
  readonly items: ItemsClient;
  /** Stage reviews and pending decisions of every kind: list, detail, decide, review. */
  readonly decisions: DecisionsClient;
  /** Approval requests: list, get, decide. */
  readonly approvals: ApprovalsClient;
  /** Loop stages: list, state, resume, report a queue. */
  readonly loopStages: LoopStagesClient;
  /** TDD trees: start, a node's state and result. */
  readonly trees: TreesClient;
  /** The workers polling a task queue. */
  readonly workers: WorkersClient;
  /** The model capacity limiters running now and their use. */
  readonly limits: LimitsClient;
  /** Evaluations: run a dataset on a pipeline's variants, show a run, compare two. */
  readonly evals: EvalsClient;
  /** Work items started on a schedule: create, list, describe, pause, unpause, trigger, delete. */
  readonly schedules: SchedulesClient;
  readonly taskQueue: string;
  /** How long a review, approval or loop resume may take once a worker has answered. */
  readonly reviewTimeoutMs: number;
  /** How long a query or update waits for a worker to answer (see {@link ConnectOptions.answerWaitMs}). */
  readonly answerWaitMs: number;
  /** The connection context every part shares. */
  private readonly context: ClientContext;

  constructor(
    readonly client: Client,
    options: Omit<ConnectOptions, 'address' | 'namespace'> = {},
    private readonly ownedConnection?: Connection,
  ) {
    const config = loadConfig();
    this.context = new ClientContext(client, {
      taskQueue: options.taskQueue ?? config.taskQueue,
      ...(options.known ? { known: options.known } : {}),
      blobs: options.blobs ?? createBlobStore(config.blobStore),
      reviewTimeoutMs: options.reviewTimeoutMs ?? DEFAULT_REVIEW_TIMEOUT_MS,
      answerWaitMs: options.answerWaitMs ?? WORKER_ANSWER_WAIT_MS,
      blobThresholdBytes: config.blobThresholdBytes,
      ...(options.temporal ? { temporal: options.temporal } : {}),
    });
    this.taskQueue = this.context.taskQueue;
    this.reviewTimeoutMs = this.context.reviewTimeoutMs;
    this.answerWaitMs = this.context.answerWaitMs;
    this.items = new ItemsClient(this.context, this);
    this.decisions = new DecisionsClient(this.context, this);
    this.approvals = new ApprovalsClient(this.context, this);
    this.loopStages = new LoopStagesClient(this.context, this);
    this.trees = new TreesClient(this.context, this);
    this.workers = new WorkersClient(this.context, this);
    this.limits = new LimitsClient(this.context, this);
    this.evals = new EvalsClient(this.context, this);
    this.schedules = new SchedulesClient(this.context, this);
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

  /** Alias of `client.items.start`: starts a work item, or returns the existing one with the same id. */
  start(
    pipeline: unknown,
    input: unknown = null,
    options: StartOptions = {},
  ): Promise<{ id: string; runId: string; pipeline: string; existing: boolean }> {
    return this.items.start(pipeline, input, options);
  }

  /** Alias of `client.trees.start`: starts a V3 TDD tree (seed 001) on a git repository. */
  startTdd(
    spec: unknown,
    options: TddStartOptions,
  ): Promise<{ id: string; runId: string; branch: string; targetBranch: string }> {
    return this.trees.start(spec, options);
  }

  /** Alias of `client.trees.state`: a TDD node's state. */
  getTddState(id: string, page: StateQueryArgs = {}, timeoutMs?: number): Promise<TddNodeState> {
    return this.trees.state(id, page, timeoutMs);
  }

  /** Alias of `client.trees.result`: waits for a TDD node to finish. */
  tddResult(id: string): Promise<TddNodeResult> {
    return this.trees.result(id);
  }

  /** Alias of `client.items.state`: the work item's state (the `state` query). */
  getState(id: string, page: StateQueryArgs = {}, timeoutMs?: number): Promise<WorkItemState> {
    return this.items.state(id, page, timeoutMs);
  }

  /** Alias of `client.items.events`: every event of a work item. */
  events(id: string): Promise<TreadleEvent[]> {
    return this.items.events(id);
  }

  /** Alias of `client.loopStages.list`: the loop stages of a work item (or a loop stage's own workflow). */
  loops(id: string): Promise<LoopStageListing[]> {
    return this.loopStages.list(id);
  }

  /** Alias of `client.items.workflowType`: the workflow type behind an id. */
  workflowType(id: string): Promise<string> {
    return this.items.workflowType(id);
  }

  /** Alias of `client.loopStages.state`: a loop stage's state. */
  getLoopState(loopWorkflowId: string, timeoutMs?: number): Promise<LoopState> {
    return this.loopStages.state(loopWorkflowId, timeoutMs);
  }

  /** Alias of `client.loopStages.resume`: resumes (or abandons) a failed loop stage. */
  resumeLoop(
    id: string,
    options: LoopResumeOptions = {},
  ): Promise<{ workflowId: string; stage: string; from: number; resumed: boolean }> {
    return this.loopStages.resume(id, options);
  }

  /** Alias of `client.loopStages.reportQueue`: reports a signal-fed queue's length to a loop stage. */
  reportLoopQueue(loopWorkflowId: string, pending: number): Promise<void> {
    return this.loopStages.reportQueue(loopWorkflowId, pending);
  }

  /** Alias of `client.decisions.review`: resolves a review. */
  review(id: string, stage: string, outcome: ReviewOutcome, reviewer = defaultReviewer()): Promise<ReviewAccepted> {
    return this.decisions.review(id, stage, outcome, reviewer);
  }

  /** Alias of `client.decisions.approve`: approves a stage (optionally a specific attempt's output). */
  approve(
    id: string,
    stage: string,
    options: { reviewer?: string; note?: string; attempt?: number } = {},
  ): Promise<ReviewAccepted> {
    return this.decisions.approve(id, stage, options);
  }

  /** Alias of `client.decisions.reject`: rejects a stage. */
  reject(
    id: string,
    stage: string,
    reason: string,
    options: { reviewer?: string; note?: string } = {},
  ): Promise<ReviewAccepted> {
    return this.decisions.reject(id, stage, reason, options);
  }

  /** Alias of `client.decisions.requestChanges`: the stage runs one more attempt with the note in its feedback. */
  requestChanges(
    id: string,
    stage: string,
    note: string,
    options: { reviewer?: string } = {},
  ): Promise<ReviewAccepted> {
    return this.decisions.requestChanges(id, stage, note, options);
  }

  /** Alias of `client.decisions.approveWithEdits`: approves with an edited artefact. */
  approveWithEdits(
    id: string,
    stage: string,
    artefact: Json,
    options: { reviewer?: string; note?: string } = {},
  ): Promise<ReviewAccepted> {
    return this.decisions.approveWithEdits(id, stage, artefact, options);
  }

  /** Alias of `client.items.openByEngine`: open work items per engine version, newest first. */
  openItemsByEngine(options: { taskQueue?: string } = {}): Promise<EngineCount[]> {
    return this.items.openByEngine(options);
  }

  /** Alias of `client.decisions.listReviews`: pending reviews across all work items, from visibility alone. */
  listPendingReviews(options: { pipeline?: string } = {}): Promise<PendingReviewListing[]> {
    return this.decisions.listReviews(options);
  }

  /** Alias of `client.approvals.list`: pending approval requests across all work items, from visibility alone. */
  listApprovals(options: { pipeline?: string } = {}): Promise<ApprovalListing[]> {
    return this.approvals.list(options);
  }

  /** Alias of `client.decisions.list`: every pending decision of every kind, oldest first. */
  listPendingDecisions(options: { pipeline?: string; kinds?: DecisionKind[] } = {}): Promise<PendingDecision[]> {
    return this.decisions.list(options);
  }

  /** Alias of `client.decisions.changes`: the workflows whose pending decisions changed since `since`. */
  listDecisionChanges(since: Date): Promise<DecisionChange[]> {
    return this.decisions.changes(since);
  }

  /**
   * Supplies the output of `stage` of work item `id`, a `human` stage waiting for a person (issue 40): the answer
   * `respond` to its decision, by the one path `decide` takes. An output that breaks the stage's output schema is
   * refused before anything is sent (`invalid_input`, one problem per line); a large one goes by blob reference.
   */
  respond(id: string, stage: string, output: Json, options: { reviewer?: string } = {}): Promise<DecisionOutcome> {
    const key = this.humanDecisionKey(id, stage);
    return this.decisions.decide(key, { action: 'respond', artefact: output }, options.reviewer ?? defaultReviewer());
  }

  /** The decision key of `stage` of work item `id` waiting for a person's output (a `human` stage). */
  humanDecisionKey(id: string, stage: string): string {
    return decisionKey(id, 'human', stage);
  }

  /**
   * Alias of `client.decisions.decide`: answers a pending decision by key as `reviewer`; `options.group` is the
   * reviewer group recorded beside the name (not checked: the SDK acts with Temporal's access, not a reviewer's).
   */
  decide(
    key: string,
    answer: DecisionAnswer,
    reviewer = defaultReviewer(),
    options: { group?: string } = {},
  ): Promise<DecisionOutcome> {
    return this.decisions.decide(key, answer, reviewer, options);
  }

  /** Alias of `client.decisions.detail`: what a reviewer needs to judge one pending decision. */
  decisionDetail(key: string, options?: DetailOptions): Promise<DecisionDetail> {
    return this.decisions.detail(key, options);
  }

  /** Alias of `client.decisions.checkEdit`: an edited artefact's problems against the stage's output schema. */
  checkEdit(key: string, artefact: unknown): Promise<SchemaProblem[]> {
    return this.decisions.checkEdit(key, artefact);
  }

  /** Alias of `client.approvals.get`: an approval request with its payload resolved. */
  getApproval(id: string): Promise<ApprovalRequest> {
    return this.approvals.get(id);
  }

  /** Alias of `client.approvals.decide`: approves or rejects a pending approval request by id. */
  decideApproval(
    id: string,
    decision: 'approve' | 'reject',
    options: { by?: string; reason?: string } = {},
  ): Promise<ApprovalDecided> {
    return this.approvals.decide(id, decision, options);
  }

  /** Alias of `client.items.audit`: the audit of a run (seed 003), read from the workflow history. */
  audit(idOrCorrelation: string): Promise<AuditEntry[]> {
    return this.items.audit(idOrCorrelation);
  }

  /** Alias of `client.items.activityRetries`: the item's activities that Temporal is retrying. */
  activityRetries(id: string): Promise<{ activityType: string; attempt: number; lastFailure?: string }[]> {
    return this.items.activityRetries(id);
  }

  /** Alias of `client.items.usage`: model usage of a work item. */
  usage(id: string): Promise<UsageSummary> {
    return this.items.usage(id);
  }

  /** Alias of `client.items.cancel`: cancels a work item, recording who (`by`) and why (`reason`). */
  cancel(id: string, options: CancelOptions = {}): Promise<CancelOutcome> {
    return this.items.cancel(id, options);
  }

  /** Alias of `client.items.visible`: what Temporal knows of an item without asking a worker. */
  visibleItem(id: string): Promise<VisibleItem> {
    return this.items.visible(id);
  }

  /** Alias of `client.items.result`: waits for the work item to finish and returns its result. */
  result(id: string): Promise<WorkItemResult> {
    return this.items.result(id);
  }

  /** Alias of `client.items.watch`: calls `onEvent` for each new event until the item finishes or waits. */
  watch(id: string, onEvent: (event: TreadleEvent) => void, options: WatchOptions = {}): Promise<WorkItemState> {
    return this.items.watch(id, onEvent, options);
  }

  /** Alias of `client.workers.polling`: the identities of the workers that polled `taskQueue` lately. */
  workersPolling(taskQueue: string = this.taskQueue): Promise<string[]> {
    return this.workers.polling(taskQueue);
  }

  /** Alias of `client.workers.nonePolls`: whether no worker polls `taskQueue`. */
  noWorkerPolls(taskQueue: string = this.taskQueue): Promise<boolean> {
    return this.workers.nonePolls(taskQueue);
  }

  /** Alias of `client.items.readArtefact`: reads an artefact, following a blob reference into the blob store. */
  readArtefact(artefact: Artefact | undefined): Promise<Json | undefined> {
    return this.items.readArtefact(artefact);
  }

  /** Closes the connection when this client opened it. */
  async close(): Promise<void> {
    await this.ownedConnection?.close();
  }

  /**
   * What a failed call should throw: when the server accepted the connection but refused the call for its
   * credentials (a proxy that lets the connection check through; a key without access to the namespace), the
   * one-line `config` error a refused connection gives; else `error` itself.
   */
  explainFailure(error: unknown): unknown {
    return this.context.explainFailure(error);
  }
}
