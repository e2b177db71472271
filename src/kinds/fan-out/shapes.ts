/**
 * The `fan_out` stage kind (seed 000 `FanOut`, seed 003 `fan_out` steps): one stage run over a list, each
 * element as a child work item of a one-stage pipeline, with bounded concurrency; the results come back in
 * input order, and an element that fails is reported without losing the others. Zod-free shapes shared by
 * the workflow and the activities; the config is checked in `spec.ts`.
 */
import type { Artefact, Json, UsageTotals } from '../../model/shapes';
import type { FanOutProgress } from '../../model/state';

// The progress is part of the work item's state (its `state` query), so its shape lives with it.
export type { FanOutProgress } from '../../model/state';

/** The stage implementation name of the kind (`type: fan_out` or `run: fan_out`). */
export const FAN_OUT_STAGE = 'fan_out';
/**
 * Elements one fan-out takes on engines before {@link FAN_OUT_WORKFLOW_ENGINE} (the work item starts every
 * element itself, three events of its own history each).
 */
export const MAX_INLINE_FAN_OUT_ITEMS = 2_000;
/**
 * Elements one fan-out takes on the fan-out workflow. Its runs' histories stay flat whatever the width; what
 * grows is one results page reference per run carried through continue-as-new (~75 B per ~700 elements), the
 * list the prepare step pages in memory, and the results artefact, one JSON blob that downstream stages read
 * whole (about 150 B per element: ~150 MB here).
 */
export const MAX_FAN_OUT_ITEMS = 1_000_000;
export const DEFAULT_FAN_OUT_CONCURRENCY = 10;
/** Children running at once (Temporal allows 2,000 pending children per workflow). */
export const MAX_FAN_OUT_CONCURRENCY = 200;
/** Elements whose JSON is larger travel to their child by reference. */
export const FAN_OUT_INLINE_ELEMENT_BYTES = 256;

/** Turns a fan-out's config (or a stage's `fan_out` outcome) into the children's inputs (engines 1 to 4). */
export const FAN_OUT_PREPARE_ACTIVITY = 'treadle.fanOutPrepare';
/** Checks a fan-out like {@link FAN_OUT_PREPARE_ACTIVITY} and stores its elements in pages (engine 5 on). */
export const FAN_OUT_STORE_ACTIVITY = 'treadle.fanOutStore';
/** Reads one element out of its stored page: a local activity of the element's own work item. */
export const FAN_OUT_ELEMENT_ACTIVITY = 'treadle.fanOutElement';
/** Stores one run's results as a page. */
export const FAN_OUT_RESULTS_ACTIVITY = 'treadle.fanOutStoreResults';
/** Joins the results pages into the fan-out's artefact. */
export const FAN_OUT_COLLECT_ACTIVITY = 'treadle.fanOutCollect';
/** The workflow type that runs a fan-out's elements (engine 5 on). */
export const FAN_OUT_WORKFLOW = 'fanOut';
/** Elements per stored page: a child reads one page (cached by the worker), never the whole list. */
export const FAN_OUT_PAGE_ELEMENTS = 1_000;
/** A fan-out run stops starting elements and continues as new once its history passes this. */
export const FAN_OUT_RUN_HISTORY_BYTES = 1_000_000;
/** Progress signals a fan-out workflow sends its work item at most (one per fiftieth of the elements). */
export const FAN_OUT_PROGRESS_REPORTS = 50;
/** Elements between two progress signals at least. */
export const FAN_OUT_ELEMENTS_PER_REPORT = 100;
/**
 * History events a fan_out attempt writes in its work item, whatever the width: the store activity and the
 * fan-out workflow (three each), and per progress signal the signal and a workflow task.
 */
export const FAN_OUT_ATTEMPT_EVENTS = 6 + 4 * (FAN_OUT_PROGRESS_REPORTS + 1);
/** Failures a fan-out keeps word for word (for events and the stage's error); the results hold them all. */
export const FAN_OUT_FAILURES_KEPT = 20;

