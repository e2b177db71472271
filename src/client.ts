/**
 * `TreadleClient`: the SDK users call to start work items, read their state, review stages and list
 * pending reviews. Every error is a {@link TreadleError} with one clear line.
 */
import {
  Client,
  Connection,
  ServiceError,
  WorkflowExecutionAlreadyStartedError,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
  WorkflowUpdateRPCTimeoutOrCancelledError,
  type WorkflowHandle,
} from '@temporalio/client';
import { createHash, randomUUID } from 'node:crypto';
import type { TreadleTracing } from './tracing';
import { audit, auditHistory, type AuditEntry } from './audit';
import { canonicalJson } from './model/hashing';
import { offloadArtefact, resolveArtefact, type BlobStore } from './storage/blob-store';
import { createBlobStore } from './storage';
import { treadleExternalStorage } from './storage/external-storage';
import { loadConfig } from './config';
import { listExecutions } from './visibility';
import { summarizeUsage, type UsageSummary } from './engine/usage';
import { PipelineBuilder } from './model/builder';
import { validatePipeline, type KnownImplementations } from './model/pipeline';
import {
  explainSearchAttributeError,
  PENDING_APPROVALS_QUERY,
  PENDING_REVIEWS_QUERY,
  REVIEWS_MEMO_KEY,
  TreadleCorrelationId,
  TreadlePendingReviews,
  TreadlePipeline,
  TreadleStatus,
} from './model/search-attributes';
import {
  APPROVAL_ID_PATTERN,
  APPROVALS_MEMO_KEY,
  type ApprovalDecided,
  type ApprovalDecision,
  type ApprovalRequest,
  type ApprovalsMemo,
} from './kinds/approval/shapes';
import type { Artefact, Json, ReviewOutcome, TreadleEvent } from './model/shapes';
import type {
  PendingReview,
  ReviewsMemo,
  StateQueryArgs,
  WorkItemInput,
  WorkItemResult,
  WorkItemState,
} from './model/state';
import {
  decideApprovalUpdate,
  eventsQuery,
  loopQueueSignal,
  loopStateQuery,
  resolveReviewUpdate,
  resumeLoopUpdate,
  stateQuery,
  tddStateQuery,
  type ReviewAccepted,
} from './workflows/messages';
import type { LoopState } from './kinds/loop/shapes';
import { openItemsByEngine, type EngineCount } from './engine-versions';
import { seedSpecOf, tddRootInput, tddTargetBranch, validateTddSpec } from './kinds/tdd/spec';
import type { NodeContext, TddNodeResult, TddNodeState } from './kinds/tdd/shapes';

/** A Treadle error meant for users: one line that says what went wrong. */
export class TreadleError extends Error {
  constructor(
    message: string,
    readonly code: 'not_found' | 'invalid_pipeline' | 'invalid_review' | 'unreachable' | 'invalid_input' | 'failed',
    readonly problems: string[] = [],
  ) {
    super(message);
    this.name = 'TreadleError';
  }
}

/**
 * Orders strings by UTF-16 code units: ISO timestamps and ids sort the same on every machine, and 1,000
 * listings sort in well under a millisecond (`localeCompare` goes through ICU, ~5 ms for 1,000).
 */
function byCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** A pending review across work items. */
export interface PendingReviewListing extends PendingReview {
  itemId: string;
  pipeline: string;
}

/**
 * The default id of a work item: `<pipeline>-<first 16 hex of sha256(canonical input)>`, so the same input
 * names the same run (seed 003: a run is found by its pipeline and input hash).
 */
export function runIdFor(pipeline: string, input: Json): string {
  return `${pipeline}-${createHash('sha256').update(canonicalJson(input)).digest('hex').slice(0, 16)}`;
}

/** A pending approval request across work items (no payload: {@link TreadleClient.getApproval} has it). */
export type ApprovalListing = ApprovalsMemo['requests'][number] & { pipeline: string };

/** Options for {@link TreadleClient.connect}. */
export interface ConnectOptions {
  address?: string;
  namespace?: string;
  taskQueue?: string;
  /** Implementation names to check specs against before starting (the CLI passes the built-ins). */
  known?: KnownImplementations;
  blobs?: BlobStore;
  /** How long a review waits for a worker to accept it (default 15 s). */
  reviewTimeoutMs?: number;
  /** OpenTelemetry tracing (see `tracing.ts`): starts become the root span of each work item's trace. */
  tracing?: TreadleTracing;
}

