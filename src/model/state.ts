/**
 * Workflow and activity inputs and outputs, and the work item state served by the `state` query.
 * Everything is plain JSON: no Map, no Date (STYLE.md).
 */
import type { QualityFlags } from './contract-shapes';
import type { PipelineSpec } from './pipeline';
import type { PackedStages } from './packed-stages';
import type {
  Artefact,
  AttemptRecord,
  CallBatch,
  Json,
  QualityFeedback,
  QualityVerdict,
  StageOutput,
  StoredCalls,
  TreadleEvent,
  UsageTotals,
} from './shapes';

export type { CallBatch, StoredCalls, UsageTotals };

/** `cancelled` only when the workflow was cancelled from outside (e.g. `temporal workflow cancel`). */
export type ItemStatus = 'running' | 'waiting_review' | 'waiting_approval' | 'completed' | 'failed' | 'cancelled';
/** `waiting_approval`: an approval stage whose requests wait for decisions (seed 003). */
export type StageStatus =
  'pending' | 'running' | 'waiting_review' | 'waiting_approval' | 'completed' | 'failed' | 'skipped';

/** Why a stage is waiting for a human. */
/** `unknown` only in listings whose item did not answer its state query. */
/** `loop_failed`: a failed loop stage waits to be resumed or abandoned (its own workflow lists it, engine 7). */
export type ReviewReason =
  'always' | 'escalated' | 'uncertain' | 'stage_requested' | 'budget_exhausted' | 'loop_failed' | 'unknown';

/** A review a human owes; listed by `treadle reviews` and the `TreadlePendingReviews` search attribute. */
export interface PendingReview {
  stage: string;
  reason: ReviewReason;
  /** One readable line: why the review was requested. */
  message: string;
  requestedAt: string;
  /** The attempt whose output is up for review (the latest one); a loop's failed iteration. */
  attempt: number;
  expiresAt?: string;
  /** Attempts made so far (engine 7). */
  attempts?: number;
  /** The reviewer group the stage's `reviewers:` names (engine 7). */
  reviewers?: string;
  /** A TDD node's human step: why it asks (engine 7). */
  human?: 'clarification' | 'stuck' | 'review_rejected';
  /** A TDD node's or loop's work item, when it has one (engine 7). */
  itemId?: string;
  /** When it becomes overdue: `review_sla` after the request (engine 8). */
  dueAt?: string;
  /** Handed to another reviewer group when it became overdue (`on_breach: { escalate_to }`, engine 8). */
  escalated?: { to: string; from?: string; at: string };
}

/** What a human decided, as recorded on the stage. */
export interface ReviewRecord {
  reviewer: string;
  kind: 'approve' | 'reject' | 'approve_with_edits' | 'request_changes' | 'expired_approve' | 'expired_reject';
  at: string;
  note?: string;
  reason?: string;
  attempt?: number;
}

/** A fan-out's progress on its stage, for the state query and `treadle status`. */
export interface FanOutProgress {
  total: number;
  running: number;
  completed: number;
  failed: number;
}

/**
 * Seed 003's statuses. `expired`: nobody decided within the TTL; treated as rejected. `cancelled`: its work item
 * was cancelled while it waited (engine 8); its action never runs.
 */
export type ApprovalStatus = 'pending' | 'approved' | 'rejected' | 'expired' | 'cancelled';

