/**
 * The pipeline checks that read more than one field: the stage graph (duplicates, unknown dependencies,
 * cycles), the names a worker registers, each stage's `with:` by its kind, whether each `output_schema:`
 * compiles, and Temporal's history and activity limits. Most read the spec as written, so they report alongside the schema's problems.
 * What a stage kind checks itself comes in as {@link KindSpecChecks}: the model imports no kind.
 */
import type { Json } from './shapes';
import { gateLeaves } from './gate-ref';
import {
  HISTORY_EVENT_BUDGET,
  outputSchemaShapeProblem,
  TEMPORAL_HISTORY_EVENT_LIMIT,
  TEMPORAL_PENDING_ACTIVITY_LIMIT,
} from './limits';
import type { SpecProblem } from './spec-problems';
import { closest } from './suggest';
import {
  KIND_RUNS,
  TYPE_DEFAULT_RUN,
  type KindSpecChecks,
  type KnownImplementations,
  type PipelineSpec,
  type StageSpec,
  type StepType,
  type ValidationResult,
} from './pipeline-shapes';

/** Graph checks run on whatever parts of the input are readable, so they report alongside schema errors. */
export function graphProblems(input: unknown): SpecProblem[] {
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

/** Names a worker must register: every stage's and gate's implementation, and the action types stages ask for (`kinds`). */
export function implementationProblems(
  input: unknown,
  known: KnownImplementations,
  kinds: readonly KindSpecChecks[],
): SpecProblem[] {
  if (!isRecord(input) || !Array.isArray(input.stages)) return [];
  const problems: SpecProblem[] = [];
  const pipelineQueue = typeof input.taskQueue === 'string' ? input.taskQueue : undefined;
  (input.stages as unknown[]).forEach((stage, index) => {
    if (!isRecord(stage)) return;
    // Implementations Treadle does not ship are the business of the worker polling the stage's queue.
    const queued = typeof stage.taskQueue === 'string' || pipelineQueue !== undefined;
    const label = typeof stage.name === 'string' ? stage.name : '?';
    const run =
      typeof stage.run === 'string'
        ? stage.run
        : typeof stage.type === 'string'
          ? TYPE_DEFAULT_RUN[stage.type as StepType]
          : undefined;
    if (run && !queued && !known.stages.includes(run)) {
      const text = `stage ${label}: unknown stage implementation "${run}"${suggest(run, known.stages)}${registered(known.stages)}`;
      problems.push({ layer: 'registry', at: ['stages', index, typeof stage.run === 'string' ? 'run' : 'type'], text });
    }
    for (const gate of queued ? [] : rawGateNames(stage.gate)) {
      if (!known.gates.includes(gate)) {
        const text = `stage ${label}: unknown gate implementation "${gate}"${suggest(gate, known.gates)}${registered(known.gates)}`;
        problems.push({ layer: 'registry', at: ['stages', index, 'gate'], text });
      }
    }
    const action = kinds.find((kind) => kind.name === run)?.actionOf?.(stage.with as Json | undefined);
    if (known.actions && !queued && action !== undefined && !known.actions.includes(action)) {
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

/**
 * The most history events one stage can write: per attempt a workflow task, the stage activity, every gate
 * activity, the attempt timer and the retry delay (three events per task or activity, two per timer), plus
 * a review (update, workflow task, upserts, TTL timer), and what an attempt of the stage's kind adds (`kinds`).
 */
export function worstCaseStageEvents(stage: StageSpec, kinds: readonly KindSpecChecks[]): number {
  // A kind's attempt may write more in the work item: a fan-out's start and its progress signals.
  const kindEvents = kinds.find((kind) => kind.name === stage.run)?.attemptEvents ?? 0;
  const perAttempt =
    3 +
    3 +
    3 * gateLeaves(stage.gate).length +
    (stage.retryBudget.attemptTimeoutMs !== null ? 2 : 0) +
    (stage.retryBudget.delayMs > 0 ? 2 : 0) +
    kindEvents;
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
export function limitProblems(spec: PipelineSpec, kinds: readonly KindSpecChecks[]): SpecProblem[] {
  const problems: SpecProblem[] = [];
  const weights = spec.stages
    .map((s) => ({ name: s.name, events: worstCaseStageEvents(s, kinds) }))
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
 * Each stage's `with:` checked by its kind, read from the spec as written: the kind's own checks (`kinds`: a
 * fan_out's element stage as a one-stage pipeline, checked by `validate`), the implementation's own check
 * (approval, loop, tdd, llm and the user's, when `known` has them), and gates' configs. A stage whose type and
 * `run:` disagree is left to the schema's problem.
 */
export function stageConfigProblems(
  input: unknown,
  known: KnownImplementations | undefined,
  kinds: readonly KindSpecChecks[],
  validate: (raw: unknown) => ValidationResult,
): SpecProblem[] {
  if (!isRecord(input) || !Array.isArray(input.stages)) return [];
  const problems: SpecProblem[] = [];
  (input.stages as unknown[]).forEach((stage, index) => {
    if (!isRecord(stage)) return;
    const label = typeof stage.name === 'string' ? stage.name : '?';
    const run = rawRun(stage);
    const config = stage.with as Json | undefined;
    const add = (layer: SpecProblem['layer'], line: string) =>
      problems.push({
        layer,
        at: ['stages', index, 'with', ...configPath(line)],
        text: `stage ${label}: with.${line}`,
      });
    const kind = kinds.find((k) => k.name === run);
    for (const problem of kind?.configProblems(config, validate) ?? []) add(problem.layer, problem.line);
    for (const line of kind?.stageProblems?.(stage) ?? [])
      problems.push({ layer: 'config', at: ['stages', index], text: `stage ${label}: ${line}` });
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

/**
 * Each stage's `output_schema:` that does not compile, by `compiles` (KnownImplementations.outputSchemaProblem:
 * Ajv, which workflow code must not load). A schema of the wrong shape is the spec schema's problem already.
 */
export function outputSchemaProblems(
  input: unknown,
  compiles: (schema: Record<string, unknown>) => string | undefined,
): SpecProblem[] {
  if (!isRecord(input) || !Array.isArray(input.stages)) return [];
  const problems: SpecProblem[] = [];
  (input.stages as unknown[]).forEach((stage, index) => {
    if (!isRecord(stage) || !isRecord(stage.outputSchema)) return;
    if (outputSchemaShapeProblem(stage.outputSchema) !== undefined) return;
    const problem = compiles(stage.outputSchema);
    if (problem === undefined) return;
    const label = typeof stage.name === 'string' ? stage.name : '?';
    const text = `stage ${label}: output_schema: ${problem}`;
    problems.push({ layer: 'config', at: ['stages', index, 'outputSchema'], text });
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

/** ` (registered: a, b)`, the names a worker has, after an unknown one. */
function registered(names: readonly string[]): string {
  return ` (registered: ${names.join(', ') || 'none'})`;
}

/** ` (did you mean "x"?)` when a known name is close to an unknown one. */
function suggest(word: string, candidates: readonly string[]): string {
  const close = closest(word, candidates);
  return close ? ` (did you mean "${close}"?)` : '';
}

/** Whether a value of the spec as written is an object (not null, not a list). */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
