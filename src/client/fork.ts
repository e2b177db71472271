/**
 * Forking a work item (issue 42): a new item on the original's pipeline, with changed settings and optionally a
 * new input, that runs again from one stage. The stages that stage does not lead to, and that completed in the
 * original, are carried as they ended there (their artefacts by reference): no activity runs and no model is
 * called for them. Failed and cancelled originals fork like completed ones. The fork names its original in its
 * input, its `TreadleForkOf` search attribute and its `treadleFork` memo; the original's forks are listed with
 * `TreadleForkOf = '<id>'` (a closed original cannot be changed to point at them).
 */
import type { Client } from '@temporalio/client';
import { inputHash } from '../model/hashing';
import { validatePipeline } from '../kinds/pipeline';
import type { PipelineSpec } from '../model/pipeline';
import type { ItemPriority } from '../model/priority';
import { TreadleForkOf } from '../model/search-attributes';
import type { Json } from '../model/shapes';
import { applyOverrides, overriddenStages, type SpecOverrides } from '../model/spec-overrides';
import type { CarriedStage, ForkOrigin, WorkItemInput, WorkItemState } from '../model/state';
import { TreadleError } from './errors';
import { decodedPayload } from './recorded-decisions';
import { startWorkItem, type StartContext } from './start';

/** The memo key under which a fork keeps its origin for listings and the Web UI. */
export const FORK_MEMO_KEY = 'treadleFork';

/** How to fork: the stage to run again from, and what changes. */
export interface ForkOptions extends ItemPriority {
  /** The stage the fork runs again from; everything it leads to runs again too. */
  from: string;
  /** A new input for the stages that run again (default: the original's). */
  input?: unknown;
  /** Changed settings (`treadle fork --set`, an overrides file): only for stages that run again. */
  overrides?: SpecOverrides;
  /** The fork's id (default `<original>-fork-<hash of from, overrides and input>`: the same fork twice is one). */
  id?: string;
  /** The task queue the fork starts on (default: the original's). */
  taskQueue?: string;
  tokenBudget?: number | null;
}

/** A started fork: its id and run, and which stages it carries and runs again. */
export interface ForkStarted {
  id: string;
  runId: string;
  pipeline: string;
  /** The same fork (id) was started before: this is that one. */
  existing: boolean;
  of: string;
  from: string;
  carried: string[];
  rerun: string[];
  /** The task queue it started on: the original's unless the options named another. */
  taskQueue: string;
}

/** What a fork needs of its original: how it was started, and its state now. */
export interface ForkSource {
  id: string;
  started: WorkItemInput & { taskQueue?: string };
  state: Pick<WorkItemState, 'stages' | 'status'>;
}

/** The `workItem` input the original was started with, and its task queue (its history's first event). */
export async function startInputOf(client: Client, id: string): Promise<WorkItemInput & { taskQueue?: string }> {
  const page = await client.workflowService.getWorkflowExecutionHistory({
    namespace: client.options.namespace,
    execution: { workflowId: id },
    maximumPageSize: 1,
  });
  const started = page.history?.events?.[0]?.workflowExecutionStartedEventAttributes;
  if (started?.workflowType?.name !== 'workItem')
    throw new TreadleError(
      `${id} is not a work item (${started?.workflowType?.name ?? 'no start event'}): only work items fork`,
      'invalid_input',
    );
  const payload = started.input?.payloads?.[0];
  const input = payload ? (decodedPayload(payload) as WorkItemInput | undefined) : undefined;
  if (input === undefined || typeof input.pipeline !== 'object' || input.pipeline === null)
    throw new TreadleError(
      `work item ${id} was not started with a pipeline spec of its own (a fan-out's element?): fork its parent`,
      'invalid_input',
    );
  const taskQueue = started.taskQueue?.name;
  return taskQueue ? { ...input, taskQueue } : input;
}

/** A fork as the original's listing shows it. */
export interface ForkListing {
  id: string;
  from: string;
  /** Temporal's status of the fork's run: Running, Completed, Failed, Cancelled, … */
  status: string;
  startedAt: string;
}

/** The forks of `id`, oldest first (a visibility listing: a fork started a moment ago may be missing). */
export async function forksOf(client: Client, id: string): Promise<ForkListing[]> {
  const forks: ForkListing[] = [];
  const query = `${TreadleForkOf.name} = '${id.replace(/'/g, "''")}'`;
  for await (const execution of client.workflow.list({ query })) {
    const memo = (execution.memo?.[FORK_MEMO_KEY] ?? {}) as { from?: string };
    forks.push({
      id: execution.workflowId,
      from: memo.from ?? '?',
      status: execution.status.name,
      startedAt: execution.startTime.toISOString(),
    });
  }
  return forks.sort((a, b) => a.startedAt.localeCompare(b.startedAt));
}