/** How long a refused decision waits for a worker to say how a finished item's request was decided. */
const DECIDED_QUERY_WAIT_MS = 5_000;

/** Reviews are updates, which need a running worker; without one the call would wait forever. */
const DEFAULT_REVIEW_TIMEOUT_MS = 15_000;

const WORKFLOW_TYPE = 'workItem';
const TDD_WORKFLOW_TYPE = 'tddNode';
/** How often `watch` reads the state; queries are cheap and never touch the history. */
const WATCH_INTERVAL_MS = 500;

/** The Treadle client. */
export class TreadleClient {
  readonly taskQueue: string;
  private readonly known?: KnownImplementations;
  private readonly blobs: BlobStore;
  private readonly reviewTimeoutMs: number;
  private readonly blobThresholdBytes: number;

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
    this.blobThresholdBytes = config.blobThresholdBytes;
  }

  /** Connects to Temporal (`TEMPORAL_ADDRESS`, `TEMPORAL_NAMESPACE` by default). */
  static async connect(options: ConnectOptions = {}): Promise<TreadleClient> {
    const config = loadConfig();
    const address = options.address ?? config.address;
    let connection: Connection;
    try {
      connection = await Connection.connect({ address, connectTimeout: 5_000 });
      await connection.workflowService.getSystemInfo({});
    } catch (error) {
      throw new TreadleError(
        `cannot reach the Temporal server at ${address}: ${(error as Error).message.split('\n')[0]} (start one with "treadle dev" or set TEMPORAL_ADDRESS)`,
        'unreachable',
      );
    }
    const { address: _address, namespace, ...rest } = options;
    // Payloads the worker offloaded (ExternalStorage, over 256 KiB) are read back from the same blob store.
    const blobs = rest.blobs ?? createBlobStore(config.blobStore);
    const client = new Client({
      connection,
      namespace: namespace ?? config.namespace,
      dataConverter: { externalStorage: treadleExternalStorage(blobs) },
      ...(options.tracing ? { plugins: [options.tracing.plugin] } : {}),
    });
    return new TreadleClient(client, { ...rest, blobs }, connection);
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
    const raw = pipeline instanceof PipelineBuilder ? pipeline.toJSON() : pipeline;
    const validation = validatePipeline(raw, this.known);
    if (!validation.ok) {
      const name =
        typeof raw === 'object' && raw !== null && typeof (raw as { name?: unknown }).name === 'string'
          ? (raw as { name: string }).name
          : '(unnamed)';
      throw new TreadleError(
        `pipeline ${name} is invalid:\n${validation.problems.map((p) => `  - ${p}`).join('\n')}`,
        'invalid_pipeline',
        validation.problems,
      );
    }
    const inputProblem = jsonProblem(input);
    if (inputProblem)
      throw new TreadleError(`the work item input must be plain JSON: ${inputProblem}`, 'invalid_input');
    // A large input is stored once, content-addressed; the history carries its reference.
    const storedInput =
      (await offloadArtefact((input ?? null) as Json, this.blobs, this.blobThresholdBytes, 'work item input')) ?? null;
    const id = options.id ?? runIdFor(validation.spec.name, (input ?? null) as Json);
    if (
      options.tokenBudget !== undefined &&
      options.tokenBudget !== null &&
      !(Number.isInteger(options.tokenBudget) && options.tokenBudget > 0)
    ) {
      throw new TreadleError(
        `tokenBudget must be a whole number of tokens above 0, got ${options.tokenBudget}`,
        'invalid_input',
      );
    }
    // Seed 003's correlation id: a UUID per run, on every activity, model call record and log line.
    const correlationId = randomUUID();
    const args: WorkItemInput = {
      pipeline: raw,
      input: storedInput,
      itemId: id,
      correlationId,
      ...(options.tokenBudget !== undefined ? { tokenBudget: options.tokenBudget } : {}),
    };
    try {
      const handle = await this.client.workflow.start(WORKFLOW_TYPE, {
        taskQueue: this.taskQueue,
        workflowId: id,
        args: [args],
        // A running or finished run with this id is the answer: the start fails, and the catch below returns it.
        workflowIdConflictPolicy: 'FAIL',
        workflowIdReusePolicy: 'REJECT_DUPLICATE',
        typedSearchAttributes: [
          { key: TreadlePipeline, value: validation.spec.name },
          { key: TreadleStatus, value: 'running' },
          { key: TreadleCorrelationId, value: correlationId },
        ],
        staticSummary: `${validation.spec.name}: ${validation.spec.stages.length} stages`,
      });
      return { id, runId: handle.firstExecutionRunId, pipeline: validation.spec.name, existing: false };
    } catch (error) {
      if (error instanceof WorkflowExecutionAlreadyStartedError) {
        const description = await this.handle(id).describe();
        return { id, runId: description.runId, pipeline: validation.spec.name, existing: true };
      }
      if (error instanceof ServiceError) {
        // The SDK's message is only "Failed to start Workflow"; the server's reason is in the cause.
        throw new TreadleError(
          `could not start work item ${id}: ${explainSearchAttributeError(error.cause?.message ?? error.message)}`,
          'failed',
        );
      }
      throw error;
    }
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
    const checked = validateTddSpec(spec);
    if (!checked.ok)
      throw new TreadleError(
        `TDD spec is invalid:\n${checked.problems.map((p) => `  - ${p}`).join('\n')}`,
        'invalid_pipeline',
        checked.problems,
      );
    const seedSpec = seedSpecOf(checked.spec);
    const id = options.id ?? `tdd-${seedSpec.id}`;
    const put = async (value: unknown, summary: string): Promise<string> =>
      (await this.blobs.put(Buffer.from(JSON.stringify(value)), 'application/json', summary)).ref;
    const context: NodeContext = { spec: seedSpec, parentContext: null };
    const targetBranch = tddTargetBranch(checked.spec);
    const input = tddRootInput(checked.spec, {
      treeId: id,
      repo: options.repo,
      contextRef: await put(context, `TDD spec ${seedSpec.id}`),
      ...(options.replies !== undefined
        ? { repliesRef: await put(options.replies, `scripted replies for ${seedSpec.id}`) }
        : {}),
    });
    try {
      const handle = await this.client.workflow.start(TDD_WORKFLOW_TYPE, {
        taskQueue: this.taskQueue,
        workflowId: id,
        args: [input],
        workflowIdConflictPolicy: 'USE_EXISTING',
        workflowIdReusePolicy: 'REJECT_DUPLICATE',
        typedSearchAttributes: [
          { key: TreadlePipeline, value: 'tdd' },
          { key: TreadleStatus, value: 'running' },
        ],
        staticSummary: `TDD ${seedSpec.id}: ${seedSpec.acceptanceCriteria.length} criteria → ${targetBranch}`,
      });
      return { id, runId: handle.firstExecutionRunId, branch: `tdd/${seedSpec.id}`, targetBranch };
    } catch (error) {
      if (error instanceof WorkflowExecutionAlreadyStartedError)
        return { id, runId: (await this.handle(id).describe()).runId, branch: `tdd/${seedSpec.id}`, targetBranch };
      if (error instanceof ServiceError)
        throw new TreadleError(
          `could not start TDD tree ${id}: ${explainSearchAttributeError(error.cause?.message ?? error.message)}`,
          'failed',
        );
      throw error;
    }
  }

  /** A TDD node's state (the `state` query of a `tddNode` workflow). */
  async getTddState(id: string, page: StateQueryArgs = {}): Promise<TddNodeState> {
    return this.call(id, (h) => h.query(tddStateQuery, page));
  }

  /** Waits for a TDD node to finish: its MergeComplete (by reference) or why it failed. */
  async tddResult(id: string): Promise<TddNodeResult> {
    return this.call(id, (h) => h.result() as Promise<TddNodeResult>);
  }

  /**
   * The work item's state (the `state` query): stages, attempts, reviews, usage, and one page of events
   * (`eventsAfter`, `eventLimit`; `eventCount` says how many there are).
   */
  async getState(id: string, page: StateQueryArgs = {}): Promise<WorkItemState> {
    return this.call(id, (h) => h.query(stateQuery, page));
  }

  /** Every event of a work item, read page by page. */
  async events(id: string): Promise<TreadleEvent[]> {
    const out: TreadleEvent[] = [];
    for (;;) {
      const page = await this.call(id, (h) => h.query(eventsQuery, { eventsAfter: out.length }));
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
        state: await this.call(workflowId, (h) => h.query(loopStateQuery)),
      })),
    );
  }

  /** The workflow type behind an id (`workItem`, `tddNode`, `loopStage`). */
  async workflowType(id: string): Promise<string> {
    return this.call(id, (h) => h.describe()).then((d) => d.type);
  }

  /** A loop stage's state: iterations, decisions, the failure waiting for a resume. */
  async getLoopState(loopWorkflowId: string): Promise<LoopState> {
    return this.call(loopWorkflowId, (h) => h.query(loopStateQuery));
  }

  /**
   * Resumes a failed loop stage from the iteration that failed (or gives it up: `abandon`). `id` is the work
   * item (then `stage` picks the loop when several are failed) or the loop's own workflow. Rejects with the
   * reason when no loop is failed.
   */
  async resumeLoop(
    id: string,
    options: { stage?: string; action?: 'resume' | 'abandon'; reason?: string } = {},
  ): Promise<{ workflowId: string; stage: string; from: number; resumed: boolean }> {
    const loops = (await this.loops(id)).filter((l) => options.stage === undefined || l.state.stage === options.stage);
    if (loops.length === 0)
      throw new TreadleError(
        options.stage
          ? `work item ${id} has no loop stage "${options.stage}" that has started`
          : `work item ${id} has no loop stage that has started`,
        'invalid_review',
      );
    const failed = loops.filter((l) => l.state.status === 'failed');
    if (failed.length === 0) {
      throw new TreadleError(
        `no loop stage of ${id} is failed, so there is nothing to resume (${loops.map((l) => `${l.state.stage}: ${l.state.status} at iteration ${l.state.iteration}`).join('; ')})`,
        'invalid_review',
      );
    }
    if (failed.length > 1)
      throw new TreadleError(
        `several loop stages of ${id} are failed (${failed.map((l) => l.state.stage).join(', ')}); name one with --stage`,
        'invalid_review',
      );
    const loop = failed[0]!;
    const request = {
      action: options.action ?? 'resume',
      ...(options.reason !== undefined ? { reason: options.reason } : {}),
    };
    try {
      const answer = await this.client.withAbortSignal(AbortSignal.timeout(this.reviewTimeoutMs), () =>
        this.handle(loop.workflowId).executeUpdate(resumeLoopUpdate, { args: [request] }),
      );
      return { workflowId: loop.workflowId, stage: loop.state.stage, ...answer };
    } catch (error) {
      if (error instanceof WorkflowUpdateFailedError)
        throw new TreadleError(`resume refused: ${error.cause?.message ?? error.message}`, 'invalid_review');
      throw error;
    }
  }

  /** Reports a signal-fed queue's length to a loop stage (its `queue: { provider: signal }`). */
  async reportLoopQueue(loopWorkflowId: string, pending: number): Promise<void> {
    await this.call(loopWorkflowId, (h) => h.signal(loopQueueSignal, { pending }));
  }

  /** Resolves a review; rejects with a clear message when the stage is not waiting or the input is bad. */
  async review(
    id: string,
    stage: string,
    outcome: ReviewOutcome,
    reviewer = defaultReviewer(),
  ): Promise<ReviewAccepted> {
    return this.call(id, async (h) => {
      try {
        return await this.client.withAbortSignal(AbortSignal.timeout(this.reviewTimeoutMs), () =>
          h.executeUpdate(resolveReviewUpdate, { args: [{ stage, outcome, reviewer }] }),
        );
      } catch (error) {
        if (error instanceof WorkflowUpdateFailedError) {
          throw new TreadleError(`review rejected: ${error.cause?.message ?? error.message}`, 'invalid_review');
        }
        if (
          error instanceof WorkflowUpdateRPCTimeoutOrCancelledError ||
          (error as { name?: string }).name === 'AbortError'
        ) {
          throw new TreadleError(
            `no worker accepted the review of ${id} within ${Math.round(this.reviewTimeoutMs / 1000)}s; is a worker running on task queue ${this.taskQueue} ("treadle dev" or "treadle worker")?`,
            'unreachable',
          );
        }
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
   * Approves with an edited artefact, which downstream stages receive instead of the original. Edits larger
   * than the blob threshold go to the blob store and only their reference enters the history, as stage
   * artefacts do (so the blob store must be one the workers read, e.g. a shared `TREADLE_BLOB_DIR`).
   */
  async approveWithEdits(
    id: string,
    stage: string,
    artefact: Json,
    options: { reviewer?: string; note?: string } = {},
  ): Promise<ReviewAccepted> {
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
   * Open work items per engine version, newest first (src/engine-versions.ts): all in the namespace, or only
   * those on `taskQueue`. One visibility listing plus the first page of each open item's history.
   */
  openItemsByEngine(options: { taskQueue?: string } = {}): Promise<EngineCount[]> {
    return openItemsByEngine(this.client, options);
  }

  /**
   * Pending reviews across all work items, from visibility alone: one listing call reads each waiting item's
   * search attributes and memo (kept by the workflow), so no item is queried and no worker is needed.
   * Eventually consistent: a review requested a moment ago may take a second to appear.
   */
  async listPendingReviews(options: { pipeline?: string } = {}): Promise<PendingReviewListing[]> {
    const query = options.pipeline
      ? `${PENDING_REVIEWS_QUERY} AND TreadlePipeline = '${options.pipeline.replace(/'/g, "''")}'`
      : PENDING_REVIEWS_QUERY;
    const listings: PendingReviewListing[] = [];
    for await (const execution of listExecutions(this.client, query)) {
      const pipeline = execution.keyword(TreadlePipeline.name) ?? '';
      const memo = (await execution.memo(REVIEWS_MEMO_KEY)) as ReviewsMemo | null | undefined;
      const reviews = memo?.reviews ?? [];
      for (const review of reviews) listings.push({ ...review, itemId: execution.workflowId, pipeline });
      // Stages named in the search attribute but not in the memo (a memo cut short, or written by an older
      // workflow version) are still listed, with what visibility knows.
      const inMemo = new Set(reviews.map((r) => r.stage));
      for (const stage of execution.keywordList(TreadlePendingReviews.name)) {
        if (inMemo.has(stage)) continue;
        listings.push({
          itemId: execution.workflowId,
          pipeline,
          stage,
          reason: 'unknown',
          message: 'details not in the listing; see treadle status',
          requestedAt: execution.startTime.toISOString(),
          attempt: 0,
        });
      }
    }
    return listings.sort(
      (a, b) =>
        byCodeUnits(a.requestedAt, b.requestedAt) || byCodeUnits(a.itemId, b.itemId) || byCodeUnits(a.stage, b.stage),
    );
  }

  /**
   * Pending approval requests across all work items, from visibility alone (one listing call: each waiting
   * item's memo carries its first 50 requests; `treadle status` shows all). Payloads are left out: read
   * them with {@link getApproval}. Eventually consistent, like {@link listPendingReviews}.
   */
  async listApprovals(options: { pipeline?: string } = {}): Promise<ApprovalListing[]> {
    const query = options.pipeline
      ? `${PENDING_APPROVALS_QUERY} AND TreadlePipeline = '${options.pipeline.replace(/'/g, "''")}'`
      : PENDING_APPROVALS_QUERY;
    const listings: ApprovalListing[] = [];
    for await (const execution of listExecutions(this.client, query)) {
      const pipeline = execution.keyword(TreadlePipeline.name) ?? '';
      const memo = (await execution.memo(APPROVALS_MEMO_KEY)) as ApprovalsMemo | null | undefined;
      for (const request of memo?.requests ?? [])
        if (request.status === 'pending') listings.push({ ...request, pipeline });
    }
    return listings.sort((a, b) => byCodeUnits(a.createdAt, b.createdAt) || byCodeUnits(a.id, b.id));
  }

  /** The work item holding an approval request (pending or decided), found in visibility by the request's id. */
  private async approvalItem(id: string): Promise<string> {
    if (!APPROVAL_ID_PATTERN.test(id))
      throw new TreadleError(
        `"${id}" is not an approval id (they look like ap-7k3m9q2xwd; see treadle approve list)`,
        'invalid_review',
      );
    for await (const execution of listExecutions(this.client, `TreadleApprovals = '${id}'`, 2))
      return execution.workflowId;
    const hint = 'treadle approve list shows the pending ones';
    const message = `approval request ${id} not found: no work item has it (${hint})`;
    throw new TreadleError(message, 'not_found');
  }

  /**
   * Why a request of an item that has finished cannot be decided: how it was decided (by whom, what, when),
   * from the item's last state when a worker answers the query, else from the decisions in its history.
   */
  private async decidedBefore(id: string, itemId: string): Promise<TreadleError> {
    const handle = this.handle(itemId);
    const description = await handle.describe();
    const deadline = Date.now() + DECIDED_QUERY_WAIT_MS;
    const query = (): Promise<WorkItemState> => handle.query(stateQuery, { eventLimit: 1 });
    const state = await this.client.withDeadline(deadline, query).catch(() => undefined);
    const request = state?.approvals?.find((r) => r.id === id);
    let how: string | undefined;
    if (request && request.status !== 'pending') {
      const by = request.decidedBy ? ` by ${request.decidedBy}` : '';
      const at = request.decidedAt ? ` at ${request.decidedAt}` : '';
      how = `${request.status}${by}${at}${request.reason ? `: ${request.reason}` : ''}`;
    } else {
      // No worker answered: the decision as the history recorded it (expiries are timers, not decisions).
      const events = (await handle.fetchHistory()).events ?? [];
      const isDecision = (e: AuditEntry): boolean =>
        e.kind === 'approval' && e.message.startsWith(`${id} `) && !/^\S+ (requested|executed):/.test(e.message);
      const decided = auditHistory(itemId, events).filter(isDecision).pop();
      if (decided) how = `${decided.message.slice(id.length + 1)} at ${decided.at}`;
    }
    const ended = `work item ${itemId} has finished (${description.status.name.toLowerCase()})`;
    const message = `decision refused: approval request ${id} is already ${how ?? 'decided'}; ${ended}`;
    return new TreadleError(message, 'invalid_review');
  }

  /** An approval request with its payload resolved (for reviewing it); `status` says whether it is still pending. */
  async getApproval(id: string): Promise<ApprovalRequest> {
    const itemId = await this.approvalItem(id);
    const state = await this.getState(itemId, { eventLimit: 1 });
    const request = state.approvals?.find((r) => r.id === id);
    if (!request) throw new TreadleError(`work item ${itemId} has no approval request ${id}`, 'not_found');
    return { ...request, payload: (await resolveArtefact(request.payload, this.blobs)) ?? null };
  }

  /**
   * Approves or rejects a pending approval request by id. A request already decided (or expired) is refused
   * saying how it was decided (by whom, what, when); an id no item has is "not found". Nothing enters the history.
   */
  async decideApproval(
    id: string,
    decision: 'approve' | 'reject',
    options: { by?: string; reason?: string } = {},
  ): Promise<ApprovalDecided> {
    const itemId = await this.approvalItem(id);
    const payload: ApprovalDecision = {
      id,
      decision,
      by: options.by ?? defaultReviewer(),
      ...(options.reason !== undefined ? { reason: options.reason } : {}),
    };
    return this.call(itemId, async (h) => {
      try {
        return await this.client.withAbortSignal(AbortSignal.timeout(this.reviewTimeoutMs), () =>
          h.executeUpdate(decideApprovalUpdate, { args: [payload] }),
        );
      } catch (error) {
        if (error instanceof WorkflowUpdateFailedError)
          throw new TreadleError(`decision refused: ${error.cause?.message ?? error.message}`, 'invalid_review');
        // The item exists (visibility found it) but takes no more updates: it has finished.
        if (isNotFound(error)) throw await this.decidedBefore(id, itemId);
        if (
          error instanceof WorkflowUpdateRPCTimeoutOrCancelledError ||
          (error as { name?: string }).name === 'AbortError'
        ) {
          throw new TreadleError(
            `no worker accepted the decision on ${id} (work item ${itemId}) within ${Math.round(this.reviewTimeoutMs / 1000)}s; is a worker running on task queue ${this.taskQueue}?`,
            'unreachable',
          );
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

  /** Model usage of a work item: calls, tokens, latency and estimated cost, per stage and in total. */
  async usage(id: string): Promise<UsageSummary> {
    return (await this.getState(id)).usage ?? summarizeUsage({});
  }

  /** Waits for the work item to finish and returns its result. */
  async result(id: string): Promise<WorkItemResult> {
    return this.call(id, (h) => h.result() as Promise<WorkItemResult>);
  }

  /**
   * Calls `onEvent` for each new event until the item finishes or (with `untilReview`) waits for a human
   * (a review or an approval).
   * Returns the last state read; its `events` are the last ones delivered, and every event up to its
   * `eventCount` has been delivered once.
   */
  async watch(
    id: string,
    onEvent: (event: TreadleEvent) => void,
    options: { untilReview?: boolean; afterSeq?: number; signal?: AbortSignal } = {},
  ): Promise<WorkItemState> {
    let seen = options.afterSeq ?? 0;
    // The whole state is read once, at the end; events that arrived since the last poll are delivered too,
    // so every event up to the returned state's `eventCount` has been seen exactly once.
    const finalState = async (): Promise<WorkItemState> => {
      const state = await this.getState(id, { eventsAfter: seen });
      for (const event of state.events) onEvent(event);
      return state;
    };
    for (;;) {
      // Only new events travel on each poll.
      const page = await this.call(id, (h) => h.query(eventsQuery, { eventsAfter: seen }));
      for (const event of page.events) {
        onEvent(event);
        seen = event.seq;
      }
      if (page.events.length > 0 && seen < page.eventCount) continue;
      const waiting = page.status === 'waiting_review' || page.status === 'waiting_approval';
      const done = page.status !== 'running' && !waiting;
      if (done || (options.untilReview && waiting) || options.signal?.aborted) return finalState();
      // Terminated or timed-out executions never reach the workflow's own finish; Temporal knows.
      const execution = (await this.handle(id).describe()).status.name;
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

  /** Reads an artefact, following a blob reference into the blob store. */
  async readArtefact(artefact: Artefact | undefined): Promise<Json | undefined> {
    return resolveArtefact(artefact, this.blobs);
  }

  /** Closes the connection when this client opened it. */
  async close(): Promise<void> {
    await this.ownedConnection?.close();
  }

  private handle(id: string): WorkflowHandle {
    return this.client.workflow.getHandle(id);
  }

  /** Runs a call on a work item's handle, turning "not found" into a clear error. */
  private async call<T>(id: string, fn: (handle: WorkflowHandle) => Promise<T>): Promise<T> {
    try {
      return await fn(this.handle(id));
    } catch (error) {
      if (error instanceof TreadleError) throw error;
      if (isNotFound(error)) {
        throw new TreadleError(`unknown work item "${id}" in namespace ${this.client.options.namespace}`, 'not_found');
      }
      throw error;
    }
  }
}

/** Why a value is not plain JSON (undefined, functions, non-finite numbers, class instances), or undefined. */
function jsonProblem(value: unknown, at = 'input'): string | undefined {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return undefined;
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : `${at} is ${value}`;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const problem = jsonProblem(value[i], `${at}[${i}]`);
      if (problem) return problem;
    }
    return undefined;
  }
  if (typeof value === 'object') {
    const proto = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null)
      return `${at} is a ${(value as object).constructor?.name ?? 'class instance'}, not a plain object`;
    for (const [key, inner] of Object.entries(value)) {
      if (inner === undefined) continue;
      const problem = jsonProblem(inner, `${at}.${key}`);
      if (problem) return problem;
    }
    return undefined;
  }
  return `${at} is ${typeof value}`;
}

function isNotFound(error: unknown): boolean {
  return error instanceof WorkflowNotFoundError || (error as { name?: string }).name === 'WorkflowNotFoundError';
}

function defaultReviewer(): string {
  return process.env.TREADLE_REVIEWER || process.env.USER || 'anonymous';
}