export interface FanOutPrepareInput {
  itemId: string;
  pipeline: string;
  stage: string;
  /** The stage's `with:` (a `fan_out` stage), or null when `outcome` carries the fan-out. */
  config: Json;
  upstream: Record<string, Artefact>;
  input: Json;
  /** The artefact of a stage that returned the `fan_out` outcome: `{items, stage, max_concurrent?, on_item_failure?}`. */
  outcome?: Artefact;
}

/** A stored fan-out as the `fanOut` workflow runs it: the elements' pipeline, where they are, how many at once. */
export interface FanOutPlan {
  pipeline: Artefact;
  pipelineName: string;
  childStage: string;
  total: number;
  /** The elements, {@link FAN_OUT_PAGE_ELEMENTS} to a page (`sha256:` refs), in input order. */
  pages: string[];
  maxConcurrent: number;
  /** `elements_per_run`: a run continues as new after starting this many elements (else by history size). */
  elementsPerRun?: number;
}

/** What {@link FAN_OUT_STORE_ACTIVITY} makes of a fan-out: everything but the elements, which are stored. */
export type FanOutStoreResult =
  ({ ok: true; onItemFailure: 'continue' | 'fail' } & FanOutPlan) | { ok: false; problems: string[] };

/** Where an element is stored: its page and its place in it. The same few bytes whatever the element weighs. */
export interface FanOutElementRef {
  page: string;
  offset: number;
}
/** The input of an element's work item (a `workItem` input whose payload is `element`, not `input`). */
export interface FanOutElementInput {
  element: FanOutElementRef;
}

/** Input of the `fanOut` workflow; the counters carry one run's progress to the next through continue-as-new. */
export interface FanOutInput extends FanOutPlan {
  /** The work item that fans out, its stage and attempt: the elements' ids derive from them. */
  itemId: string;
  stage: string;
  attempt: number;
  correlationId?: string;
  /** The first element this run starts (0 on the first run). */
  next: number;
  /** The results pages of the runs before this one, in input order. */
  resultPages: string[];
  completed: number;
  failed: number;
  usage?: UsageTotals;
  /** The first {@link FAN_OUT_FAILURES_KEPT} failures. */
  failures: FanOutItemResult[];
  /** Elements done when the work item was last told (progress signals are spaced out, see the workflow). */
  reported: number;
  /** Set by engine-6 work items: the elements fail their workflows when they fail (and the fan-out unwraps them). */
  failAsWorkflow?: boolean;
}

/** Result of the `fanOut` workflow. */
export interface FanOutResult {
  /** The {@link FanOutArtefact}, by reference when large. */
  artefact: Artefact;
  completed: number;
  failed: number;
  usage?: UsageTotals;
  failures: FanOutItemResult[];
  /** How many runs (continue-as-new) the fan-out took. */
  runs: number;
}

/** The `fanOutProgress` signal's payload: a fan-out workflow tells its work item how far it is. */
export interface FanOutProgressUpdate {
  stage: string;
  attempt: number;
  progress: FanOutProgress;
}

export type FanOutPrepareResult =
  | {
      ok: true;
      /** The children's one-stage pipeline, stored once, by reference. */
      pipeline: Artefact;
      pipelineName: string;
      /** The child stage's name (the fan-out stage's own), under which each child's artefact comes back. */
      childStage: string;
      /** Each element, inline when small, else by reference. */
      elements: Json[];
      maxConcurrent: number;
      onItemFailure: 'continue' | 'fail';
    }
  | { ok: false; problems: string[] };

/** One element's result, in input order. */
export interface FanOutItemResult {
  index: number;
  /** The child work item's id. */
  id: string;
  status: 'completed' | 'failed';
  artefact?: Artefact;
  error?: string;
}

/** The artefact of a fan-out: every element's result in input order, and counts. */
export interface FanOutArtefact {
  results: FanOutItemResult[];
  completed: number;
  failed: number;
}
