/**
 * The pipeline spec: plain, validated JSON that travels as workflow input (DESIGN.md principle 3).
 *
 * Users write it with the TypeScript builder or in YAML (snake_case keys); both go through `validatePipeline`
 * (src/kinds/pipeline.ts: this module's {@link validatePipelineWith} with every stage kind's own checks), which
 * reports every problem at once and returns the canonical form below (camelCase keys, durations in
 * milliseconds, defaults filled in).
 */
import { z } from 'zod';
import { parseDuration } from './duration';
import type { GateRef } from './gate-ref';
import {
  DEFAULT_MAX_PARALLEL,
  MAX_PARALLEL_LIMIT,
  outputSchemaShapeProblem,
  TEMPORAL_PENDING_ACTIVITY_LIMIT,
} from './limits';
import { fairnessKeyProblem, fairnessWeightProblem, priorityProblem } from './priority';
import { JsonSchema, TaskQueueName, type Json } from './shapes';
import {
  canonicalContract,
  CONTRACT_FIELD_HINTS,
  ContractInput,
  contractProblems,
  LLM_CONTRACT_IMPLEMENTATION,
} from './contract';
import { OnBreachInput, onBreachProblems, reviewSlaOf } from './review-sla';
import { describeIssue, type SpecProblem } from './spec-problems';
import {
  ATTEMPT_CANCEL_MARGIN_MS,
  DEFAULT_ACTIVITY_RETRY,
  DEFAULT_HEARTBEAT_TIMEOUT_MS,
  DEFAULT_START_TO_CLOSE_MS,
  EXHAUSTED_ACTIONS,
  KIND_RUNS,
  REVIEW_EXPIRED_ACTIONS,
  REVIEW_POLICIES,
  STEP_TYPES,
  TYPE_DEFAULT_RUN,
  type KindSpecChecks,
  type KnownImplementations,
  type PipelineSpec,
  type StageSpec,
  type ValidationResult,
} from './pipeline-shapes';
import {
  graphProblems,
  implementationProblems,
  isRecord,
  limitProblems,
  outputSchemaProblems,
  stageConfigProblems,
} from './pipeline-checks';

export type { SpecProblem } from './spec-problems';
export * from './pipeline-shapes';
export { worstCaseStageEvents } from './pipeline-checks';

const name = z
  .string()
  .min(1, 'must not be empty')
  .regex(/^[A-Za-z][A-Za-z0-9_.-]*$/, 'must start with a letter and hold only letters, digits, _ . -');
const duration = z.union([z.string(), z.number()]).transform((value, ctx) => {
  const parsed = parseDuration(value);
  if ('error' in parsed) {
    ctx.addIssue({ code: 'custom', message: parsed.error });
    return z.NEVER;
  }
  return parsed.ms;
});
/** Timeouts and intervals: zero would mean "no timeout" to Temporal, or a busy loop, so it is refused. */
const positiveDuration = duration.refine((ms) => ms > 0, 'must be longer than 0');
const implName = z.string().min(1, 'must name a registered implementation');

/** A value of type `T` that `problem` (./priority.ts, shared with the client and the CLI) finds nothing wrong with. */
function checkedBy<T>(problem: (value: unknown) => string | undefined) {
  return z.unknown().transform((value, ctx) => {
    const found = problem(value);
    if (found === undefined) return value as T;
    ctx.addIssue({ code: 'custom', message: found });
    return z.NEVER;
  });
}

/** A gate: a registered gate implementation with its config, or a composition `{ all: [...] }` / `{ any: [...] }`. */
const GateRefInput: z.ZodType<GateRef, unknown> = z.lazy(() =>
  z.union([
    implName.transform((run): GateRef => ({ run })),
    z
      .object({ run: implName, with: JsonSchema.optional() })
      .strict()
      .transform((g): GateRef => (g.with !== undefined ? { run: g.run, with: g.with } : { run: g.run })),
    z.object({ all: z.array(GateRefInput).min(1, 'needs at least one gate') }).strict(),
    z.object({ any: z.array(GateRefInput).min(1, 'needs at least one gate') }).strict(),
  ]),
);

/**
 * `output_schema:` is a bounded JSON Schema object ({@link outputSchemaShapeProblem}); whether it compiles is
 * {@link outputSchemaProblems}' check (Ajv is loaded only for specs that have one).
 */
const OutputSchemaInput = JsonSchema.superRefine((schema, ctx) => {
  const problem = outputSchemaShapeProblem(schema);
  if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
});

