/**
 * Starting work: a work item (`workItem`) or a TDD tree (`tddNode`), each validated first with every problem
 * listed, idempotent by workflow id, and with large inputs stored by reference.
 */
import { ServiceError, WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import type { SearchAttributePair } from '@temporalio/common';
import { createHash, randomUUID } from 'node:crypto';
import { canonicalJson } from '../model/hashing';
import { offloadArtefact, type BlobStore } from '../storage/blob-store';
import { PipelineBuilder } from '../kinds/builder';
import type { KnownImplementations, PipelineSpec } from '../model/pipeline';
import { validatePipeline } from '../kinds/pipeline';
import {
  explainSearchAttributeError,
  TreadleCorrelationId,
  TreadleEvalRun,
  TreadlePipeline,
  TreadleStatus,
} from '../model/search-attributes';
import {
  itemPriorityProblems,
  mergePriority,
  temporalPriority,
  type ItemPriority,
  type TemporalPriority,
} from '../model/priority';
import type { Json } from '../model/shapes';
import type { ForkOrigin, WorkItemInput } from '../model/state';
import { seedSpecOf, tddRootInput, tddTargetBranch, validateTddSpec } from '../kinds/tdd/spec';
import type { NodeContext } from '../kinds/tdd/shapes';
import { TreadleError } from './errors';
import { missingQueueHint } from '../worker/task-queues';

/** The workflow type of a work item. */
export const WORK_ITEM_WORKFLOW_TYPE = 'workItem';
const TDD_WORKFLOW_TYPE = 'tddNode';

/** What a start needs from the client that runs it. */
export interface StartContext {
  client: Client;
  taskQueue: string;
  known?: KnownImplementations;
  blobs: BlobStore;
  blobThresholdBytes: number;
}

/**
 * The default id of a work item: `<pipeline>-<first 16 hex of sha256(canonical input)>`, so the same input
 * names the same run (seed 003: a run is found by its pipeline and input hash).
 */
export function runIdFor(pipeline: string, input: Json): string {
  return `${pipeline}-${createHash('sha256').update(canonicalJson(input)).digest('hex').slice(0, 16)}`;
}

/** A server refusal of a start, with the server's reason (the SDK's own message is only "Failed to start"). */
export function startRefused(what: string, error: ServiceError): TreadleError {
  const reason = explainSearchAttributeError(error.cause?.message ?? error.message);
  return new TreadleError(`could not start ${what}: ${reason}`, 'failed', [], { cause: error });
}

/**
 * The pipeline spec, validated against the known implementations, or a TreadleError listing every problem
 * (and, when names Treadle does not ship lack a queue, how to name one).
 */
function validSpec(ctx: StartContext, raw: unknown): Extract<ReturnType<typeof validatePipeline>, { ok: true }> {
  const validation = validatePipeline(raw, ctx.known);
  if (validation.ok) return validation;
  const name =
    typeof raw === 'object' && raw !== null && typeof (raw as { name?: unknown }).name === 'string'
      ? (raw as { name: string }).name
      : '(unnamed)';
  // Names Treadle does not ship, listed with no queue: the hint says to name the queue their workers poll.
  const hint = missingQueueHint(validation.problems);
  throw new TreadleError(
    `pipeline ${name} is invalid:\n${validation.problems.map((p) => `  - ${p}`).join('\n')}${hint}`,
    'invalid_pipeline',
    validation.problems,
  );
}

/** Refuses a token budget that is not a whole number of tokens above 0 (null and undefined mean none). */
function checkTokenBudget(tokenBudget: number | null | undefined): void {
  if (tokenBudget === undefined || tokenBudget === null) return;
  if (Number.isInteger(tokenBudget) && tokenBudget > 0) return;
  throw new TreadleError(`tokenBudget must be a whole number of tokens above 0, got ${tokenBudget}`, 'invalid_input');
}

/**
 * How a work item starts: its id and token budget, and its priority and fairness key in the task queues (over
 * the spec's `priority:`, `fairness_key:` and `fairness_weight:`; src/model/priority.ts).
 */
export interface StartOptions extends ItemPriority {
  id?: string;
  tokenBudget?: number | null;
  /** The evaluation case this item runs (`treadle eval run`): tagged `TreadleEvalRun`, named in the memo. */
  evalRun?: EvalCaseTag;
}

/** Which evaluation run, variant and case an item belongs to (memo key {@link EVAL_MEMO_KEY}). */
export interface EvalCaseTag {
  run: string;
  variant: string;
  caseId: string;
  /** SHA-256 of the variant's spec and the case's input: a rerun of the run finds out if either changed. */
  hash?: string;
}

/** Memo key of an evaluation case item's {@link EvalCaseTag}. */
export const EVAL_MEMO_KEY = 'treadleEval';

/** How a TDD tree starts (see `TreadleClient.startTdd`), with its priority and fairness key in the task queues. */
export interface TddStartOptions extends ItemPriority {
  repo: string;
  id?: string;
  replies?: Json;
}

/**
 * Temporal's `priority` start option for `given` over `defaults` (the spec's), or a TreadleError listing what is
 * wrong with it; nothing when the item has none (Temporal's defaults). Child workflows and activities inherit it
 * on the server, so it is given once, here.
 */
function startPriority(given: ItemPriority, defaults: ItemPriority = {}): { priority?: TemporalPriority } {
  const merged = mergePriority(
    { priority: given.priority, fairnessKey: given.fairnessKey, fairnessWeight: given.fairnessWeight },
    defaults,
  );
  const problems = itemPriorityProblems(merged);
  if (problems.length > 0)
    throw new TreadleError(
      problems.length === 1 ? problems[0]! : `the priority is invalid:\n${problems.map((p) => `  - ${p}`).join('\n')}`,
      'invalid_input',
      problems,
    );
  const priority = temporalPriority(merged);
  return priority ? { priority } : {};
}

/** What a start adds to an ordinary item's: a fork's origin, search attributes and memo of its own. */
export interface StartExtras {
  fork?: ForkOrigin;
  attributes?: SearchAttributePair[];
  memo?: Record<string, unknown>;
}

/** A work item's start, checked and ready: what `startWorkItem` starts and a schedule's action starts each firing. */
export interface PreparedWorkItem {
  /** The spec as given (a builder's JSON): the workflow validates it again. */
  raw: unknown;
  spec: PipelineSpec;
  /** The input inline, or a blob reference when it is over the client's blob threshold. */
  input: Json;
  /** Temporal's `priority` start option (none when the item has no priority of its own or the spec's). */
  priority: { priority?: TemporalPriority };
}

/**
 * Checks what a work item starts with before anything is started, each refusal a TreadleError: the pipeline spec
 * (every problem listed), the input (plain JSON), the token budget and the priority over the spec's; then stores a
 * large input once, content-addressed, so the history (or a schedule's action) carries only its reference.
 */
export async function prepareWorkItem(
  ctx: StartContext,
  pipeline: unknown,
  input: unknown,
  options: Omit<StartOptions, 'id'>,
): Promise<PreparedWorkItem> {
  const raw = pipeline instanceof PipelineBuilder ? pipeline.toJSON() : pipeline;
  const { spec } = validSpec(ctx, raw);
  const inputProblem = jsonProblem(input);
  if (inputProblem) throw new TreadleError(`the work item input must be plain JSON: ${inputProblem}`, 'invalid_input');
  checkTokenBudget(options.tokenBudget);
  const priority = startPriority(options, spec);
  const stored =
    (await offloadArtefact((input ?? null) as Json, ctx.blobs, ctx.blobThresholdBytes, 'work item input')) ?? null;
  return { raw, spec, input: stored, priority };
}

/** The search attributes a work item starts with (the workflow keeps them current from then on). */
export function startAttributes(spec: PipelineSpec): SearchAttributePair[] {
  return [
    { key: TreadlePipeline, value: spec.name },
    { key: TreadleStatus, value: 'running' },
  ];
}

/** The one-line summary Temporal's Web UI shows for a work item. */
export const itemSummary = (spec: PipelineSpec): string => `${spec.name}: ${spec.stages.length} stages`;

/** Starts a work item or returns the existing one with the same id (see `TreadleClient.start`). */
export async function startWorkItem(
  ctx: StartContext,
  pipeline: unknown,
  input: unknown,
  options: StartOptions,
  extras: StartExtras = {},
): Promise<{ id: string; runId: string; pipeline: string; existing: boolean }> {
  const { raw, spec, input: storedInput, priority } = await prepareWorkItem(ctx, pipeline, input, options);
  const id = options.id ?? runIdFor(spec.name, (input ?? null) as Json);
  // Seed 003's correlation id: a UUID per run, on every activity, model call record and log line.
  const correlationId = randomUUID();
  const args: WorkItemInput = {
    pipeline: raw,
    input: storedInput,
    itemId: id,
    correlationId,
    ...(options.tokenBudget !== undefined ? { tokenBudget: options.tokenBudget } : {}),
    ...(extras.fork ? { fork: extras.fork } : {}),
  };
  try {
    const handle = await ctx.client.workflow.start(WORK_ITEM_WORKFLOW_TYPE, {
      taskQueue: ctx.taskQueue,
      workflowId: id,
      args: [args],
      // A running or finished run with this id is the answer: the start fails, and the catch below returns it.
      workflowIdConflictPolicy: 'FAIL',
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
      typedSearchAttributes: [
        ...startAttributes(spec),
        { key: TreadleCorrelationId, value: correlationId },
        ...(extras.attributes ?? []),
        ...(options.evalRun ? [{ key: TreadleEvalRun, value: options.evalRun.run }] : []),
      ],
      ...(extras.memo || options.evalRun
        ? { memo: { ...extras.memo, ...(options.evalRun ? { [EVAL_MEMO_KEY]: options.evalRun } : {}) } }
        : {}),
      staticSummary: itemSummary(spec),
      ...priority,
    });
    return { id, runId: handle.firstExecutionRunId, pipeline: spec.name, existing: false };
  } catch (error) {
    if (error instanceof WorkflowExecutionAlreadyStartedError) {
      const description = await ctx.client.workflow.getHandle(id).describe();
      return { id, runId: description.runId, pipeline: spec.name, existing: true };
    }
    if (error instanceof ServiceError) throw startRefused(`work item ${id}`, error);
    throw error;
  }
}

/** Starts a V3 TDD tree or returns the existing one with the same id (see `TreadleClient.startTdd`). */
export async function startTddTree(
  ctx: StartContext,
  spec: unknown,
  options: TddStartOptions,
): Promise<{ id: string; runId: string; branch: string; targetBranch: string }> {
  const checked = validateTddSpec(spec);
  if (!checked.ok)
    throw new TreadleError(
      `TDD spec is invalid:\n${checked.problems.map((p) => `  - ${p}`).join('\n')}`,
      'invalid_pipeline',
      checked.problems,
    );
  const seedSpec = seedSpecOf(checked.spec);
  const id = options.id ?? `tdd-${seedSpec.id}`;
  const priority = startPriority(options);
  const put = async (value: unknown, summary: string): Promise<string> =>
    (await ctx.blobs.put(Buffer.from(JSON.stringify(value)), 'application/json', summary)).ref;
  const context: NodeContext = { spec: seedSpec, parentContext: null };
  const targetBranch = tddTargetBranch(checked.spec);
  const input = tddRootInput(checked.spec, {
    treeId: id,
    repo: options.repo,
    contextRef: await put(context, `TDD spec ${seedSpec.id}`),
    ...(options.replies !== undefined
      ? { repliesRef: await put(options.replies, `scripted replies for ${seedSpec.id}`) }
      : {}),
  });
  const branch = `tdd/${seedSpec.id}`;
  try {
    const handle = await ctx.client.workflow.start(TDD_WORKFLOW_TYPE, {
      taskQueue: ctx.taskQueue,
      workflowId: id,
      // The tree fails its workflow when it does not merge (engine 6; TreadleClient.tddResult reads either way).
      args: [{ ...input, failAsWorkflow: true }],
      workflowIdConflictPolicy: 'USE_EXISTING',
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
      typedSearchAttributes: [
        { key: TreadlePipeline, value: 'tdd' },
        { key: TreadleStatus, value: 'running' },
      ],
      staticSummary: `TDD ${seedSpec.id}: ${seedSpec.acceptanceCriteria.length} criteria → ${targetBranch}`,
      ...priority,
    });
    return { id, runId: handle.firstExecutionRunId, branch, targetBranch };
  } catch (error) {
    if (error instanceof WorkflowExecutionAlreadyStartedError)
      return { id, runId: (await ctx.client.workflow.getHandle(id).describe()).runId, branch, targetBranch };
    if (error instanceof ServiceError) throw startRefused(`TDD tree ${id}`, error);
    throw error;
  }
}

/** Why a value is not plain JSON (undefined, functions, non-finite numbers, class instances), or undefined. */
function jsonProblem(value: unknown, at = 'input'): string | undefined {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return undefined;
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : `${at} is ${value}`;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const problem = jsonProblem(value[i], `${at}[${i}]`);
      if (problem) return problem;
    }
    return undefined;
  }
  if (typeof value === 'object') {
    const proto = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null)
      return `${at} is a ${(value as object).constructor?.name ?? 'class instance'}, not a plain object`;
    for (const [key, inner] of Object.entries(value)) {
      if (inner === undefined) continue;
      const problem = jsonProblem(inner, `${at}.${key}`);
      if (problem) return problem;
    }
    return undefined;
  }
  return `${at} is ${typeof value}`;
}