/** One approval request (seed 003 `ApprovalRequest`), as the `state` query and listings show it. */
export interface ApprovalRequest {
  /** Short, unique across runs, stable: `ap-` and ten base32 characters. */
  id: string;
  /** The work item (seed: `pipeline_run_id`) and the workflow run that created the request. */
  itemId: string;
  runId: string;
  step: string;
  actionType: string;
  /** The payload inline when small, else a blob reference (`{ref, bytes, summary}`). */
  payload: Json;
  /** One line saying what the action will do (the action type's own summary of the payload). */
  summary: string;
  /** What the reviewer should know: the stage's context and the element's own. */
  context: string | null;
  status: ApprovalStatus;
  createdAt: string;
  /** When it expires (or escalates); absent without a TTL. */
  expiresAt?: string;
  /** The group it is addressed to now (the escalation group once escalated). */
  reviewers?: string;
  escalated?: boolean;
  /** When it becomes overdue: the stage's `review_sla` after the request (issue 40). */
  dueAt?: string;
  decidedAt?: string;
  decidedBy?: string;
  reason?: string;
  /** `hash(runId + step + inputHash)`: the action executes at most once for it. */
  idempotencyKey: string;
  /** After approval: the action's result (small, or by reference) or why it failed. */
  result?: Json;
  executedAt?: string;
  error?: string;
}

/**
 * A `human` stage's request for its output (issue 40), one per stage at a time: the person's answer for
 * `attempt` is awaited; a gate that rejects it asks again for attempt n+1, with its feedback.
 */
export interface HumanRequest {
  stage: string;
  attempt: number;
  /** `cancelled`: its work item was cancelled while it waited (engine 8). */
  status: 'pending' | 'responded' | 'rejected' | 'cancelled';
  requestedAt: string;
  /** What the person is asked (`with.instructions`). */
  instructions?: string;
  /** The group it is addressed to (`with.reviewers`, else the stage's `reviewers:`). */
  reviewers?: string;
  /** The gate's feedback on the person's previous answer (attempt n-1), one line. */
  feedback?: string;
  /** When it becomes overdue: the stage's `review_sla` after the request. */
  dueAt?: string;
  /** Handed to another reviewer group when it became overdue (`on_breach: { escalate_to }`). */
  escalated?: { to: string; from?: string; at: string };
  respondedAt?: string;
  respondedBy?: string;
  /** `rejected`: why. */
  reason?: string;
}

/** One stage's state in the `state` query. */
export interface StageState {
  status: StageStatus;
  /** The stage's retry budget (attempts allowed, the first included). */
  maxAttempts?: number;
  attempts: AttemptRecord[];
  /** The stage's final artefact (the edited one after approve_with_edits). */
  artefact?: Artefact;
  summary?: string;
  review?: ReviewRecord;
  /** Why the stage failed or was skipped. */
  error?: string;
  skipReason?: 'outcome' | 'upstream_failed';
  /** A fan-out's progress over its elements (a `fan_out` stage, or a stage that returned `fan_out`). */
  fanOut?: FanOutProgress;
  /** Seed 002: the producers' artefacts after this stage's contracts validated them (in place of theirs). */
  validatedInputs?: Record<string, Artefact>;
  /** Seed 002's `quality_flags` of this stage's input validation. */
  qualityFlags?: QualityFlags;
  /**
   * The totals of this stage's contracts' model calls (validations and revisions), in its usage and the
   * token budget; their records are in the history and the call log (a call per item and round adds up).
   */
  contractUsage?: UsageTotals;
  startedAt?: string;
  completedAt?: string;
  /** A fork's stage taken from its original (this id) as it ended there, not run again (engine 9). */
  carriedFrom?: string;
}

