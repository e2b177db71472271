/**
 * Quality contracts between stages (seed 002, "Validate-Retry-Process"): on a dependency edge, the
 * receiving stage validates the producer's items, the producer revises the rejected ones, and items still
 * rejected pass through with warnings. Contracts are part of the pipeline spec itself (`contracts:` sits
 * beside `stages:`), so their schema, canonical form and checks live here with the rest of the spec; the
 * contract kind's folder (src/kinds/contract/) holds how they run and re-exports these.
 *
 * ```yaml
 * contracts:
 *   - from: opportunity_pm          # the producing stage
 *     to: solution_designer         # the consuming stage (depends on `from`)
 *     items: briefs                 # required: the list's dot path in from's artefact ("." = the artefact)
 *     item_id: affected_area        # the field naming each item (dot path)
 *     validate: { run: llm, with: { criteria: "Actionability: ..." } }
 *     revise: { run: llm, with: { criteria: "..." } }
 *     max_retries: 2
 *     task_queue: contracts          # optional: where validators and revisers of your own run
 * ```
 */
import { z } from 'zod';
import { JsonSchema, TaskQueueName, type Json } from './shapes';
import type { SpecProblem } from './spec-problems';
import { closest } from './suggest';
import { LLM_CONTRACT_IMPLEMENTATION, type ContractSpec } from './contract-shapes';

export * from './contract-shapes';

/** The seed's `MAX_VALIDATION_RETRIES`. */
export const DEFAULT_CONTRACT_RETRIES = 2;
export const MAX_CONTRACT_RETRIES = 5;

const ImplementationRef = z.union([
  z
    .string()
    .min(1)
    .transform((run): { run: string; with?: Json } => ({ run })),
  z.object({ run: z.string().min(1), with: JsonSchema.optional() }).strict(),
]);

/** What a required contract field is for, said when it is missing. */
export const CONTRACT_FIELD_HINTS: Readonly<Record<string, string>> = {
  from: 'the producing stage',
  to: 'the consuming stage (it depends on from)',
  items:
    "where the list of items is in from's artefact, a dot path such as briefs; " +
    '"." when the artefact itself is the list',
  itemId: 'the field naming each item, e.g. affected_area',
  validate: 'the validator, e.g. { run: llm, with: { criteria: "…" } }',
  revise: 'the reviser, e.g. { run: llm, with: { criteria: "…" } }',
};

export const ContractInput = z
  .object({
    from: z.string().min(1),
    to: z.string().min(1),
    // Required: a producer whose artefact is an object would otherwise be read as the list, and the contract
    // would fail only at run time, after the producer ran ("scout's artefact is not a list").
    items: z.string(),
    itemId: z.string().min(1, 'names the field that identifies each item (e.g. affected_area)'),
    validate: ImplementationRef,
    revise: ImplementationRef,
    maxRetries: z
      .number()
      .int('must be a whole number')
      .min(0, 'must be 0 or more')
      .max(MAX_CONTRACT_RETRIES, `must be at most ${MAX_CONTRACT_RETRIES}`)
      .default(DEFAULT_CONTRACT_RETRIES),
    /**
     * The queue whose workers run this contract's validator and reviser when Treadle does not ship them;
     * else the consuming stage's `task_queue`, else the pipeline's.
     */
    taskQueue: TaskQueueName.optional(),
  })
  .strict();

export function canonicalContract(input: z.output<typeof ContractInput>): ContractSpec {
  return {
    from: input.from,
    to: input.to,
    items: input.items === '.' ? '' : input.items,
    itemId: input.itemId,
    validate: { run: input.validate.run, ...(input.validate.with !== undefined ? { with: input.validate.with } : {}) },
    revise: { run: input.revise.run, ...(input.revise.with !== undefined ? { with: input.revise.with } : {}) },
    maxRetries: input.maxRetries,
    ...(input.taskQueue !== undefined ? { taskQueue: input.taskQueue } : {}),
  };
}

