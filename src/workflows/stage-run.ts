/**
 * The shapes the work item's stage runner shares with the code it calls: one stage's run ({@link StageRun}),
 * and the rules an engine version sets ({@link EngineRules}): the live engine's in stage-runner.ts, older
 * versions' in legacy/. Types only, so the runner, its attempts and the legacy files import it without cycles.
 */
import type { AcceptedReview } from '../engine/review';
import type { PipelineSpec, StageSpec } from '../model/pipeline';
import type { Artefact, AttemptRecord, EventType, Json, TreadleEvent } from '../model/shapes';
import type { StageActivityResult, WorkItemState } from '../model/state';
import type { StageKindRun } from '../workflow-kit/common';
import type { KindEngineRules, WorkflowStageKind } from '../workflow-kit/stage-kind';

/** One stage of a work item as the stage runner runs it. */
export interface StageRun {
  stage: StageSpec;
  spec: PipelineSpec;
  state: WorkItemState;
  input: Json;
  itemId: string;
  emit: (type: EventType, message: string, fields?: Partial<TreadleEvent>) => void;
  /** Wakes the scheduler, which publishes status, reviews and details once per activation. */
  touch: () => void;
  /** The stage has ended (settled, handed to a human who settled it, or crashed): the scheduler looks again. */
  ended: () => void;
  /** Records an exception that ended the stage (a cancellation, or an engine bug that fails the stage). */
  crashed: (stage: StageSpec, error: unknown) => void;
  /** The rules of the engine version the item started on. */
  engine: EngineRules;
  resolutions: Map<string, AcceptedReview>;
  /** The stage's implementation or one of its gates calls models: the token budget applies. */
  usesAgent: boolean;
  /** Announce its decisions to the notifier (engine 8, and the preparing worker has a notifications file). */
  notifies?: boolean;
}

/** What the scheduler of an engine version needs of the work item (engine 1's loop; the live one is the item's own). */
export interface Scheduling {
  /** Starts what can start and reports whether it skipped a stage (its dependents may be skippable in turn). */
  startReady(): boolean;
  /** Upserts what changed and refreshes the Web UI details. */
  publish(): void;
  /** Whether every stage has settled. */
  allSettled(): boolean;
  /** Something touched the state since the flag was last cleared. */
  changed: boolean;
  /** A cancellation that ended a stage, rethrown by the scheduler. */
  cancellation: unknown;
  /** The live scheduler: a pass whenever something touched the state, until the last stage settles. */
  runEventDriven(): Promise<void>;
}

/**
 * What differs between engine versions, chosen once per item from the version its prepare step recorded
 * (README "Versioning", docs/versioning.md). The live engine's rules are `LIVE_ENGINE` (stage-runner.ts);
 * older versions override some of them (legacy/index.ts).
 */
export interface EngineRules extends KindEngineRules {
  /** The engine version these rules are for. */
  version: number;
  /** Runs stages until every one has settled (rejects with a cancellation). */
  schedule(item: Scheduling): Promise<void>;
  /** Whether the search attributes the starter set count as published, so the first upsert is left out. */
  trustsStartAttributes: boolean;
  /** Runs one stage to its end: never rejects, reports exceptions through `run.crashed`, calls `run.ended` once. */
  runStage(run: StageRun): void;
  /**
   * The stage kind a stage's `run:` names, or undefined for a plain stage (one activity per attempt): the
   * table's entry (src/kinds/workflow-table.ts), unless this engine version overrides it.
   */
  kind(run: string): WorkflowStageKind | undefined;
  /** How a `fan_out` stage runs its elements. */
  fanOut(run: StageKindRun, outcome?: Artefact): Promise<StageActivityResult>;
  /**
   * Runs the fan-out a stage's own `fan_out` outcome asks for, keeps the calls that count on `record`, and
   * hands `then` the fan-out's result with the calls still to be kept (one `then`, as every promise costs).
   */
  fanOutOutcome<T>(
    run: StageRun,
    kindRun: StageKindRun,
    record: AttemptRecord,
    executed: StageActivityResult,
    then: (fanned: StageActivityResult) => T | Promise<T>,
  ): Promise<T>;
  /** The model calls a failure reports. */
  callsOfFailure(error: unknown): unknown;
  /** Whether the model calls a stage's attempt result reports count (stage kinds report totals). */
  reportsCalls(stage: StageSpec): boolean;
  /** Whether the token budget applies to a stage: it, a gate, or the stage kind calls models. */
  usesAgent(stage: StageSpec, agentBacked: ReadonlySet<string>): boolean;
  /** Whether a failed item fails its workflow and asks its fan-outs' elements and TDD trees to (engine 6). */
  failsWorkflow: boolean;
  /**
   * Whether the item publishes its pending decisions for the review inbox (engine 7): `TreadleDecisionAt` in
   * its status upsert, and the flag that asks its loop stages to list a failure like a review.
   */
  publishesDecisions: boolean;
  /**
   * Whether the item runs engine 8's reviewer-attention commands (who cancelled it and why, its approvals
   * cancelled, decisions announced to the notifier); items of older versions keep their commands as they were.
   */
  reviewerAttention: boolean;
  /**
   * Whether the item runs engine 9's lineage commands: a fork's carried stages completed without running, and
   * the correlation id published when the starter did not set it.
   */
  lineage: boolean;
}

/** Where a stage's attempt log stands: its blob reference and how many attempts it holds. */
export interface AttemptLog {
  ref: string | null;
  count: number;
}
