/** Activity type names shared by the workflow (which schedules them) and the worker (which registers them). */

/**
 * Treadle's own local activity that validates a spec (every problem at once, implementation names against
 * the worker's registry) and returns the canonical form, so workflow code never loads the zod schemas.
 */
export const PREPARE_PIPELINE_ACTIVITY = 'treadle.preparePipeline';

/** Stage implementations are registered under their own name; gates under `gate:<name>`. */
export function gateActivityType(gate: string): string {
  return `gate:${gate}`;
}

/** Treadle's own local activity that moves an inline artefact above the blob threshold into the blob store. */
export const STORE_ARTEFACT_ACTIVITY = 'treadle.storeArtefact';

/** One call of a TDD graph node (Scaffold, TDDWriteTests, Impl, TDDReviewImpl, Merger, Rebaser). */
export const TDD_NODE_ACTIVITY = 'treadle.tddNode';
/** Makes (or finds) a TDD node's git worktree. */
export const TDD_WORKTREE_ACTIVITY = 'treadle.tddWorktree';
/** Turns a `tdd` stage's config into the root node's input (spec and replies stored by reference). */
export const TDD_PREPARE_ACTIVITY = 'treadle.tddPrepare';

/** Checks a loop stage's config, makes its session folders and stores its plan. */
export const LOOP_PREPARE_ACTIVITY = 'treadle.loopPrepare';
/** One iteration of a loop stage (seed 004): a fresh agent, its status file, the snapshot. */
export const LOOP_ITERATION_ACTIVITY = 'treadle.loopIteration';
/** Asks a command-based queue whether it is empty. */
export const LOOP_CHECK_QUEUE_ACTIVITY = 'treadle.loopCheckQueue';
/** The loop stage's artefact with its final output's text (by reference when large). */
export const LOOP_ARTEFACT_ACTIVITY = 'treadle.loopArtefact';
/** Writes the session's `state.json`. */
export const LOOP_WRITE_STATE_ACTIVITY = 'treadle.loopWriteState';

/** A contract's validation round (seed 002): one call of the consumer's validator for the round's items. */
export const CONTRACT_VALIDATE_ACTIVITY = 'treadle.contractValidate';
/** A contract's revision of one rejected item by the producer's reviser. */
export const CONTRACT_REVISE_ACTIVITY = 'treadle.contractRevise';
/** A contract's final list: accepted in order, then the warned items, in the producer's artefact. */
export const CONTRACT_FINALIZE_ACTIVITY = 'treadle.contractFinalize';
