/**
 * Loop stages (seed 004, "Loop Architecture v3"): the seed's files, validated with zod, and the shapes the
 * `loopStage` workflow and its activities share.
 *
 * - `stage.yaml` (a template: name, prompt, termination, output, guardrails, verify, delay, model) and
 *   `pipeline.yaml` (stages naming templates, with `max_iterations`, `inputs {from, select}`, `output`,
 *   `verify`): {@link StageFileSchema}, {@link LoopPipelineFileSchema}. The CLI reads them on the user's
 *   machine and sends the stage definitions inline (a worker never reads files a spec names).
 * - A loop is a stage kind of ordinary pipelines: `run: loop` with `with:` {@link LoopStageConfigSchema}.
 *   A v3 pipeline file becomes an ordinary spec of loop stages, one after the other (`loopPipelineSpec`).
 * - `context.json` (engine-written, the seed's fields exactly) and `status.json` (agent-written, the seed's
 *   universal format): {@link LoopContext}, {@link StatusFileSchema}.
 *
 * Pure: zod and our model only, so the CLI checks files without loading Temporal.
 */
import { z } from 'zod';
import { describeConfigIssues, unknownVariables } from '../../model/spec-problems';
import { closest } from '../../model/suggest';
import { LOOP_DECISIONS, type QueueProvider, type Termination } from './shapes';

export * from './shapes';

/** The seed's defaults: 100 iterations, 2 hours. */
export const LOOP_DEFAULTS = { maxIterations: 100, maxRuntimeSeconds: 7_200, minIterations: 1, consensus: 2 } as const;
/** Iterations a loop may be given at most; beyond that it is not a guardrail any more. */
export const MAX_LOOP_ITERATIONS = 10_000;
/** Iterations per workflow run before the loop continues as new (sooner when Temporal suggests it). */
export const LOOP_ITERATIONS_PER_RUN = 100;
/** What `status.json`'s reason and summary are cut to in workflow state and events. */
export const MAX_STATUS_TEXT = 300;

const Name = z
  .string()
  .regex(/^[a-z0-9][a-z0-9_-]*$/i, 'letters, digits, "-" and "_" only, starting with a letter or digit');
const PositiveInt = z.number().int().min(1);

/** How a queue-terminated loop learns whether its queue is empty. */
export const QueueProviderSchema = z.discriminatedUnion('provider', [
  /**
   * A command run in the workspace before each iteration (e.g. the seed's beads: `bd ready --count`): its
   * output is a number (the items left) or one line per item; no output or `0` is empty. It must be on the
   * worker's allow-list; a command that fails means "continue".
   */
  z.object({ provider: z.literal('command'), command: z.string().min(1) }).strict(),
  /** The queue's owner reports its length with the `loopQueue` signal; the loop waits for the first report. */
  z.object({ provider: z.literal('signal') }).strict(),
]) satisfies z.ZodType<QueueProvider>;

export const TerminationSchema = z
  .object({
    type: z.enum(['judgment', 'queue', 'fixed']),
    /** judgment: the consensus is checked from this iteration on (the seed: "start checking after this many"). */
    min_iterations: PositiveInt.optional(),
    /** judgment: consecutive `stop` decisions needed. */
    consensus: PositiveInt.optional(),
    /** queue: where the queue is (default: the seed's beads, `bd ready --count`). */
    queue: QueueProviderSchema.optional(),
  })
  .strict()
  .superRefine((t, ctx) => {
    if (t.type !== 'judgment' && (t.min_iterations !== undefined || t.consensus !== undefined)) {
      ctx.addIssue({
        code: 'custom',
        path: [t.min_iterations !== undefined ? 'min_iterations' : 'consensus'],
        message: `only judgment termination counts decisions; remove it or use type: judgment`,
      });
    }
    if (t.type !== 'queue' && t.queue !== undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['queue'],
        message: 'only queue termination has a queue; remove it or use type: queue',
      });
  }) satisfies z.ZodType<Termination>;

export const GuardrailsSchema = z
  .object({
    max_iterations: PositiveInt.max(MAX_LOOP_ITERATIONS).optional(),
    max_runtime_seconds: PositiveInt.optional(),
  })
  .strict();

/** `stage.yaml`, v3. `prompt` is the template file's name in the file, its text once inlined. */
export const StageFileSchema = z
  .object({
    name: Name,
    description: z.string().optional(),
    /** Metadata only. */
    tags: z.array(z.string()).optional(),
    prompt: z.string().min(1, 'names the prompt template (e.g. prompt.md)'),
    termination: TerminationSchema,
    /** Where the primary artefact goes: a path in the workspace (`${SESSION}` allowed), or `.claude` / `.treadle` (internal, the default). */
    output: z.string().min(1).optional(),
    guardrails: GuardrailsSchema.optional(),
    /** Commands run after each iteration (on the worker's allow-list), `${OUTPUT}` etc. substituted. */
    verify: z.array(z.string().min(1)).optional(),
    /** Seconds between iterations. */
    delay: z.number().min(0).max(86_400).optional(),
    model: z.string().min(1).optional(),
    /** Treadle: the agent provider (`scripted`, `anthropic`, `claude-code`); default the worker's. */
    agent: z.string().min(1).optional(),
  })
  .strict();
