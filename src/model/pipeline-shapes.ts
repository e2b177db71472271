/**
 * The pipeline spec's zod-free half: the canonical spec's types, the settings' allowed values and the
 * defaults, for code that reads a validated spec (engine, workflows) without loading the schema.
 */
import type { Json } from './shapes';
import type { GateRef } from './gate-ref';
import type { SpecProblem } from './spec-problems';
import type { ContractSpec } from './contract-shapes';

export const REVIEW_POLICIES = [
  'never',
  'always',
  'on_escalation',
  'on_uncertain',
  'on_escalation_or_uncertain',
] as const;
export type ReviewPolicy = (typeof REVIEW_POLICIES)[number];
export const EXHAUSTED_ACTIONS = ['fail', 'escalate'] as const;
export type ExhaustedAction = (typeof EXHAUSTED_ACTIONS)[number];
export const REVIEW_EXPIRED_ACTIONS = ['approve', 'reject'] as const;

/** Mechanical-failure defaults: exceptions, crashes and timeouts retried by Temporal, not quality attempts. */
export const DEFAULT_ACTIVITY_RETRY = {
  maximumAttempts: 5,
  initialIntervalMs: 1_000,
  backoffCoefficient: 2,
  maximumIntervalMs: 60_000,
  nonRetryableErrorTypes: [] as string[],
};
/** Upper bound on one activity execution when the stage has no attempt timeout. */
export const DEFAULT_START_TO_CLOSE_MS = 10 * 60_000;
/**
 * With an attempt timeout, the workflow's timer ends the attempt and waits for the activity to stop; the
 * activity's own start-to-close timeout comes this much later, so it never races the timer (a server-side
 * timeout would retry the activity and lose the calls it made).
 */
export const ATTEMPT_CANCEL_MARGIN_MS = 30_000;
/** Activities heartbeat every few seconds, so a dead worker is noticed within this long. */
export const DEFAULT_HEARTBEAT_TIMEOUT_MS = 30_000;

/** Seed 003's step types; `tdd` and the kinds still to come are named by `run:`. */
export const STEP_TYPES = ['deterministic', 'llm', 'approval', 'fan_out'] as const;
export type StepType = (typeof STEP_TYPES)[number];
/** The implementation a step type runs when the stage names none. */
export const TYPE_DEFAULT_RUN: Partial<Record<StepType, string>> = {
  llm: 'llm',
  approval: 'approval',
  fan_out: 'fan_out',
};
/** Implementations that are a step type of their own: `type: deterministic` cannot run them. */
export const KIND_RUNS: Record<string, StepType> = { llm: 'llm', approval: 'approval', fan_out: 'fan_out' };

/** Retry budget (seed 000 `RetryBudget`); `maxAttempts` includes the first attempt. */
export interface RetryBudget {
  maxAttempts: number;
  delayMs: number;
  attemptTimeoutMs: number | null;
  onExhausted: ExhaustedAction;
}

/** Temporal activity options for the stage's work and gate activities (mechanical failures only). */
export interface ActivitySettings {
  startToCloseTimeoutMs: number;
  heartbeatTimeoutMs: number;
  retry: typeof DEFAULT_ACTIVITY_RETRY;
}

/**
 * A deadline for a person's decision (issue 40): after `afterMs` it is overdue, announced as `overdue`, and, with
 * `escalateTo`, handed to that reviewer group.
 */
export interface ReviewSla {
  afterMs: number;
  escalateTo?: string;
}

/** One stage of the canonical spec. */
export interface StageSpec {
  name: string;
  description?: string;
  /** Seed 003's step type: given, or derived from `run` (llm, approval, fan_out; everything else deterministic). */
  type: StepType;
  run: string;
  with?: Json;
  agent?: string;
  gate: GateRef | null;
  dependsOn: string[];
  retryBudget: RetryBudget;
  reviewPolicy: ReviewPolicy;
  reviewTtlMs: number | null;
  onReviewExpired: (typeof REVIEW_EXPIRED_ACTIONS)[number];
  /** `reviewers:` as written: the reviewer group the stage's reviews are for (listings filter on it). */
  reviewers?: string;
  /** `review_sla:` and `on_breach:`, the stage's or the pipeline's: when its decisions become overdue (engine 8). */
  reviewSla?: ReviewSla;
  /**
   * `output_schema:` as written (a JSON Schema, draft 2020-12), else the one the implementation registered:
   * what a reviewer's edit of the stage's artefact must match (the stage's own output is not checked against it).
   */
  outputSchema?: Json;
  activity: ActivitySettings;
  /** `task_queue:` as written: where this stage's implementations that Treadle does not ship run. */
  taskQueue?: string;
  /**
   * Set by the worker's prepare step: the activity types of this stage (its implementation, `gate:<name>`)
   * that run on a queue of their own, and that queue. Absent: everything runs on the item's queue.
   */
  queues?: Record<string, string>;
}