const RetryBudgetInput = z
  .object({
    maxAttempts: z
      .number()
      .int('must be a whole number')
      .min(1, 'must be at least 1 (it includes the first attempt)')
      .default(1),
    delay: duration.default(0),
    attemptTimeout: positiveDuration.nullable().default(null),
    onExhausted: z.enum(EXHAUSTED_ACTIONS).default('fail'),
  })
  .strict();

const ActivityInput = z
  .object({
    startToCloseTimeout: positiveDuration.optional(),
    heartbeatTimeout: positiveDuration.optional(),
    retry: z
      .object({
        maximumAttempts: z.number().int().min(1).optional(),
        initialInterval: positiveDuration.optional(),
        backoffCoefficient: z.number().min(1).optional(),
        maximumInterval: positiveDuration.optional(),
        nonRetryableErrorTypes: z.array(z.string()).optional(),
      })
      .strict()
      .optional(),
  })
  .strict();

const StageInput = z
  .object({
    name,
    description: z.string().optional(),
    /** Seed 003's step type; it implies `run:` for llm, approval and fan_out. */
    type: z.enum(STEP_TYPES).optional(),
    run: implName.optional(),
    /** Seed 003's retry policy: the step's activity is retried this many times after its first try... */
    maxRetries: z.number().int('must be a whole number').min(0, 'must be 0 or more').optional(),
    /** ...waiting this many seconds before the first retry... */
    backoffSeconds: z.number().positive('must be more than 0').optional(),
    /** ...and this factor longer before each next one (default 2). */
    backoffCoefficient: z.number().min(1, 'must be at least 1').optional(),
    with: JsonSchema.optional(),
    /** Agent provider for this stage's implementations (anthropic, scripted, claude-code, ...). */
    agent: z.string().min(1).optional(),
    gate: GateRefInput.nullable().optional(),
    dependsOn: z.array(z.string()).default([]),
    retryBudget: RetryBudgetInput.default({ maxAttempts: 1, delay: 0, attemptTimeout: null, onExhausted: 'fail' }),
    reviewPolicy: z.enum(REVIEW_POLICIES).default('never'),
    reviewTtl: positiveDuration.nullable().optional(),
    onReviewExpired: z.enum(REVIEW_EXPIRED_ACTIONS).default('reject'),
    /** The reviewer group the stage's reviews go to: a name the review inbox and listings filter on. */
    reviewers: z.string().trim().min(1, 'must name a reviewer group').optional(),
    /** How long a decision of the stage may wait before it is overdue; the pipeline's when not given. */
    reviewSla: positiveDuration.optional(),
    onBreach: OnBreachInput.optional(),
    /** What a reviewer's edit of the stage's artefact must match (JSON Schema 2020-12); its own output is not checked. */
    outputSchema: OutputSchemaInput.optional(),
    activity: ActivityInput.optional(),
    /** The queue whose worker runs this stage's implementations that Treadle does not ship (its gates', too). */
    taskQueue: TaskQueueName.optional(),
  })
  .strict()
  .superRefine((stage, ctx) => {
    if (stage.run === undefined && (stage.type === undefined || TYPE_DEFAULT_RUN[stage.type] === undefined)) {
      ctx.addIssue({
        code: 'custom',
        path: ['run'],
        message:
          stage.type === 'deterministic'
            ? 'a deterministic step must name its implementation (run: <name>)'
            : 'must name a registered implementation (or give the step a type: llm, approval, fan_out)',
      });
    }
    if (stage.type !== undefined && stage.run !== undefined) {
      const kind = KIND_RUNS[stage.run];
      if (stage.type === 'deterministic' && kind !== undefined)
        ctx.addIssue({
          code: 'custom',
          path: ['type'],
          message: `run: ${stage.run} is a step type of its own (type: ${kind}), not deterministic`,
        });
      else if (stage.type !== 'deterministic' && stage.type !== 'llm' && stage.run !== TYPE_DEFAULT_RUN[stage.type])
        ctx.addIssue({
          code: 'custom',
          path: ['type'],
          message: `type ${stage.type} runs "${TYPE_DEFAULT_RUN[stage.type]}", not "${stage.run}"; drop run: or the type`,
        });
    }
    const seedRetry =
      stage.maxRetries !== undefined || stage.backoffSeconds !== undefined || stage.backoffCoefficient !== undefined;
    if (seedRetry && stage.activity?.retry !== undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['maxRetries'],
        message: 'give the retry policy once: max_retries/backoff_seconds/backoff_coefficient, or activity.retry',
      });
  });

