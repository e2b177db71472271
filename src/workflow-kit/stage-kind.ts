/**
 * The workflow side of the `StageKind` contract (DESIGN.md "Stage kinds", docs/stage-kinds.md): what the
 * work item's stage runner needs of a stage kind whose attempts run as workflow code (child workflows,
 * requests in the item's state) rather than as one activity. The worker side (config check, activities) is
 * `WorkerStageKind` in src/kinds/index.ts; the two are apart because the workflow bundle must not load
 * worker code (Node built-ins, SDK clients).
 *
 * Types only, so every kind, the table and the stage runner import it without cycles.
 */
import type { SearchAttributeUpdatePair } from '@temporalio/common';
import type { setHandler } from '@temporalio/workflow';
import type { Artefact, EventType, Json, TreadleEvent } from '../model/shapes';
import type { StageActivityResult, WorkItemState } from '../model/state';
import type { StageKindRun } from './common';

/** The rules of the item's engine version that a kind's attempt may depend on (a subset of `EngineRules`). */
export interface KindEngineRules {
  /** Whether a failed item fails its workflow and asks its children (fan-out elements, TDD trees) to (engine 6). */
  failsWorkflow: boolean;
  /** Whether the item publishes its pending decisions for the review inbox (engine 7). */
  publishesDecisions: boolean;
  /** How a `fan_out` stage runs its elements: engines 1 to 4 started them from the work item itself. */
  fanOut(run: StageKindRun, outcome?: Artefact): Promise<StageActivityResult>;
}

/** What one attempt of a stage kind is given by the stage runner. */
export interface KindAttempt {
  /** The stage, its item, input, upstream artefacts, the attempt number and its feedback. */
  run: StageKindRun;
  /** The stage's index in the pipeline: child workflow ids name it. */
  stageIndex: number;
  /** The rules of the engine version the item started on. */
  engine: KindEngineRules;
}

/**
 * Where a kind's pending decisions (DESIGN.md: every human decision is one pending decision) are published,
 * so the review inbox and `treadle decisions` find them: in the work item's own state and memo (`item`), in
 * a child workflow of its own that names the item (`child`), or nowhere because it asks no human (`none`).
 */
export type KindDecisions = 'item' | 'child' | 'none';

/**
 * What a kind's {@link WorkflowStageKind.installHandlers} is given of the work item: its state, id and event
 * stream, and a `setHandler` that accepts only the kind's declared `messages`.
 */
export interface KindItemContext {
  /** The item's state: the `state` query's answer, which the kind's handlers may change. */
  readonly state: WorkItemState;
  /** The item's id, for the kind's error messages and answers. */
  readonly itemId: string;
  /** Appends an event to the item's stream. */
  emit(type: EventType, message: string, fields?: Partial<TreadleEvent>): void;
  /** Tells the item its state changed: its scheduler looks at the stages again and publishes. */
  touch(): void;
  /** Temporal's `setHandler`, for a message the kind declares: any other name throws. */
  readonly setHandler: typeof setHandler;
}

/**
 * What the work item publishes for a kind whose pending decisions it holds (`decisions: 'item'`), once the
 * item has had any of them: its part of the pending set and of the search attributes, its memo entries and
 * its block of the Web UI's details.
 */
export interface KindPublication {
  /** Its pending decisions' ids, oldest first: part of the set whose change moves `TreadleDecisionAt` (engine 7). */
  readonly pending: readonly string[];
  /**
   * Its stages that wait on a person, named in `TreadlePendingReviews` with the item's own reviews so the one
   * listing finds the item (the human kind's); kinds that leave it out change nothing of what items publish.
   */
  readonly stages?: readonly string[];
  /**
   * Its search attribute: upserted with the item's status and waiting stages whenever they or `watched`
   * change (an upsert is a command, so `watched` decides when, and must stay what it was for recorded
   * histories to replay); `value` is read only then.
   */
  readonly attribute?: { readonly watched: readonly string[]; value(): SearchAttributeUpdatePair };
  /** Its memo entries by key, each upserted when it changed (null removes one). */
  readonly memo: Readonly<Record<string, Json | object | null>>;
  /** Its block of the Web UI's current details (Markdown lines under a heading), while any decision waits. */
  readonly details?: { readonly heading: string; readonly lines: readonly string[] };
}

/**
 * A stage kind as workflow code sees it. Register one with `registerWorkflowKind` (src/kinds/workflow-table.ts)
 * in a module the workflow bundle imports; its worker side goes to `registerWorkerKind` (src/kinds/index.ts).
 */
export interface WorkflowStageKind {
  /** The `run:` (or `type:`) that names the kind in a pipeline spec. */
  readonly name: string;
  /**
   * Runs one attempt; its result is judged like an activity's (gate, policy, review). It must be
   * deterministic workflow code and schedule the same commands in the same order on replay.
   */
  runAttempt(attempt: KindAttempt): Promise<StageActivityResult>;
  /** Whether its attempts call models, so the item's token budget applies to the stage. */
  readonly callsModels: boolean;
  /**
   * The wire names of the messages (signals, updates, queries) its workflows or the work item handle for it;
   * wire names are unique per workflow type, which a unit test checks across the table.
   */
  readonly messages: readonly string[];
  /** Where its pending decisions are published. */
  readonly decisions: KindDecisions;
  /**
   * Sets the handlers of the messages the work item handles for the kind (its `decisions: 'item'` answers,
   * its child workflows' reports); every name must be one of `messages`. Called once per item, before the
   * item's first await, in table order: a handler must not schedule commands as it is set.
   */
  installHandlers?(item: KindItemContext): void;
  /**
   * What the work item publishes for the kind's pending decisions it holds, or undefined while it has had
   * none (then it publishes nothing for the kind). Called on every publish, in table order; must be pure.
   */
  publish?(state: WorkItemState): KindPublication | undefined;
}