/** The canonical, validated pipeline spec. */
export interface PipelineSpec {
  name: string;
  description?: string;
  /** Tokens one work item may spend on model calls; null for no limit. */
  tokenBudget: number | null;
  /** Stages of one item running at once. */
  maxParallel: number;
  stages: StageSpec[];
  /** Seed 002's quality contracts (absent when there are none). */
  contracts?: ContractSpec[];
  /** `task_queue:` as written: the default queue of the stages' implementations that Treadle does not ship. */
  taskQueue?: string;
  /** `priority:` the items' default priority in the task queues, 1 (first) to 5 (src/model/priority.ts). */
  priority?: number;
  /** `fairness_key:` / `fairness_weight:` the items' default fairness key and its weight. */
  fairnessKey?: string;
  fairnessWeight?: number;
}

/** Implementation names a worker has registered, for checking a spec against. */
export interface KnownImplementations {
  stages: readonly string[];
  gates: readonly string[];
  /** The implementation's own check of its `with:` config (`path: message` per problem), when it has one. */
  checkConfig?: (kind: 'stage' | 'gate', implementation: string, config: Json | undefined) => string[];
  /** Output schemas stage implementations registered, by name: a stage without `output_schema:` gets its own. */
  outputSchemas?: Readonly<Record<string, Json>>;
  /**
   * Why an `output_schema:` cannot be used (it does not compile; src/client/output-schema.ts), or undefined.
   * Registries and the CLI's built-ins give it; without it schemas are checked by the worker's prepare step.
   */
  outputSchemaProblem?: (schema: Record<string, unknown>) => string | undefined;
  /** Contract validators and revisers (seed 002); the built-in `llm` ones when absent. */
  validators?: readonly string[];
  revisers?: readonly string[];
  /** Action types approval stages may name (`with: { action }`); not checked when absent. */
  actions?: readonly string[];
}

/**
 * A stage kind's own checks of a spec, which run with or without a worker's names (a worker's config checks are
 * `KnownImplementations.checkConfig`). The model is the bottom layer and imports no kind: the spec validation
 * over every kind (`validatePipeline`, src/kinds/pipeline.ts) passes them to `validatePipelineWith`.
 */
export interface KindSpecChecks {
  /** The `run:` of the kind's stages. */
  readonly name: string;
  /**
   * The problems with a stage's `with:`, each a line `path: message`. `validate` checks a pipeline of the kind's
   * own (a fan_out's element stage) as the whole spec is checked, against the same names.
   */
  configProblems(config: Json | undefined, validate: (pipeline: unknown) => ValidationResult): KindSpecProblem[];
  /**
   * Problems with the stage itself beyond its `with:` (a `human` stage needs an `output_schema`), each a line
   * `field: message` about the stage as written (snake_case or canonical keys).
   */
  stageProblems?(stage: Readonly<Record<string, unknown>>): string[];
  /** History events one attempt writes in its work item besides a plain stage's (a fan-out's start and progress). */
  readonly attemptEvents: number;
  /**
   * The action type a stage of the kind asks a worker to run, from its `with:` (an approval's `with.action`):
   * a name the worker's action catalog must have, unless the stage's queue takes it elsewhere.
   */
  actionOf?(config: Json | undefined): string | undefined;
  /** The activities that run the kind's actions: routed to the stage's queue when this worker lacks the action. */
  readonly actionActivities?: readonly string[];
}

/** One problem a kind finds in a stage's `with:`: a bad config, or (`registry`) a name the worker must confirm. */
export interface KindSpecProblem {
  layer: 'config' | 'registry';
  /** `path: message`, the path under the stage's `with:`. */
  line: string;
}

/**
 * The outcome of {@link validatePipeline}. When invalid, `problems` is every problem as printed, and
 * `found` the same problems with the check that found each and where it is in the spec as written.
 */
export type ValidationResult =
  { ok: true; spec: PipelineSpec } | { ok: false; problems: string[]; found: SpecProblem[] };