const PipelineInput = z
  .object({
    name,
    description: z.string().optional(),
    /** Model tokens (input + output) one work item may spend; then agent-backed stages escalate to review. */
    tokenBudget: z
      .number()
      .int('must be a whole number of tokens')
      .positive('must be more than 0')
      .nullable()
      .optional(),
    /** Stages of one item running at once; the rest wait their turn in spec order. */
    maxParallel: z
      .number()
      .int('must be a whole number')
      .min(1, 'must be at least 1')
      .max(
        MAX_PARALLEL_LIMIT,
        `must be at most ${MAX_PARALLEL_LIMIT} (each running stage holds Temporal activities; Temporal allows ${TEMPORAL_PENDING_ACTIVITY_LIMIT} per item)`,
      )
      .optional(),
    stages: z.array(StageInput).min(1, 'a pipeline needs at least one stage'),
    /** Seed 002's quality contracts on dependency edges. */
    contracts: z.array(ContractInput).optional(),
    /** The default queue of the stages' implementations that Treadle does not ship. */
    taskQueue: TaskQueueName.optional(),
    /** The items' priority in the task queues, 1 (first) to 5; the CLI's or SDK's wins. */
    priority: checkedBy<number>(priorityProblem).optional(),
    /** The items' fairness key (a tenant, a team) and its weight; the CLI's or SDK's win. */
    fairnessKey: checkedBy<string>(fairnessKeyProblem).optional(),
    fairnessWeight: checkedBy<number>(fairnessWeightProblem).optional(),
    /** Every stage's `review_sla` and `on_breach` unless the stage gives its own. */
    reviewSla: positiveDuration.optional(),
    onBreach: OnBreachInput.optional(),
  })
  .strict()
  .superRefine((pipeline, ctx) => {
    // A weight is its key's share: with no key in the spec it would never be used (ItemPriority, ./priority.ts).
    if (pipeline.fairnessWeight !== undefined && pipeline.fairnessKey === undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['fairnessWeight'],
        message: "needs a fairness_key beside it: the weight is that key's share of the queue",
      });
  });

export { gateLeaves, type GateRef } from './gate-ref';

/** Thrown by `parsePipeline` and the builder; `problems` lists every issue found. */
export class PipelineValidationError extends Error {
  constructor(
    readonly pipelineName: string,
    readonly problems: string[],
  ) {
    super(
      `pipeline ${pipelineName} is invalid (${problems.length} problem${problems.length === 1 ? '' : 's'}):\n${problems.map((p) => `  - ${p}`).join('\n')}`,
    );
    this.name = 'PipelineValidationError';
  }
}

/**
 * Validates a pipeline spec written in any accepted form (builder output, parsed YAML with snake_case keys,
 * or an already canonical spec) and reports every problem at once, in one pass over every check that can
 * still read its part of the spec: the schema (unknown fields, required ones, bad durations), the graph
 * (duplicates, unknown dependencies, cycles), the contracts, each stage's `with:` by the checks of its kind
 * (`kinds`), and, when `known` is given, the names a worker registers (implementations, validators, revisers,
 * action types) and their config checks. History and activity limits are checked once the schema holds.
 * Everyone else calls `validatePipeline` (src/kinds/pipeline.ts), which passes every kind's checks.
 */
export function validatePipelineWith(
  raw: unknown,
  known: KnownImplementations | undefined,
  kinds: readonly KindSpecChecks[],
): ValidationResult {
  const input = camelizeSpec(raw);
  const found: SpecProblem[] = [];
  const parsed = PipelineInput.safeParse(input);
  if (!parsed.success) found.push(...schemaProblems(input, parsed.error.issues));
  found.push(...graphProblems(input));
  for (const { path, message } of onBreachProblems(input))
    found.push({ layer: 'schema', at: path, text: `${describePath(input, path)}: ${message}` });
  if (known) found.push(...implementationProblems(input, known, kinds));
  const validate = (pipeline: unknown) => validatePipelineWith(pipeline, known, kinds);
  found.push(...stageConfigProblems(input, known, kinds, validate));
  if (known?.outputSchemaProblem) found.push(...outputSchemaProblems(input, known.outputSchemaProblem));
  if (isRecord(input)) {
    const builtIn = [LLM_CONTRACT_IMPLEMENTATION];
    const contractNames = known && { validators: known.validators ?? builtIn, revisers: known.revisers ?? builtIn };
    found.push(...contractProblems(input.contracts, input.stages, contractNames, input.taskQueue));
  }
  const spec = parsed.success ? canonical(parsed.data, known) : undefined;
  if (spec) found.push(...limitProblems(spec, kinds));
  if (found.length > 0 || !spec) {
    const unique = found.filter((p, i) => found.findIndex((q) => q.text === p.text) === i);
    return { ok: false, problems: unique.map((p) => p.text), found: unique };
  }
  return { ok: true, spec };
}