/** The full state of a work item, served by the `state` query. */
export interface WorkItemState {
  id: string;
  pipeline: string;
  /** Seed 003's correlation id: on every activity, model call record and log line of the item. */
  correlationId?: string;
  status: ItemStatus;
  stages: Record<string, StageState>;
  pendingReviews: PendingReview[];
  /**
   * A page of the event stream: events after the query's `eventsAfter` (default 0), at most its
   * `eventLimit` (default {@link DEFAULT_EVENT_PAGE}); `eventCount` says how many there are in all.
   */
  events: TreadleEvent[];
  /** The number of events the item has emitted (the seq of the latest). */
  eventCount: number;
  startedAt: string;
  completedAt?: string;
  /** Why the item failed (a stage failure, or an invalid spec with every problem). */
  error?: string;
  problems?: string[];
  /** Who cancelled the item (`treadle cancel --by`, `TreadleClient.cancel`); set once its status is `cancelled`. */
  cancelledBy?: string;
  /** Why, as the person who cancelled it said (absent when they gave no reason). */
  cancelReason?: string;
  /** Model usage per stage and in total (derived from the attempts' call records when queried). */
  usage?: UsageSummary;
  /** The token budget in force (the item's own, else the pipeline's); null for none. */
  tokenBudget?: number | null;
  /** Approval requests of the item's approval stages, pending and decided, in the order they were made. */
  approvals?: ApprovalRequest[];
  /** The requests of the item's `human` stages, once it has had any (issue 40). */
  humanRequests?: HumanRequest[];
  /**
   * The output schema (JSON Schema 2020-12) of each stage that has one, from the prepared spec: what an edit of
   * the stage's artefact must match. Absent for items without any (and those started before schemas): any JSON.
   */
  outputSchemas?: Record<string, Json>;
  /** A fork's origin: the item it was made from and the stage it runs again from (engine 9). */
  forkOf?: { id: string; from: string };
}

/** Input of the `workItem` workflow. */
export interface WorkItemInput {
  /** The pipeline spec in any accepted form, or a blob reference to one; the workflow validates it. */
  pipeline: unknown;
  /** The pipeline's name, when `pipeline` is a reference (a fan-out's children). */
  pipelineName?: string;
  /** Seed 003's correlation id (a UUID); made by the workflow when the starter gave none. */
  correlationId?: string;
  /**
   * The work item's payload, given to every stage: inline JSON when small, else a blob reference that the
   * client stored (`TreadleClient.start` does this above the blob threshold) and activities resolve.
   */
  input?: Json;
  /** Defaults to the workflow id. */
  itemId?: string;
  /** Overrides the pipeline's `token_budget` for this item. */
  tokenBudget?: number | null;
  /**
   * Set by starters that expect a failed element to fail its workflow (an engine-6 fan-out): an element
   * without it returns its failed result, as the parents begun before engine 6 expect.
   */
  failAsWorkflow?: boolean;
  /** A fork's origin and the stages it carries from it (engine 9; `treadle fork`, `ItemsClient.fork`). */
  fork?: ForkOrigin;
}

/**
 * Where a fork comes from: the original item, the stage it runs again from, and the stages it takes from the
 * original as they ended there (completed, with their artefacts: small ones inline, others by reference), so
 * the fork neither calls a model nor runs an activity for them.
 */
export interface ForkOrigin {
  of: string;
  from: string;
  carried: Record<string, CarriedStage>;
}

/** A stage a fork takes from its original. */
export interface CarriedStage {
  artefact?: Artefact;
  summary?: string;
}

/** The failure type a failed work item ends with from engine 6 on; its first detail is its {@link WorkItemResult}. */
export const WORK_ITEM_FAILED = 'WorkItemFailed';

/** Result of the `workItem` workflow. */
export interface WorkItemResult {
  id: string;
  pipeline: string;
  status: 'completed' | 'failed';
  /** Final artefacts of completed stages (small ones inline, others as blob references). */
  artefacts: Record<string, Artefact>;
  failedStages: string[];
  error?: string;
  /** Why each failed stage failed. */
  stageErrors?: Record<string, string>;
  /** The totals of the item's model calls (absent when it made none, and from items before totals). */
  usage?: UsageTotals;
}

/** Fields shared by stage and gate activity inputs. */
export interface ActivityContextBase {
  itemId: string;
  /** The work item's correlation id (seed 003). */
  correlationId?: string;
  pipeline: string;
  stage: string;
  attempt: number;
  maxAttempts: number;
  /** The work item's payload: inline JSON or a blob reference (activities resolve it). */
  input: Json;
  /** The implementation's configuration from the spec (`with:`). */
  config?: Json;
  /** Final artefacts of the stage's dependencies, possibly blob references. */
  upstream: Record<string, Artefact>;
  /** This stage's earlier attempts: a stored log plus the latest records (see {@link PreviousAttempts}). */
  previousAttempts: PreviousAttempts;
}