export type StageFile = z.infer<typeof StageFileSchema>;

export const InputsSchema = z
  .object({ from: z.string().min(1), select: z.enum(['latest', 'all']).default('latest') })
  .strict();
export type Inputs = z.infer<typeof InputsSchema>;

/** One stage of `pipeline.yaml`, v3. */
export const PipelineStageEntrySchema = z
  .object({
    id: Name,
    template: Name,
    max_iterations: PositiveInt.max(MAX_LOOP_ITERATIONS).optional(),
    inputs: InputsSchema.optional(),
    output: z.string().min(1).optional(),
    verify: z.array(z.string().min(1)).optional(),
  })
  .strict();

/** `pipeline.yaml`, v3. */
export const LoopPipelineFileSchema = z
  .object({
    name: Name,
    description: z.string().optional(),
    guardrails: z.object({ max_runtime_seconds: PositiveInt.optional() }).strict().optional(),
    stages: z.array(PipelineStageEntrySchema).min(1, 'a pipeline needs at least one stage'),
  })
  .strict();
export type LoopPipelineFile = z.infer<typeof LoopPipelineFileSchema>;

/** `with:` of a `run: loop` stage: the stage definition inline, and the pipeline entry's overrides. */
export const LoopStageConfigSchema = z
  .object({
    /** The template's name (what `pipeline.yaml` named); for `context.json`'s `stage.template`. */
    template: Name.optional(),
    stage: StageFileSchema,
    max_iterations: PositiveInt.max(MAX_LOOP_ITERATIONS).optional(),
    inputs: InputsSchema.optional(),
    output: z.string().min(1).optional(),
    verify: z.array(z.string().min(1)).optional(),
    /** The session (its folder under the runs directory); default the work item's id. */
    session: Name.optional(),
    /** `NN` of `stage-NN-<id>` (the seed counts from 0); default the stage's position in the pipeline. */
    index: z.number().int().min(0).max(99).optional(),
    /** Pipeline guardrail: seconds the whole pipeline may run (from the work item's start). */
    pipeline_max_runtime_seconds: PositiveInt.optional(),
    /** Iterations per workflow run before continue-as-new (default 100). */
    iterations_per_run: PositiveInt.max(1_000).optional(),
  })
  .strict();
export type LoopStageConfig = z.infer<typeof LoopStageConfigSchema>;

/**
 * The `${NAME}` variables each piece of a loop stage may use, as the loop activities substitute them: the
 * prompt gets every path and the iteration, verify commands the paths, the output path only the session.
 */
export const LOOP_VARIABLES = {
  prompt: ['CTX', 'PROGRESS', 'OUTPUT', 'STATUS', 'SESSION', 'ITERATION'],
  verify: ['SESSION', 'OUTPUT', 'PROGRESS', 'STATUS', 'CTX'],
  output: ['SESSION'],
} as const;

/** What an unknown variable would do, left as literal text where it stands. */
export const LITERAL_VARIABLE = {
  prompt: 'the agent would receive it as literal text',
  verify: 'the command would receive it as literal text',
  output: 'it would become part of the file name',
} as const;

/** The fields of each object of a loop stage's `with:`, for unknown fields' did-you-mean. */
function loopFieldsAt(path: readonly PropertyKey[]): readonly string[] | undefined {
  const at = path.filter((k) => typeof k === 'string').join('.');
  if (at === '') return Object.keys(LoopStageConfigSchema.shape);
  if (at === 'stage') return Object.keys(StageFileSchema.shape);
  if (at === 'stage.termination') return ['type', 'min_iterations', 'consensus', 'queue'];
  if (at === 'stage.guardrails') return Object.keys(GuardrailsSchema.shape);
  if (at === 'inputs') return ['from', 'select'];
  return undefined;
}

/** The problems of a loop stage's `with:`, each naming its field and the fix. */
export function checkLoopStageConfig(config: unknown): string[] {
  const parsed = LoopStageConfigSchema.safeParse(config ?? {});
  // Read from the config as written, so that they are reported alongside the schema's problems.
  const variables = configVariableProblems(config);
  if (parsed.success) {
    const { stage } = parsed.data;
    const max = parsed.data.max_iterations ?? stage.guardrails?.max_iterations ?? LOOP_DEFAULTS.maxIterations;
    const min = stage.termination.min_iterations;
    const unreachable =
      min !== undefined && min > max
        ? [
            `stage.termination.min_iterations: ${min} is beyond max_iterations (${max}): the loop could only ever stop ` +
              'by its guardrail; lower it or raise max_iterations',
          ]
        : [];
    const outputs = [...outputProblems(stage.output, 'stage.output'), ...outputProblems(parsed.data.output, 'output')];
    return [...outputs, ...unreachable, ...variables];
  }
  const context = { fieldsAt: loopFieldsAt, required: LOOP_FIELD_HINTS };
  const issues = describeConfigIssues(parsed.error.issues, config ?? {}, context);
  return [...issues, ...variables];
}