/**
 * The canonical spec; a stage without `output_schema:` takes the schema its implementation registered, if any,
 * else, for an `llm` stage, its reply's `with.output_schema` (when `known` can check that it compiles).
 */
function canonical(data: z.output<typeof PipelineInput>, known?: KnownImplementations): PipelineSpec {
  const registered = known?.outputSchemas;
  return {
    name: data.name,
    ...(data.description !== undefined ? { description: data.description } : {}),
    tokenBudget: data.tokenBudget ?? null,
    maxParallel: data.maxParallel ?? DEFAULT_MAX_PARALLEL,
    ...(data.taskQueue !== undefined ? { taskQueue: data.taskQueue } : {}),
    ...(data.priority !== undefined ? { priority: data.priority } : {}),
    ...(data.fairnessKey !== undefined ? { fairnessKey: data.fairnessKey } : {}),
    ...(data.fairnessWeight !== undefined ? { fairnessWeight: data.fairnessWeight } : {}),
    ...(data.contracts && data.contracts.length > 0 ? { contracts: data.contracts.map(canonicalContract) } : {}),
    stages: data.stages.map((stage) => {
      const run = stage.run ?? TYPE_DEFAULT_RUN[stage.type!]!;
      const retry = stage.activity?.retry ?? seedRetry(stage);
      const spec: StageSpec = {
        name: stage.name,
        type: stage.type ?? KIND_RUNS[run] ?? 'deterministic',
        run,
        gate: stage.gate ?? null,
        dependsOn: stage.dependsOn,
        retryBudget: {
          maxAttempts: stage.retryBudget.maxAttempts,
          delayMs: stage.retryBudget.delay,
          attemptTimeoutMs: stage.retryBudget.attemptTimeout,
          onExhausted: stage.retryBudget.onExhausted,
        },
        reviewPolicy: stage.reviewPolicy,
        reviewTtlMs: stage.reviewTtl ?? null,
        onReviewExpired: stage.onReviewExpired,
        activity: {
          startToCloseTimeoutMs:
            stage.activity?.startToCloseTimeout ??
            (stage.retryBudget.attemptTimeout !== null
              ? stage.retryBudget.attemptTimeout + ATTEMPT_CANCEL_MARGIN_MS
              : DEFAULT_START_TO_CLOSE_MS),
          heartbeatTimeoutMs: stage.activity?.heartbeatTimeout ?? DEFAULT_HEARTBEAT_TIMEOUT_MS,
          retry: {
            maximumAttempts: retry?.maximumAttempts ?? DEFAULT_ACTIVITY_RETRY.maximumAttempts,
            initialIntervalMs: retry?.initialInterval ?? DEFAULT_ACTIVITY_RETRY.initialIntervalMs,
            backoffCoefficient: retry?.backoffCoefficient ?? DEFAULT_ACTIVITY_RETRY.backoffCoefficient,
            maximumIntervalMs: retry?.maximumInterval ?? DEFAULT_ACTIVITY_RETRY.maximumIntervalMs,
            nonRetryableErrorTypes: retry?.nonRetryableErrorTypes ?? [],
          },
        },
      };
      if (stage.description !== undefined) spec.description = stage.description;
      if (stage.with !== undefined) spec.with = stage.with;
      if (stage.agent !== undefined) spec.agent = stage.agent;
      if (stage.taskQueue !== undefined) spec.taskQueue = stage.taskQueue;
      if (stage.reviewers !== undefined) spec.reviewers = stage.reviewers;
      const sla = reviewSlaOf(stage, data);
      if (sla !== undefined) spec.reviewSla = sla;
      const outputSchema =
        stage.outputSchema ??
        (registered && Object.hasOwn(registered, run) ? registered[run] : undefined) ??
        llmReplySchema(run, stage.with, known?.outputSchemaProblem);
      if (outputSchema !== undefined) spec.outputSchema = outputSchema;
      return spec;
    }),
  };
}

/**
 * An `llm` stage's `with.output_schema`: its artefact is a reply matching it, so an edit must match it too.
 * Only a schema that `output_schema:` would accept (its size, a strict compile by `compiles`) is taken: the
 * reply's schema is checked by the agent's own compiler, and edits must never meet one that does not compile.
 */