/**
 * A stage's earlier attempts as activities receive them, in a size that does not grow with their number:
 * `log` is the blob reference of a JSON array of compact records (artefacts and long feedback by reference,
 * no call log) that the previous stage activity stored, and `recent` the records not in it yet (usually
 * none or one). Activities hand implementations the whole list, resolved.
 */
export interface PreviousAttempts {
  log: string | null;
  recent: AttemptRecord[];
}

/** Input of a stage activity (seed 000 `StageContext`). */
export interface StageActivityInput extends ActivityContextBase {
  /** Feedback from the previous attempt's gate; null on a first attempt. */
  feedback: QualityFeedback | null;
  /** The stage's agent provider from the spec, if it names one. */
  agent?: string;
}

/** Input of a gate activity (seed 000 `QualityContext` plus the output under judgement). */
export interface GateActivityInput extends ActivityContextBase {
  output: StageOutput;
  agent?: string;
}

/** Model calls an attempt keeps: their totals, the records that travelled inline, and the stored ones. */
export type KeptCalls = Pick<AttemptRecord, 'usage' | 'calls' | 'storedCalls'>;

/** A stage's output plus the model calls the activity made (also across its mechanical retries). */
export type StageActivityResult = StageOutput & {
  calls?: CallBatch;
  /** The log of this stage's attempts before this one, as stored by the activity (null for a first attempt). */
  previousLog?: string | null;
  /**
   * The output schema the implementation registered, from an implementations queue's worker on a stage's first
   * attempt: the worker that prepared the item did not know it, and a reviewer's edit must match it.
   */
  outputSchema?: Json;
};
/** A gate's verdict plus the model calls it made. */
export type GateActivityResult = QualityVerdict & { calls?: CallBatch };

/** Input and result of the local activity that validates a spec against the worker's registry. */
export interface PreparePipelineInput {
  pipeline: unknown;
}
/** Engine version 2: the event-driven scheduler (BENCHMARKS.md), and no first upsert when the start set the attributes. */
export const EVENT_DRIVEN_SCHEDULER_ENGINE = 2;
/**
 * Engine version 3: the chained stage runner. It ran a stage's steps as continuations (a `then` on the activity's
 * promise, a gate's, a timer's, a review's) instead of engines 1–2's async function, whose attempt helper put other
 * ticks between the steps (items of those versions keep it: workflows/legacy/engine-1-2.ts). The live runner
 * (workflows/stage-runner.ts) is plain async/await again, with an `await` where engine 3 had a `then`, so it
 * runs engine 3's steps in the same order and replays its histories (docs/versioning.md).
 */
export const CHAINED_STAGE_RUNNER_ENGINE = 3;
/**
 * Engine version 4: model calls travel as {@link CallBatch}es; the calls on the last heartbeat of an
 * activity that timed out (its worker died) are kept too, and the token budget applies to TDD trees and
 * loops (whose calls now count in the item's usage). Those two are new decisions for the workflow (older
 * histories' arrays of records are read as batches whatever the version), so they wait for this version.
 */
export const CALL_BATCH_ENGINE = 4;
/**
 * Engine version 5: a `fan_out` stage stores its list once and runs its elements under a `fanOut` workflow
 * that continues as new, so no history grows with the width (src/kinds/fan-out/workflow.ts); up to 1,000,000
 * elements instead of 2,000. Older items keep starting every element from the work item itself.
 */
export const FAN_OUT_WORKFLOW_ENGINE = 5;
/**
 * Engine version 6: a failed work item ends as a *failed* workflow (a non-retryable `WorkItemFailed` whose
 * details are its result), so the Web UI and `ExecutionStatus="Failed"` show it; its fan-out elements and
 * TDD trees are asked to fail the same way. Older items keep returning their failed result.
 */
