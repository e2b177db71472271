/**
 * Quality contracts between stages (seed 002, "Validate-Retry-Process"): on a dependency edge, the
 * receiving stage validates the producer's items, the producer revises the rejected ones, and items still
 * rejected pass through with warnings. This file holds the spec's shapes and checks (zod, no I/O) and the
 * shapes the workflow and the contract activities share.
 *
 * ```yaml
 * contracts:
 *   - from: opportunity_pm          # the producing stage
 *     to: solution_designer         # the consuming stage (depends on `from`)
 *     items: briefs                 # where the list is in from's artefact (dot path; "" or "." = the artefact)
 *     item_id: affected_area        # the field naming each item (dot path)
 *     validate: { run: llm, with: { criteria: "Actionability: ..." } }
 *     revise: { run: llm, with: { criteria: "..." } }
 *     max_retries: 2
 * ```
 */
import { z } from 'zod';
import { JsonSchema, type Json } from './shapes';

/** The seed's `MAX_VALIDATION_RETRIES`. */
export const DEFAULT_CONTRACT_RETRIES = 2;
export const MAX_CONTRACT_RETRIES = 5;
/** The built-in validator and reviser: an agent call driven by criteria text. */
export const LLM_CONTRACT_IMPLEMENTATION = 'llm';

const ImplementationRef = z.union([
  z.string().min(1).transform((run): { run: string; with?: Json } => ({ run })),
  z.object({ run: z.string().min(1), with: JsonSchema.optional() }).strict(),
]);

export const ContractInput = z
  .object({
    from: z.string().min(1),
    to: z.string().min(1),
    items: z.string().default(''),
    itemId: z.string().min(1, 'names the field that identifies each item (e.g. affected_area)'),
    validate: ImplementationRef,
    revise: ImplementationRef,
    maxRetries: z.number().int('must be a whole number').min(0, 'must be 0 or more').max(MAX_CONTRACT_RETRIES, `must be at most ${MAX_CONTRACT_RETRIES}`).default(DEFAULT_CONTRACT_RETRIES),
  })
  .strict();

/** One contract of the canonical spec. */
export interface ContractSpec {
  from: string;
  to: string;
  /** Dot path of the list in `from`'s artefact; "" for the artefact itself. */
  items: string;
  itemId: string;
  validate: { run: string; with?: Json };
  revise: { run: string; with?: Json };
  maxRetries: number;
}

export function canonicalContract(input: z.output<typeof ContractInput>): ContractSpec {
  return {
    from: input.from,
    to: input.to,
    items: input.items === '.' ? '' : input.items,
    itemId: input.itemId,
    validate: { run: input.validate.run, ...(input.validate.with !== undefined ? { with: input.validate.with } : {}) },
    revise: { run: input.revise.run, ...(input.revise.with !== undefined ? { with: input.revise.with } : {}) },
    maxRetries: input.maxRetries,
  };
}

/**
 * What the graph says about the contracts: each edge exists (`to` depends on `from`), one contract per
 * edge, the implementations are known, and the built-in `llm` ones have criteria.
 */
export function contractProblems(contracts: readonly ContractSpec[], stages: readonly { name: string; dependsOn: readonly string[] }[], known?: { validators: readonly string[]; revisers: readonly string[] }): string[] {
  const problems: string[] = [];
  const byName = new Map(stages.map((s) => [s.name, s]));
  const edges = new Set<string>();
  contracts.forEach((c, i) => {
    const at = `contracts[${i}] (${c.from} → ${c.to})`;
    if (!byName.has(c.from)) problems.push(`${at}: from: no stage named "${c.from}"`);
    const consumer = byName.get(c.to);
    if (!consumer) problems.push(`${at}: to: no stage named "${c.to}"`);
    else if (byName.has(c.from) && !consumer.dependsOn.includes(c.from)) problems.push(`${at}: stage ${c.to} does not depend on ${c.from}; add ${c.from} to its depends_on (a contract sits on a dependency edge)`);
    const edge = `${c.from}\0${c.to}`;
    if (edges.has(edge)) problems.push(`${at}: a second contract on the same edge; give the edge one contract`);
    edges.add(edge);
    for (const [kind, ref, names] of [['validate', c.validate, known?.validators], ['revise', c.revise, known?.revisers]] as const) {
      if (names && !names.includes(ref.run)) problems.push(`${at}: ${kind}: unknown ${kind === 'validate' ? 'validator' : 'reviser'} "${ref.run}" (registered: ${names.join(', ')})`);
      if (ref.run === LLM_CONTRACT_IMPLEMENTATION) {
        const criteria = (ref.with as { criteria?: unknown } | undefined)?.criteria;
        if (typeof criteria !== 'string' || criteria.trim() === '') problems.push(`${at}: ${kind}.with.criteria: the llm ${kind === 'validate' ? 'validator' : 'reviser'} needs its criteria as text (what an acceptable item is)`);
      }
    }
  });
  return problems;
}

export * from './contract-state';
