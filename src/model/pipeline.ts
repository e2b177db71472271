/**
 * The pipeline spec: plain, validated JSON that travels as workflow input (DESIGN.md principle 3).
 *
 * Users write it with the TypeScript builder or in YAML (snake_case keys); both go through
 * {@link validatePipeline}, which reports every problem at once and returns the canonical form below
 * (camelCase keys, durations in milliseconds, defaults filled in).
 */
import { z } from 'zod';
import { parseDuration } from './duration';
import type { GateRef } from './gate-ref';
import { gateLeaves } from './gate-ref';
import {
  DEFAULT_MAX_PARALLEL,
  HISTORY_EVENT_BUDGET,
  MAX_PARALLEL_LIMIT,
  TEMPORAL_HISTORY_EVENT_LIMIT,
  TEMPORAL_PENDING_ACTIVITY_LIMIT,
} from './limits';
import { JsonSchema, type Json } from './shapes';
import { FAN_OUT_ATTEMPT_EVENTS, FAN_OUT_STAGE } from '../kinds/fan-out/shapes';
import {
  canonicalContract,
  CONTRACT_FIELD_HINTS,
  ContractInput,
  contractProblems,
  LLM_CONTRACT_IMPLEMENTATION,
  type ContractSpec,
} from '../kinds/contract/spec';
import { checkFanOut } from '../kinds/fan-out/spec';
import { describeIssue, type SpecProblem } from './spec-problems';
import { closest } from './suggest';

export type { SpecProblem } from './spec-problems';

export const REVIEW_POLICIES = [
  'never',
  'always',
  'on_escalation',
  'on_uncertain',
  'on_escalation_or_uncertain',
] as const;
export type ReviewPolicy = (typeof REVIEW_POLICIES)[number];
export const EXHAUSTED_ACTIONS = ['fail', 'escalate'] as const;
export type ExhaustedAction = (typeof EXHAUSTED_ACTIONS)[number];
export const REVIEW_EXPIRED_ACTIONS = ['approve', 'reject'] as const;

/** Mechanical-failure defaults: exceptions, crashes and timeouts retried by Temporal, not quality attempts. */
export const DEFAULT_ACTIVITY_RETRY = {
  maximumAttempts: 5,
  initialIntervalMs: 1_000,
  backoffCoefficient: 2,
  maximumIntervalMs: 60_000,
  nonRetryableErrorTypes: [] as string[],
};
/** Upper bound on one activity execution when the stage has no attempt timeout. */
export const DEFAULT_START_TO_CLOSE_MS = 10 * 60_000;
/**
 * With an attempt timeout, the workflow's timer ends the attempt and waits for the activity to stop; the
 * activity's own start-to-close timeout comes this much later, so it never races the timer (a server-side
 * timeout would retry the activity and lose the calls it made).
 */
export const ATTEMPT_CANCEL_MARGIN_MS = 30_000;
/** Activities heartbeat every few seconds, so a dead worker is noticed within this long. */
export const DEFAULT_HEARTBEAT_TIMEOUT_MS = 30_000;

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

/** Seed 003's step types; `tdd` and the kinds still to come are named by `run:`. */
export const STEP_TYPES = ['deterministic', 'llm', 'approval', 'fan_out'] as const;
export type StepType = (typeof STEP_TYPES)[number];
/** The implementation a step type runs when the stage names none. */
const TYPE_DEFAULT_RUN: Partial<Record<StepType, string>> = { llm: 'llm', approval: 'approval', fan_out: 'fan_out' };
/** Implementations that are a step type of their own: `type: deterministic` cannot run them. */
const KIND_RUNS: Record<string, StepType> = { llm: 'llm', approval: 'approval', fan_out: 'fan_out' };

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
    activity: ActivityInput.optional(),
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
  })
  .strict();

/** Retry budget (seed 000 `RetryBudget`); `maxAttempts` includes the first attempt. */
export interface RetryBudget {
  maxAttempts: number;
  delayMs: number;
  attemptTimeoutMs: number | null;
  onExhausted: ExhaustedAction;
}

