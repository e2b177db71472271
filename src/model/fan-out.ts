/**
 * The `fan_out` stage kind (seed 000 `FanOut`, seed 003 `fan_out` steps): one stage run over a list, each
 * element as a child work item of a one-stage pipeline, with bounded concurrency; the results come back in
 * input order, and an element that fails is reported without losing the others. Zod-free shapes shared by
 * the workflow and the activities; the config is checked in `fan-out-config.ts`.
 */
import type { Artefact, Json } from './shapes';

/** The stage implementation name of the kind (`type: fan_out` or `run: fan_out`). */
export const FAN_OUT_STAGE = 'fan_out';
/** Elements one fan-out takes: each is a child workflow, three events in the parent's history. */
export const MAX_FAN_OUT_ITEMS = 2_000;
export const DEFAULT_FAN_OUT_CONCURRENCY = 10;
/** Children running at once (Temporal allows 2,000 pending children per workflow). */
export const MAX_FAN_OUT_CONCURRENCY = 200;
/** Elements whose JSON is larger travel to their child by reference. */
export const FAN_OUT_INLINE_ELEMENT_BYTES = 256;

/** Turns a fan-out's config (or a stage's `fan_out` outcome) into the children's inputs. */
export const FAN_OUT_PREPARE_ACTIVITY = 'treadle.fanOutPrepare';

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

/** A fan-out's progress on its stage, for the state query and `treadle status`. */
export interface FanOutProgress {
  total: number;
  running: number;
  completed: number;
  failed: number;
}