/** What a required field of a loop stage's `with:` is for, said when it is missing. */
const LOOP_FIELD_HINTS = {
  stage: "the stage definition (stage.yaml's fields, its prompt as text)",
  prompt: 'the prompt template',
  termination: 'how the loop ends: { type: judgment | queue | fixed }',
  type: 'judgment, queue or fixed',
};

/** Unknown variables in the prompt, output paths and verify commands of a loop stage's `with:` as written. */
function configVariableProblems(config: unknown): string[] {
  const record = (value: unknown): Record<string, unknown> =>
    typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
  const texts = (value: unknown): string[] =>
    Array.isArray(value) ? value.map((v) => (typeof v === 'string' ? v : '')) : [];
  const withConfig = record(config);
  const stage = record(withConfig.stage);
  const problems: string[] = [];
  const check = (value: unknown, field: string, where: keyof typeof LOOP_VARIABLES) => {
    if (typeof value === 'string') problems.push(...loopVariableProblems(value, field, where));
  };
  check(stage.prompt, 'stage.prompt', 'prompt');
  check(stage.output, 'stage.output', 'output');
  check(withConfig.output, 'output', 'output');
  texts(stage.verify).forEach((command, i) => check(command, `stage.verify.${i}`, 'verify'));
  texts(withConfig.verify).forEach((command, i) => check(command, `verify.${i}`, 'verify'));
  return problems;
}

/**
 * Unknown `${NAME}` variables in one piece of a loop stage (`where`: which variables it may use), as
 * `field: line n: …` (the line only for text of several lines). The loop would pass them on as literal
 * text: to the agent in a prompt, into the file name of an output path.
 */
export function loopVariableProblems(text: string, field: string, where: keyof typeof LOOP_VARIABLES): string[] {
  const several = text.includes('\n');
  const found = unknownVariables(text, LOOP_VARIABLES[where], LITERAL_VARIABLE[where]);
  return found.map((v) => `${field}: ${several ? `line ${v.line}: ` : ''}${v.message}`);
}

/** An output path must stay in the workspace: relative, no `..`. */
export function outputProblems(output: string | undefined, field: string): string[] {
  if (output === undefined || isInternalOutput(output)) return [];
  if (output.startsWith('/') || /^[a-z]:[\\/]/i.test(output))
    return [`${field}: "${output}" is absolute; give a path relative to the workspace`];
  if (output.split(/[\\/]/).includes('..')) return [`${field}: "${output}" leads out of the workspace ("..")`];
  return [];
}

/** `.claude` (the seed's word) and `.treadle` mean "internal": the stage folder's `output.md`. */
export function isInternalOutput(output: string | undefined): boolean {
  return output === undefined || output === '.claude' || output === '.treadle';
}

/** A problem in a file, as the CLI reports it: the file, the field, what is wrong and the fix. */
export function describeFileIssue(
  file: string,
  issue: z.core.$ZodIssue,
  known: readonly string[],
  got: unknown,
): string {
  const field = issue.path.join('.') || '(file)';
  if (issue.code === 'unrecognized_keys') {
    return issue.keys
      .map((k) => {
        const near = closest(k, known);
        return `${file}: ${field === '(file)' ? '' : `${field}.`}${k}: unknown field${near ? ` (did you mean "${near}"?)` : ''}; the fields are: ${known.join(', ')}`;
      })
      .join('\n');
  }
  if (issue.code === 'invalid_value' && 'values' in issue) {
    const allowed = (issue.values as unknown[]).map(String);
    const near = typeof got === 'string' ? closest(got, allowed) : undefined;
    return `${file}: ${field}: must be one of ${allowed.join(', ')}${typeof got === 'string' ? ` (got "${got}"${near ? `; did you mean "${near}"?` : ''})` : ''}`;
  }
  return `${file}: ${field}: ${issue.message}`;
}

// ---------------------------------------------------------------------------------------------------------
// status.json and context.json

/** `status.json`, the seed's universal format. Extra fields are kept; the listed ones must be right. */
export const StatusFileSchema = z.looseObject({
  decision: z.enum(LOOP_DECISIONS),
  reason: z.string(),
  summary: z.string(),
  work: z
    .looseObject({
      items_completed: z.array(z.unknown()).default([]),
      files_touched: z.array(z.string()).default([]),
    })
    .optional(),
  verify: z.looseObject({ ran: z.boolean().optional(), passed: z.boolean().optional() }).optional(),
  errors: z.array(z.unknown()).default([]),
});
export type StatusFile = z.infer<typeof StatusFileSchema>;