/**
 * What the graph says about the contracts, read from the spec as written so that it reports alongside
 * schema problems: each edge exists (`to` depends on `from`), one contract per edge, the implementations are
 * known (a `registry` problem) unless a `task_queue` (the contract's, the consuming stage's or the
 * pipeline's) sends them to the workers that register them, and the built-in `llm` ones have criteria.
 * Fields that are not readable are left to the schema's problems.
 */
export function contractProblems(
  contracts: unknown,
  stages: unknown,
  known?: { validators: readonly string[]; revisers: readonly string[] },
  pipelineQueue?: unknown,
): SpecProblem[] {
  if (!Array.isArray(contracts)) return [];
  const problems: SpecProblem[] = [];
  const byName = new Map<string, readonly string[]>();
  const queued = new Set<string>();
  for (const stage of Array.isArray(stages) ? (stages as unknown[]) : []) {
    if (!isRecord(stage) || typeof stage.name !== 'string' || byName.has(stage.name)) continue;
    const on = Array.isArray(stage.dependsOn) ? stage.dependsOn.filter((d): d is string => typeof d === 'string') : [];
    byName.set(stage.name, on);
    if (typeof stage.taskQueue === 'string') queued.add(stage.name);
  }
  const names = [...byName.keys()];
  const edges = new Set<string>();
  contracts.forEach((c: unknown, i) => {
    if (!isRecord(c)) return;
    const from = typeof c.from === 'string' ? c.from : undefined;
    const to = typeof c.to === 'string' ? c.to : undefined;
    const at = `contracts[${i}] (${from ?? '?'} → ${to ?? '?'})`;
    const add = (layer: SpecProblem['layer'], field: (string | number)[], text: string) =>
      problems.push({ layer, at: ['contracts', i, ...field], text: `${at}: ${text}` });
    const noStage = (field: 'from' | 'to', name: string) => {
      const near = closest(name, names);
      const fix = near ? `did you mean "${near}"?` : `the stages are: ${names.join(', ')}`;
      add('contract', [field], `${field}: no stage named "${name}"; ${fix}`);
    };
    if (from !== undefined && from !== '' && !byName.has(from)) noStage('from', from);
    const consumer = to !== undefined ? byName.get(to) : undefined;
    if (to !== undefined && to !== '' && !consumer) noStage('to', to);
    else if (consumer && from !== undefined && byName.has(from) && !consumer.includes(from)) {
      const fix = `add ${from} to its depends_on (a contract sits on a dependency edge)`;
      add('contract', ['to'], `stage ${to} does not depend on ${from}; ${fix}`);
    }
    if (from !== undefined && to !== undefined) {
      const edge = `${from}\0${to}`;
      if (edges.has(edge)) add('contract', [], 'a second contract on the same edge; give the edge one contract');
      edges.add(edge);
    }
    // Validators and revisers Treadle does not ship are the business of the workers polling the contract's queue.
    const routed =
      typeof c.taskQueue === 'string' ||
      (to !== undefined && queued.has(to)) ||
      (typeof pipelineQueue === 'string' && pipelineQueue !== '');
    const refs = [
      ['validate', known?.validators, 'validator'],
      ['revise', known?.revisers, 'reviser'],
    ] as const;
    for (const [kind, names, role] of refs) {
      const ref = c[kind];
      const run = typeof ref === 'string' ? ref : isRecord(ref) && typeof ref.run === 'string' ? ref.run : undefined;
      if (run === undefined || run === '') continue;
      if (names && !routed && !names.includes(run)) {
        const near = closest(run, names);
        const guess = near ? ` (did you mean "${near}"?)` : '';
        const text = `${kind}: unknown ${role} "${run}"${guess} (registered: ${names.join(', ')})`;
        add('registry', typeof ref === 'string' ? [kind] : [kind, 'run'], text);
      }
      if (run === LLM_CONTRACT_IMPLEMENTATION) {
        const criteria = isRecord(ref) && isRecord(ref.with) ? ref.with.criteria : undefined;
        if (typeof criteria !== 'string' || criteria.trim() === '') {
          const why = `the llm ${role} needs its criteria as text (what an acceptable item is)`;
          add('contract', typeof ref === 'string' ? [kind] : [kind, 'with'], `${kind}.with.criteria: ${why}`);
        }
      }
    }
  });
  return problems;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