/** Temporal activity options for the stage's work and gate activities (mechanical failures only). */
export interface ActivitySettings {
  startToCloseTimeoutMs: number;
  heartbeatTimeoutMs: number;
  retry: typeof DEFAULT_ACTIVITY_RETRY;
}

export { gateLeaves, type GateRef } from './gate-ref';

/** One stage of the canonical spec. */
export interface StageSpec {
  name: string;
  description?: string;
  /** Seed 003's step type: given, or derived from `run` (llm, approval, fan_out; everything else deterministic). */
  type: StepType;
  run: string;
  with?: Json;
  agent?: string;
  gate: GateRef | null;
  dependsOn: string[];
  retryBudget: RetryBudget;
  reviewPolicy: ReviewPolicy;
  reviewTtlMs: number | null;
  onReviewExpired: (typeof REVIEW_EXPIRED_ACTIONS)[number];
  activity: ActivitySettings;
}

/** The canonical, validated pipeline spec. */
export interface PipelineSpec {
  name: string;
  description?: string;
  /** Tokens one work item may spend on model calls; null for no limit. */
  tokenBudget: number | null;
  /** Stages of one item running at once. */
  maxParallel: number;
  stages: StageSpec[];
  /** Seed 002's quality contracts (absent when there are none). */
  contracts?: ContractSpec[];
}

/** Implementation names a worker has registered, for checking a spec against. */
export interface KnownImplementations {
  stages: readonly string[];
  gates: readonly string[];
  /** The implementation's own check of its `with:` config (`path: message` per problem), when it has one. */
  checkConfig?: (kind: 'stage' | 'gate', implementation: string, config: Json | undefined) => string[];
  /** Contract validators and revisers (seed 002); the built-in `llm` ones when absent. */
  validators?: readonly string[];
  revisers?: readonly string[];
  /** Action types approval stages may name (`with: { action }`); not checked when absent. */
  actions?: readonly string[];
}

/**
 * The outcome of {@link validatePipeline}. When invalid, `problems` is every problem as printed, and
 * `found` the same problems with the check that found each and where it is in the spec as written.
 */
export type ValidationResult =
  { ok: true; spec: PipelineSpec } | { ok: false; problems: string[]; found: SpecProblem[] };

/** Thrown by {@link parsePipeline}; `problems` lists every issue found. */
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
 * (duplicates, unknown dependencies, cycles), the contracts, and, when `known` is given, the names a worker
 * registers (implementations, validators, revisers, action types) and each stage's `with:` by its kind.
 * History and activity limits are checked once the schema holds.
 */
export function validatePipeline(raw: unknown, known?: KnownImplementations): ValidationResult {
  const input = camelizeSpec(raw);
  const found: SpecProblem[] = [];
  const parsed = PipelineInput.safeParse(input);
  if (!parsed.success) found.push(...schemaProblems(input, parsed.error.issues));
  found.push(...graphProblems(input));
  if (known) found.push(...implementationProblems(input, known));
  found.push(...stageConfigProblems(input, known));
  if (isRecord(input)) {
    const builtIn = [LLM_CONTRACT_IMPLEMENTATION];
    const contractNames = known && { validators: known.validators ?? builtIn, revisers: known.revisers ?? builtIn };
    found.push(...contractProblems(input.contracts, input.stages, contractNames));
  }
  const spec = parsed.success ? canonical(parsed.data) : undefined;
  if (spec) found.push(...limitProblems(spec));
  if (found.length > 0 || !spec) {
    const unique = found.filter((p, i) => found.findIndex((q) => q.text === p.text) === i);
    return { ok: false, problems: unique.map((p) => p.text), found: unique };
  }
  return { ok: true, spec };
}

/** Like {@link validatePipeline} but throws a {@link PipelineValidationError}. */
export function parsePipeline(raw: unknown, known?: KnownImplementations): PipelineSpec {
  const result = validatePipeline(raw, known);
  if (!result.ok) {
    const named = isRecord(raw) && typeof raw.name === 'string' ? raw.name : '(unnamed)';
    throw new PipelineValidationError(named, result.problems);
  }
  return result.spec;
}