function llmReplySchema(
  run: string,
  config: Json | undefined,
  compiles: KnownImplementations['outputSchemaProblem'],
): Json | undefined {
  if (run !== TYPE_DEFAULT_RUN.llm || compiles === undefined) return undefined;
  if (!isRecord(config) || !isRecord(config.output_schema)) return undefined;
  const schema = config.output_schema;
  if (outputSchemaShapeProblem(schema) !== undefined || compiles(schema) !== undefined) return undefined;
  return schema as Json;
}

/** Seed 003's retry names as Temporal's retry policy (`max_retries` retries after the first try). */
function seedRetry(stage: {
  maxRetries?: number;
  backoffSeconds?: number;
  backoffCoefficient?: number;
}): z.output<typeof ActivityInput>['retry'] {
  if (stage.maxRetries === undefined && stage.backoffSeconds === undefined && stage.backoffCoefficient === undefined)
    return undefined;
  return {
    ...(stage.maxRetries !== undefined ? { maximumAttempts: stage.maxRetries + 1 } : {}),
    ...(stage.backoffSeconds !== undefined ? { initialInterval: Math.round(stage.backoffSeconds * 1000) } : {}),
    ...(stage.backoffCoefficient !== undefined ? { backoffCoefficient: stage.backoffCoefficient } : {}),
  };
}

/** Keys whose values are user payloads and keep their spelling (a schema's property names are the artefact's). */
const OPAQUE_KEYS = new Set(['with', 'outputSchema']);

/**
 * Converts snake_case keys (the YAML form) to camelCase and canonical `…Ms` keys to plain duration keys,
 * leaving `with:` payloads untouched, so YAML, builder output and canonical specs all validate.
 */
export function camelizeSpec(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(camelizeSpec);
  if (!isRecord(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [key, inner] of Object.entries(value)) {
    // `delayMs`-style keys are the canonical form's numeric durations; accept them as durations in ms.
    const camel = key.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase()).replace(/(.)Ms$/, '$1');
    out[camel] = OPAQUE_KEYS.has(camel) ? inner : camelizeSpec(inner);
  }
  return out;
}

function describePath(input: unknown, path: PropertyKey[]): string {
  if (path.length === 0) return 'pipeline';
  const parts: string[] = [];
  let cursor: unknown = input;
  for (const key of path) {
    if (typeof key === 'number') {
      const item = Array.isArray(cursor) ? cursor[key] : undefined;
      parts[parts.length - 1] += `[${key}]`;
      if (isRecord(item) && typeof item.name === 'string') parts[parts.length - 1] += ` (${item.name})`;
      cursor = item;
    } else {
      parts.push(snake(String(key)));
      cursor = isRecord(cursor) ? cursor[String(key)] : undefined;
    }
  }
  return parts.join('.');
}

function snake(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/** The fields each object of the spec takes, by path (`*` for a list index), for unknown fields' did-you-mean. */
const SPEC_FIELDS: Record<string, readonly string[]> = {
  '': Object.keys(PipelineInput.shape),
  'stages.*': Object.keys(StageInput.shape),
  'stages.*.retryBudget': Object.keys(RetryBudgetInput.shape),
  'stages.*.activity': Object.keys(ActivityInput.shape),
  'stages.*.activity.retry': [
    'maximumAttempts',
    'initialInterval',
    'backoffCoefficient',
    'maximumInterval',
    'nonRetryableErrorTypes',
  ],
  'contracts.*': Object.keys(ContractInput.shape),
};

/** What a required field of the spec is for, said when it is missing. */
const SPEC_FIELD_HINTS: Readonly<Record<string, string>> = {
  name: 'a name of letters, digits, _ . - starting with a letter',
  stages: 'the list of stages',
  ...CONTRACT_FIELD_HINTS,
};

/** The schema's problems, each naming its field (snake_case, as YAML spells it) and the fix. */
function schemaProblems(input: unknown, issues: readonly z.core.$ZodIssue[]): SpecProblem[] {
  const fieldsAt = (path: readonly PropertyKey[]) =>
    SPEC_FIELDS[path.map((k) => (typeof k === 'number' ? '*' : String(k))).join('.')];
  return issues.flatMap((issue) =>
    describeIssue(issue, input, { fieldsAt, required: SPEC_FIELD_HINTS, spell: snake }).map((d) => ({
      layer: 'schema' as const,
      at: d.path.map((k) => (typeof k === 'number' ? k : String(k))),
      text: `${describePath(input, d.path)}: ${d.message}`,
    })),
  );
}
