/**
 * The contract spec's zod-free half (seed 002): the canonical contract and the flags a consuming stage keeps,
 * for code that reads a validated spec or a work item's state (workflows, engine) without loading the schema
 * (`contract.ts`).
 */
import type { Json } from './shapes';

/** The built-in validator and reviser: an agent call driven by criteria text. */
export const LLM_CONTRACT_IMPLEMENTATION = 'llm';

/** One contract of the canonical spec (`canonicalContract` in contract.ts makes it from the parsed input). */
export interface ContractSpec {
  from: string;
  to: string;
  /** Dot path of the list in `from`'s artefact; "" for the artefact itself. */
  items: string;
  itemId: string;
  validate: { run: string; with?: Json };
  revise: { run: string; with?: Json };
  maxRetries: number;
  /** `task_queue:` as written: where the contract's validator and reviser run when Treadle does not ship them. */
  taskQueue?: string;
  /**
   * Set by the worker's prepare step: the contract activities (`treadle.contractValidate`,
   * `treadle.contractRevise`) whose validator or reviser that worker does not register, and the queue whose
   * workers do. Absent: everything runs on the item's queue.
   */
  queues?: Record<string, string>;
}

/** The seed's `quality_flags` of a consuming stage. */
export interface QualityFlags {
  items_produced: number;
  validation_rejections: number;
  validation_retries: number;
}