function canonical(data: z.output<typeof PipelineInput>): PipelineSpec {
  return {
    name: data.name,
    ...(data.description !== undefined ? { description: data.description } : {}),
    tokenBudget: data.tokenBudget ?? null,
    maxParallel: data.maxParallel ?? DEFAULT_MAX_PARALLEL,
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
      return spec;
    }),
  };
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

/** Graph checks run on whatever parts of the input are readable, so they report alongside schema errors. */
function graphProblems(input: unknown): SpecProblem[] {
  if (!isRecord(input) || !Array.isArray(input.stages)) return [];
  const problems: SpecProblem[] = [];
  const names = new Map<string, number>();
  const deps = new Map<string, string[]>();
  const dependsOnAt = new Map<string, (string | number)[]>();
  input.stages.forEach((stage: unknown, index: number) => {
    if (!isRecord(stage) || typeof stage.name !== 'string') return;
    if (names.has(stage.name)) {
      const first = names.get(stage.name);
      const text = `stages[${index}] (${stage.name}): duplicate stage name, first used at stages[${first}]; rename one`;
      problems.push({ layer: 'graph', at: ['stages', index, 'name'], text });
    } else names.set(stage.name, index);
    const on = Array.isArray(stage.dependsOn) ? stage.dependsOn.filter((d): d is string => typeof d === 'string') : [];
    deps.set(stage.name, [...(deps.get(stage.name) ?? []), ...on]);
    if (!dependsOnAt.has(stage.name)) dependsOnAt.set(stage.name, ['stages', index, 'dependsOn']);
  });
  for (const [stage, on] of deps) {
    const at = dependsOnAt.get(stage)!;
    for (const dep of on) {
      if (dep === stage) {
        problems.push({ layer: 'graph', at, text: `stage ${stage}: depends on itself; remove it from its depends_on` });
      } else if (!names.has(dep)) {
        const near = closest(dep, [...names.keys()]);
        const fix = near ? `did you mean "${near}"?` : `the stages are: ${[...names.keys()].join(', ')}`;
        problems.push({ layer: 'graph', at, text: `stage ${stage}: depends on unknown stage "${dep}" (${fix})` });
      }
    }
  }
  const cycle = findCycle(deps);
  if (cycle) {
    const text = `dependency cycle: ${cycle.join(' -> ')}; remove one of these depends_on`;
    problems.push({ layer: 'graph', at: dependsOnAt.get(cycle[0]!) ?? ['stages'], text });
  }
  return problems;
}

/** Names a worker must register: every stage's and gate's implementation, and approval stages' action types. */
function implementationProblems(input: unknown, known: KnownImplementations): SpecProblem[] {
  if (!isRecord(input) || !Array.isArray(input.stages)) return [];
  const problems: SpecProblem[] = [];
  (input.stages as unknown[]).forEach((stage, index) => {
    if (!isRecord(stage)) return;
    const label = typeof stage.name === 'string' ? stage.name : '?';
    const run =
      typeof stage.run === 'string'
        ? stage.run
        : typeof stage.type === 'string'
          ? TYPE_DEFAULT_RUN[stage.type as StepType]
          : undefined;
    if (run && !known.stages.includes(run)) {
      const text = `stage ${label}: unknown stage implementation "${run}"${suggest(run, known.stages)}${registered(known.stages)}`;
      problems.push({ layer: 'registry', at: ['stages', index, typeof stage.run === 'string' ? 'run' : 'type'], text });
    }
    for (const gate of rawGateNames(stage.gate)) {
      if (!known.gates.includes(gate)) {
        const text = `stage ${label}: unknown gate implementation "${gate}"${suggest(gate, known.gates)}${registered(known.gates)}`;
        problems.push({ layer: 'registry', at: ['stages', index, 'gate'], text });
      }
    }
    const action = run === 'approval' && isRecord(stage.with) ? stage.with.action : undefined;
    if (known.actions && typeof action === 'string' && action !== '' && !known.actions.includes(action)) {
      const unknown = `unknown action type "${action}"${suggest(action, known.actions)}${registered(known.actions)}`;
      const text = `stage ${label}: with.action: ${unknown}`;
      problems.push({ layer: 'registry', at: ['stages', index, 'with', 'action'], text });
    }
  });
  return problems;
}