/** `from` and every stage that depends on it, directly or not, in spec order. */
export function stagesFrom(spec: PipelineSpec, from: string): string[] {
  const rerun = new Set([from]);
  for (let grew = true; grew;) {
    grew = false;
    for (const stage of spec.stages)
      if (!rerun.has(stage.name) && stage.dependsOn.some((dep) => rerun.has(dep))) {
        rerun.add(stage.name);
        grew = true;
      }
  }
  return spec.stages.filter((stage) => rerun.has(stage.name)).map((stage) => stage.name);
}

/** The fork's spec as written, and what it carries and runs again; a TreadleError listing every problem. */
export function planFork(
  source: ForkSource,
  options: ForkOptions,
): { spec: Json; origin: ForkOrigin; rerun: string[] } {
  const applied = applyOverrides(source.started.pipeline, options.overrides ?? {});
  if (!applied.ok) throw invalidFork(source.id, applied.problems);
  const validation = validatePipeline(applied.spec);
  if (!validation.ok) throw invalidFork(source.id, validation.problems);
  const { spec } = validation;
  const names = spec.stages.map((stage) => stage.name);
  if (!names.includes(options.from))
    throw invalidFork(source.id, [`no stage named "${options.from}" (the stages: ${names.join(', ')})`]);
  const rerun = stagesFrom(spec, options.from);
  const carried: Record<string, CarriedStage> = {};
  for (const name of names) {
    const stage = source.state.stages[name];
    if (rerun.includes(name) || stage?.status !== 'completed') continue;
    carried[name] = {
      ...(stage.artefact !== undefined ? { artefact: stage.artefact } : {}),
      ...(stage.summary !== undefined ? { summary: stage.summary } : {}),
    };
  }
  const unchanged = overriddenStages(options.overrides ?? {}).filter((name) => name in carried);
  if (unchanged.length > 0)
    throw invalidFork(
      source.id,
      unchanged.map(
        (name) =>
          `a change to stage ${name} would not take effect: the fork carries it as it ended in ${source.id} (fork from ${name} to run it again)`,
      ),
    );
  return {
    spec: applied.spec,
    origin: { of: source.id, from: options.from, carried },
    rerun: names.filter((name) => !(name in carried)),
  };
}

function invalidFork(id: string, problems: string[]): TreadleError {
  return new TreadleError(
    `cannot fork ${id}:\n${problems.map((p) => `  - ${p}`).join('\n')}`,
    'invalid_input',
    problems,
  );
}

/** Starts the fork `planFork` plans (or returns it, when one with its id was started before). */
export async function startFork(ctx: StartContext, source: ForkSource, options: ForkOptions): Promise<ForkStarted> {
  const { spec, origin, rerun } = planFork(source, options);
  const input = options.input !== undefined ? options.input : (source.started.input ?? null);
  const id =
    options.id ??
    `${source.id}-fork-${inputHash({ from: options.from, overrides: options.overrides ?? {}, input }).slice(0, 12)}`;
  const tokenBudget = options.tokenBudget !== undefined ? options.tokenBudget : source.started.tokenBudget;
  const taskQueue = options.taskQueue ?? source.started.taskQueue ?? ctx.taskQueue;
  const started = await startWorkItem(
    { ...ctx, taskQueue },
    spec,
    input,
    {
      id,
      ...(tokenBudget !== undefined ? { tokenBudget } : {}),
      ...(options.priority !== undefined ? { priority: options.priority } : {}),
      ...(options.fairnessKey !== undefined ? { fairnessKey: options.fairnessKey } : {}),
      ...(options.fairnessWeight !== undefined ? { fairnessWeight: options.fairnessWeight } : {}),
    },
    {
      fork: origin,
      attributes: [{ key: TreadleForkOf, value: source.id }],
      memo: {
        [FORK_MEMO_KEY]: {
          of: source.id,
          from: options.from,
          carried: Object.keys(origin.carried),
          inputChanged: options.input !== undefined,
          ...(options.overrides !== undefined ? { overrides: options.overrides } : {}),
        },
      },
    },
  );
  return { ...started, of: source.id, from: options.from, carried: Object.keys(origin.carried), rerun, taskQueue };
}