export const FAILED_WORKFLOW_ENGINE = 6;
/**
 * Engine version 7: the item publishes every pending decision for the review inbox: `TreadleDecisionAt`
 * (workflow time of the last change of its pending reviews and approvals) in the upsert that carries its
 * status, and its TDD trees and loop stages are asked to publish theirs (`publishesDecisions`). Older items
 * keep their upserts as they were (an attribute added to an upsert is a changed command).
 */
export const DECISIONS_ENGINE = 7;
/**
 * Engine version 8: reviewer attention (issue 40). A cancelled item records who cancelled it and why, and its
 * pending approvals end `cancelled`; items announce their decisions to the notifier. Each is a command older
 * items never issued, so items started on version 7 keep their paths (`EngineRules.reviewerAttention`).
 */
export const REVIEWER_ATTENTION_ENGINE = 8;
/**
 * Engine version 9: lineage (issue 42). A fork (`treadle fork`) starts with the stages it carries from its
 * original marked completed, without running them; an item whose starter did not set `TreadleCorrelationId` (a
 * Temporal Schedule's firing) publishes the one it made in its first upsert. Both are commands older items never
 * issued (`EngineRules.lineage`).
 */
export const LINEAGE_ENGINE = 9;
/**
 * The work item engine's version, recorded in the prepare step's result (and so in every item's history) by
 * the worker that starts the item. Workflow code branches on it where a change would not replay items begun
 * before it, as `patched()` would, without the marker event and the `TemporalChangeVersion` visibility write
 * that every `patched()` adds to every item (docs/versioning.md). Histories without it are version 1.
 * Each version has a constant named for what it introduced (above); this is the newest.
 */
export const ENGINE_VERSION = LINEAGE_ENGINE;

/** Whether a worker can start items on `version` (pinned while a deploy that raises it rolls out). */
export function isEngineVersion(version: number): boolean {
  return Number.isInteger(version) && version >= 1 && version <= ENGINE_VERSION;
}

export type PreparePipelineResult = (
  | {
      ok: true;
      /** The canonical spec; its `stages` are empty when `packedStages` carries them. */
      spec: PipelineSpec;
      /** The stages, first whole and the others as differences (src/model/packed-stages.ts); absent in histories recorded before it. */
      packedStages?: PackedStages;
      /** Implementations registered as calling models: the token budget applies to stages using them. */
      agentBacked: string[];
    }
  | { ok: false; problems: string[] }
) & {
  /** {@link ENGINE_VERSION} of the worker that prepared the item; absent (version 1) in older histories. */
  engine?: number;
  /** The preparing worker has a notifications file: engine 8's item announces its decisions (absent: no file). */
  notifies?: boolean;
};

/** Usage of a work item. */
export interface UsageSummary {
  total: UsageTotals;
  stages: Record<string, UsageTotals>;
}

/** Events one `state` query returns unless it asks for another page size. */
export const DEFAULT_EVENT_PAGE = 500;

/** Arguments of the `state` query: which page of events to return. */
export interface StateQueryArgs {
  /** Return only events whose seq is greater than this (default 0). */
  eventsAfter?: number;
  /** At most this many events (default {@link DEFAULT_EVENT_PAGE}). */
  eventLimit?: number;
}

/**
 * What the workflow keeps in its memo for listings (one visibility call lists every pending review with
 * its details, no query per item): the pending reviews, each message cut short.
 */
export interface ReviewsMemo {
  pipeline: string;
  reviews: PendingReview[];
  /** Reviews left out to keep the memo small (the `state` query has them all). */
  omitted: number;
}

/** Input and result of the local activity that stores a large inline artefact (a reviewer's edit). */
export interface StoreArtefactInput {
  artefact: Json;
  summary: string;
}
export interface StoreArtefactResult {
  /** A blob reference, or the artefact itself when it is under the threshold. */
  artefact: Json;
}