/** Gate implementation names in a raw (unvalidated) gate value. */
function rawGateNames(gate: unknown): string[] {
  return rawGateRefs(gate).map((g) => g.run);
}

/** Finds one cycle (self-loops are reported separately) and returns it closed, e.g. `[a, b, a]`. */
function findCycle(deps: Map<string, string[]>): string[] | null {
  const state = new Map<string, 'visiting' | 'done'>();
  const path: string[] = [];
  const visit = (node: string): string[] | null => {
    state.set(node, 'visiting');
    path.push(node);
    for (const next of deps.get(node) ?? []) {
      if (next === node || !deps.has(next)) continue;
      if (state.get(next) === 'visiting') return [...path.slice(path.indexOf(next)), next].reverse();
      if (!state.has(next)) {
        const found = visit(next);
        if (found) return found;
      }
    }
    path.pop();
    state.set(node, 'done');
    return null;
  };
  for (const node of deps.keys()) {
    if (!state.has(node)) {
      const found = visit(node);
      if (found) return found;
    }
  }
  return null;
}

/** Keys whose values are user payloads and keep their spelling. */
const OPAQUE_KEYS = new Set(['with']);

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

/** ` (registered: a, b)`, the names a worker has, after an unknown one. */
function registered(names: readonly string[]): string {
  return ` (registered: ${names.join(', ') || 'none'})`;
}

