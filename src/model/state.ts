/**
 * Workflow and activity inputs and outputs, and the work item state served by the `state` query.
 * Everything is plain JSON: no Map, no Date (STYLE.md).
 */
import type { PipelineSpec } from './pipeline';
import type { Artefact, AttemptRecord, CallRecord, Json, QualityFeedback, QualityVerdict, StageOutput, TreadleEvent } from './shapes';

/** `cancelled` only when the workflow was cancelled from outside (e.g. `temporal workflow cancel`). */
export type ItemStatus = 'running' | 'waiting_review' | 'completed' | 'failed' | 'cancelled';
export type StageStatus = 'pending' | 'running' | 'waiting_review' | 'completed' | 'failed' | 'skipped';

/** Why a stage is waiting for a human. */
/** `unknown` only in listings whose item did not answer its state query. */
export type ReviewReason = 'always' | 'escalated' | 'uncertain' | 'stage_requested' | 'budget_exhausted' | 'unknown';

/** A review a human owes; listed by `treadle reviews` and the `TreadlePendingReviews` search attribute. */
export interface PendingReview {
  stage: string;
  reason: ReviewReason;
  /** One readable line: why the review was requested. */
  message: string;
  requestedAt: string;
  /** The attempt whose output is up for review (the latest one). */
  attempt: number;
  expiresAt?: string;
}

/** What a human decided, as recorded on the stage. */
export interface ReviewRecord {
  reviewer: string;
  kind: 'approve' | 'reject' | 'approve_with_edits' | 'expired_approve' | 'expired_reject';
  at: string;
  note?: string;
  reason?: string;
  attempt?: number;
}

/** One stage's state in the `state` query. */
export interface StageState {
  status: StageStatus;
  attempts: AttemptRecord[];
  /** The stage's final artefact (the edited one after approve_with_edits). */
  artefact?: Artefact;
  summary?: string;
  review?: ReviewRecord;
  /** Why the stage failed or was skipped. */
  error?: string;
  skipReason?: 'outcome' | 'upstream_failed';
  startedAt?: string;
  completedAt?: string;
}

/** The full state of a work item, served by the `state` query. */
export interface WorkItemState {
  id: string;
  pipeline: string;
  status: ItemStatus;
  stages: Record<string, StageState>;
  pendingReviews: PendingReview[];
  events: TreadleEvent[];
  startedAt: string;
  completedAt?: string;
  /** Why the item failed (a stage failure, or an invalid spec with every problem). */
  error?: string;
  problems?: string[];
  spec?: PipelineSpec;
  /** Model usage per stage and in total (derived from the attempts' call records when queried). */
  usage?: UsageSummary;
  /** The token budget in force (the item's own, else the pipeline's); null for none. */
  tokenBudget?: number | null;
}

/** Input of the `workItem` workflow. */
export interface WorkItemInput {
  /** The pipeline spec in any accepted form; the workflow validates it. */
  pipeline: unknown;
  /** The work item's payload, given to every stage. */
  input?: Json;
  /** Defaults to the workflow id. */
  itemId?: string;
  /** Overrides the pipeline's `token_budget` for this item. */
  tokenBudget?: number | null;
}

/** Result of the `workItem` workflow. */
export interface WorkItemResult {
  id: string;
  pipeline: string;
  status: 'completed' | 'failed';
  /** Final artefacts of completed stages. */
  artefacts: Record<string, Artefact>;
  failedStages: string[];
  error?: string;
}

/** Fields shared by stage and gate activity inputs. */
export interface ActivityContextBase {
  itemId: string;
  pipeline: string;
  stage: string;
  attempt: number;
  maxAttempts: number;
  /** The work item's payload. */
  input: Json;
  /** The implementation's configuration from the spec (`with:`). */
  config?: Json;
  /** Final artefacts of the stage's dependencies, possibly blob references. */
  upstream: Record<string, Artefact>;
  previousAttempts: AttemptRecord[];
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

/** A stage's output plus the model calls the activity made (also across its mechanical retries). */
export type StageActivityResult = StageOutput & { calls?: CallRecord[] };
/** A gate's verdict plus the model calls it made. */
export type GateActivityResult = QualityVerdict & { calls?: CallRecord[] };

/** Input and result of the local activity that validates a spec against the worker's registry. */
export interface PreparePipelineInput {
  pipeline: unknown;
}
export type PreparePipelineResult =
  | {
      ok: true;
      spec: PipelineSpec;
      /** Implementations registered as calling models: the token budget applies to stages using them. */
      agentBacked: string[];
    }
  | { ok: false; problems: string[] };

/** Totals over a set of calls. */
export interface UsageTotals {
  calls: number;
  errors: number;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  latencyMs: number;
  /** Estimated from list prices per model; null when a model's price is unknown. */
  estimatedCostUsd: number | null;
}

/** Usage of a work item. */
export interface UsageSummary {
  total: UsageTotals;
  stages: Record<string, UsageTotals>;
}
