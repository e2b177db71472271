/**
 * The shapes the contract activities and the work item's workflow code share (seed 002): types and
 * constants only, no zod, so workflow code can import them. The spec's schema is in `spec.ts`.
 */
import type { CallBatch, Json } from '../../model/shapes';
import type { ContractSpec } from '../../model/contract-shapes';

// The contract's spec shapes are part of the pipeline spec (src/model/contract-shapes.ts).
export { LLM_CONTRACT_IMPLEMENTATION, type ContractSpec, type QualityFlags } from '../../model/contract-shapes';

/**
 * The failure type of a validate or revise call whose worker does not register the contract's validator or
 * reviser (a deployment that misses it): the consuming stage fails with the message, which names the fix,
 * instead of the seed's fallback for a validator that throws (every item accepted).
 */
export const UNKNOWN_CONTRACT_IMPLEMENTATION = 'UnknownContractImplementation';

/** Revision calls of one round running at once. */
export const CONTRACT_REVISION_LANES = 50;

/** A validation round's input: round 0 reads the producer's artefact, later rounds apply the revisions. */
/**
 * Round 0 carries the contract, the work item's input and the producer's artefact, and stores them in the
 * contract's state; later rounds and revisions carry only the state's reference, so what each call adds to
 * the history does not grow with the criteria or the input.
 */
export type ContractValidateInput = ContractCall &
  (
    | {
        round: 0;
        contract: ContractSpec;
        /** The work item's input (scripted replies, templates), a reference when large. */
        input: Json;
        /** The producer's artefact (a reference when large). */
        source: Json;
      }
    | {
        round: number;
        /** The contract's state so far and the round's revisions (by index into its rejected items). */
        stateRef: string;
        revisions: { index: number; revisedRef: string | null }[];
      }
  );

/** What every contract call names: the work item, and the consuming stage (for the call log). */
export interface ContractCall {
  itemId: string;
  pipeline: string;
  correlationId?: string;
  /** The consuming stage. */
  consumer: string;
}

export type ContractValidateResult =
  | {
      ok: true;
      stateRef: string;
      /** Items in the list (round 0) or revised items validated (later rounds). */
      validated: number;
      produced: number;
      accepted: number;
      /** Items this round's validation rejected. */
      rejectedNow: number;
      /** Items still rejected after this round (the next round revises them). */
      rejected: number;
      /** How the validator's answer was taken when it was not a clean one (the seed's conservative fallbacks). */
      fallback?: 'threw' | 'malformed' | 'partial';
      fallbackDetail?: string;
      /** The first few rejections, for the event (all of them are in the state). */
      sample: { id: string; reason: string }[];
      tokens: number;
      /** The round's model calls, for the item's usage and token budget (absent: none). */
      calls?: CallBatch;
    }
  | { ok: false; problems: string[] };

export interface ContractReviseInput extends ContractCall {
  round: number;
  stateRef: string;
  /** Index into the state's rejected items. */
  index: number;
}

export type ContractReviseResult = (
  | { ok: true; id: string; revisedRef: string; tokens: number }
  | { ok: false; id: string; error: string; wastedTokens: number }
) & {
  /** The revision's model calls, for the item's usage and token budget. */
  calls?: CallBatch;
};

export interface ContractFinalizeInput {
  stateRef: string;
  retries: number;
}

export interface ContractFinalizeResult {
  /** The consumer's input in place of `from`'s artefact: the list replaced by the final items. */
  artefact: Json;
  accepted: number;
  warned: number;
  summary: string;
}