function suggest(word: string, candidates: readonly string[]): string {
  const close = closest(word, candidates);
  return close ? ` (did you mean "${close}"?)` : '';
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * The most history events one stage can write: per attempt a workflow task, the stage activity, every gate
 * activity, the attempt timer and the retry delay (three events per task or activity, two per timer), plus
 * a review (update, workflow task, upserts, TTL timer).
 */
export function worstCaseStageEvents(stage: StageSpec): number {
  // A fan-out's elements run under a fan-out workflow: the work item holds its start and its progress signals.
  const fanOut = stage.run === FAN_OUT_STAGE ? FAN_OUT_ATTEMPT_EVENTS : 0;
  const perAttempt =
    3 +
    3 +
    3 * gateLeaves(stage.gate).length +
    (stage.retryBudget.attemptTimeoutMs !== null ? 2 : 0) +
    (stage.retryBudget.delayMs > 0 ? 2 : 0) +
    fanOut;
  const review = 12;
  return stage.retryBudget.maxAttempts * perAttempt + review;
}

/** The most activities one running stage holds at once: its own, or all its gates in parallel. */
function activitiesPerStage(stage: StageSpec): number {
  return Math.max(1, gateLeaves(stage.gate).length);
}

/**
 * Limits that no schema can see: a spec whose worst case would pass Temporal's history or pending-activity
 * limits is refused here, naming the limit and the stages that weigh most, instead of failing mid-run.
 */
function limitProblems(spec: PipelineSpec): SpecProblem[] {
  const problems: SpecProblem[] = [];
  const weights = spec.stages
    .map((s) => ({ name: s.name, events: worstCaseStageEvents(s) }))
    .sort((a, b) => b.events - a.events);
  const total = weights.reduce((sum, w) => sum + w.events, 20);
  if (total > HISTORY_EVENT_BUDGET) {
    const heaviest = weights
      .slice(0, 3)
      .map((w) => `${w.name} ${w.events}`)
      .join(', ');
    problems.push({
      layer: 'limit',
      at: ['stages'],
      text: `the pipeline could write ${total} history events in the worst case (every attempt used); one work item holds at most ${HISTORY_EVENT_BUDGET} (Temporal's limit is ${TEMPORAL_HISTORY_EVENT_LIMIT}): lower max_attempts or split it into several pipelines (heaviest stages: ${heaviest})`,
    });
  }
  const perStage = Math.max(...spec.stages.map(activitiesPerStage));
  if (spec.maxParallel * perStage > TEMPORAL_PENDING_ACTIVITY_LIMIT) {
    problems.push({
      layer: 'limit',
      at: ['maxParallel'],
      text: `max_parallel ${spec.maxParallel} with up to ${perStage} activities per running stage could hold ${spec.maxParallel * perStage} activities at once; Temporal allows ${TEMPORAL_PENDING_ACTIVITY_LIMIT} per work item: lower max_parallel`,
    });
  }
  return problems;
}

/**
 * Each stage's `with:` checked by its kind, read from the spec as written: the implementation's own check
 * (approval, loop, tdd, llm and the user's, when `known` has them), gates' configs, and a fan_out's element
 * stage as a one-stage pipeline. A stage whose type and `run:` disagree is left to the schema's problem.
 */
function stageConfigProblems(input: unknown, known: KnownImplementations | undefined): SpecProblem[] {
  if (!isRecord(input) || !Array.isArray(input.stages)) return [];
  const problems: SpecProblem[] = [];
  (input.stages as unknown[]).forEach((stage, index) => {
    if (!isRecord(stage)) return;
    const label = typeof stage.name === 'string' ? stage.name : '?';
    const run = rawRun(stage);
    const config = stage.with as Json | undefined;
    const add = (layer: SpecProblem['layer'], line: string, at = ['stages', index, 'with', ...configPath(line)]) =>
      problems.push({ layer, at, text: `stage ${label}: with.${line}` });
    if (run === FAN_OUT_STAGE) {
      const registry: string[] = [];
      const checked = checkFanOut(config, (element) => {
        const result = validatePipeline(element, known);
        if (result.ok) return [];
        // The element's names are the worker's to confirm, like the stage's own (run --custom-worker).
        const names = result.found.filter((p) => p.layer === 'registry');
        registry.push(...names.map((p) => p.text.replace(/^stage element: /, 'stage: ')));
        return result.found.filter((p) => p.layer !== 'registry').map((p) => p.text);
      });
      if (!checked.ok) for (const line of checked.problems) add('config', line);
      for (const line of registry) add('registry', line, ['stages', index, 'with', 'stage']);
    }
    if (!known?.checkConfig) return;
    if (run !== undefined && known.stages.includes(run)) {
      for (const line of known.checkConfig('stage', run, config)) add('config', line);
    }
    for (const gate of rawGateRefs(stage.gate)) {
      if (!known.gates.includes(gate.run)) continue;
      for (const line of known.checkConfig('gate', gate.run, gate.with)) {
        const text = `stage ${label}: gate ${gate.run}: with.${line}`;
        problems.push({ layer: 'config', at: ['stages', index, 'gate'], text });
      }
    }
  });
  return problems;
}

/** The implementation a stage as written runs; undefined when it names none or its type and run disagree. */
function rawRun(stage: Record<string, unknown>): string | undefined {
  const run = typeof stage.run === 'string' && stage.run !== '' ? stage.run : undefined;
  const type = typeof stage.type === 'string' ? (stage.type as StepType) : undefined;
  if (run === undefined) return type !== undefined ? TYPE_DEFAULT_RUN[type] : undefined;
  if (type === 'deterministic' && KIND_RUNS[run] !== undefined) return undefined;
  const ownRun = type !== undefined && type !== 'deterministic' && type !== 'llm';
  if (ownRun && TYPE_DEFAULT_RUN[type] !== run) return undefined;
  return run;
}

/** The path a config check's `path: message` line names (`escalation.ttl` → `['escalation', 'ttl']`). */
function configPath(line: string): (string | number)[] {
  const field = /^([A-Za-z0-9_.[\]-]+):/.exec(line)?.[1];
  if (field === undefined) return [];
  return field
    .split(/[.[\]]/)
    .filter((part) => part !== '')
    .map((part) => (/^\d+$/.test(part) ? Number(part) : part));
}

/** Gate implementations and their configs in a raw (unvalidated) gate value. */
function rawGateRefs(gate: unknown): { run: string; with?: Json }[] {
  if (typeof gate === 'string') return gate ? [{ run: gate }] : [];
  if (!isRecord(gate)) return [];
  if (typeof gate.run === 'string') {
    return [{ run: gate.run, ...(gate.with !== undefined ? { with: gate.with as Json } : {}) }];
  }
  const parts = Array.isArray(gate.all) ? gate.all : Array.isArray(gate.any) ? gate.any : [];
  return (parts as unknown[]).flatMap(rawGateRefs);
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
