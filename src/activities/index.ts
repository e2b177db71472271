/**
 * Builds the worker's activities from a {@link Registry}: one activity per stage implementation (type =
 * its name) and per gate (`gate:<name>`), plus Treadle's own. Each activity resolves blob references
 * before calling the implementation, offloads large artefacts after, validates what the implementation
 * returned, heartbeats while it runs, and aborts it when the attempt is cancelled.
 */
import { Context, log as activityLog } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import {
  DEFAULT_BLOB_THRESHOLD_BYTES,
  offloadArtefact,
  resolveArtefact as resolveStored,
  type BlobStore,
} from '../storage/blob-store';
import type { GateContext, ImplementationContext, Registry, StageContext } from './registry';
import {
  QualityFeedbackSchema,
  QualityVerdictSchema,
  StageOutputSchema,
  isBlobRef,
  type Artefact,
  type AttemptRecord,
  type Json,
  type QualityFeedback,
  type QualityVerdict,
  type StageOutput,
} from '../model/shapes';
import { MAX_INLINE_FEEDBACK_BYTES, shortFeedback, truncateText } from '../model/limits';
import type { GateRef } from '../model/gate-ref';
import type { PipelineSpec } from '../model/pipeline';
import { ConversationStore } from '../storage/conversation';
import { callLogWriter, type CallLog } from '../storage/call-log';
import { callsOf, supervise, type Supervision } from './supervision';
import { defaultAgentName, type AgentProviders } from '../agents/providers';
import { defaultAgentProviders, recordingAgent } from '../agents';
import type {
  ActivityContextBase,
  PreparePipelineInput,
  PreparePipelineResult,
  GateActivityInput,
  GateActivityResult,
  PreviousAttempts,
  StageActivityInput,
  StageActivityResult,
  StoreArtefactInput,
  StoreArtefactResult,
} from '../model/state';
import { ENGINE_VERSION, isEngineVersion } from '../model/state';
import { PREPARE_PIPELINE_ACTIVITY, STORE_ARTEFACT_ACTIVITY, gateActivityType } from '../model/activity-types';
import { validatePipeline } from '../kinds/pipeline';
import { packStages } from '../model/packed-stages';
import { routeImplementations } from '../worker/implementation-routing';
import { idempotencyKey as seedIdempotencyKey, inputHash } from '../model/hashing';

/** What activities need; tests pass their own. */
export interface ActivityDependencies {
  registry: Registry;
  blobs: BlobStore;
  /** Artefacts whose JSON is larger go to the blob store. */
  blobThresholdBytes?: number;
  /** Agent providers by name (default: anthropic, scripted, claude-code). */
  agents?: AgentProviders;
  /** The cross-run call log every model call is appended to (none: only the items' own records). */
  callLog?: CallLog;
  /**
   * The engine version items start on (default {@link ENGINE_VERSION}; an older one while a deploy rolls out).
   * A function is asked at every prepare: `runWorker` lowers it while the server lacks an attribute it needs.
   */
  engineVersion?: number | (() => number);
  /** The approval action types the worker registers, checked with the rest of a spec (none: not checked here). */
  actionTypes?: readonly string[];
  /**
   * An implementations queue's worker: a stage's first attempt returns the output schema its implementation
   * registered, which the worker that prepared the item could not know.
   */
  reportsOutputSchemas?: boolean;
  /** The worker has a notifications file: the prepare step says so, and the item announces (engine 8). */
  notifies?: boolean;
}

type Activity = (input: never) => Promise<unknown>;

/** The activity functions to register on a worker, keyed by activity type. */
export function createActivities(deps: ActivityDependencies): Record<string, Activity> {
  const threshold = deps.blobThresholdBytes ?? DEFAULT_BLOB_THRESHOLD_BYTES;
  const engineNow = engineVersionReader(deps.engineVersion ?? ENGINE_VERSION);
  // A bad setting fails the worker at start, not the first item.
  engineNow();
  const names: RegisteredNames = {
    ...deps.registry.names(),
    ...(deps.actionTypes ? { actions: deps.actionTypes } : {}),
  };
  const agents = deps.agents ?? defaultAgentProviders();
  return {
    ...treadleActivities(deps, names, engineNow, threshold),
    ...stageActivities(deps, names, agents, threshold),
    ...gateActivities(deps, names, agents),
  };
}

/** The names a spec is checked against: the registry's, plus the approval action types when given. */
type RegisteredNames = ReturnType<Registry['names']> & { actions?: readonly string[] };

/** Reads the engine version items start on, checked at every read (the setting may be a function). */
function engineVersionReader(setting: number | (() => number)): () => number {
  return () => {
    const engine = typeof setting === 'function' ? setting() : setting;
    if (!isEngineVersion(engine))
      throw new Error(`engineVersion must be a whole number from 1 to ${ENGINE_VERSION}, got ${engine}`);
    return engine;
  };
}

/** Treadle's own activities: preparing an item's pipeline, and storing an artefact that arrived inline. */
function treadleActivities(
  deps: ActivityDependencies,
  names: RegisteredNames,
  engineNow: () => number,
  threshold: number,
): Record<string, Activity> {
  const prepare = async (input: PreparePipelineInput): Promise<PreparePipelineResult> => {
    // A fan-out's children name their one-stage pipeline by reference: it is stored once for all of them.
    const raw = isBlobRef(input.pipeline)
      ? await resolveStored(input.pipeline as Artefact, deps.blobs)
      : input.pipeline;
    const result = validatePipeline(raw, names);
    const engine = engineNow();
    // Recorded in history, so the item decides once (and replays the same) whether it announces.
    const notifies = deps.notifies === true ? { notifies: true } : {};
    if (!result.ok) return { ok: false, problems: result.problems, engine, ...notifies };
    // Large `with:` configs would ride in every activity input: they travel by reference like artefacts.
    // What this worker lacks runs on the queue the spec names for it (validation made sure there is one).
    const spec = await offloadConfigs(routeImplementations(result.spec, names), deps.blobs, threshold);
    // The result is recorded in the item's history: stages travel as differences from the first one.
    const packedStages = packStages(spec.stages);
    return {
      ok: true,
      spec: packedStages ? { ...spec, stages: [] } : spec,
      ...(packedStages ? { packedStages } : {}),
      agentBacked: deps.registry.agentBackedTypes(),
      engine,
      ...notifies,
    };
  };
  // Edits that arrived inline (e.g. `temporal workflow signal`) above the threshold are stored once here,
  // so downstream stages receive a reference rather than the edit in every input.
  const storeArtefact = async (input: StoreArtefactInput): Promise<StoreArtefactResult> => ({
    artefact: (await offloadArtefact(input.artefact, deps.blobs, threshold, input.summary)) ?? null,
  });
  return { [PREPARE_PIPELINE_ACTIVITY]: prepare, [STORE_ARTEFACT_ACTIVITY]: storeArtefact };
}

/** One activity per registered stage implementation, its type the implementation's name. */
function stageActivities(
  deps: ActivityDependencies,
  names: RegisteredNames,
  agents: AgentProviders,
  threshold: number,
): Record<string, Activity> {
  const activities: Record<string, Activity> = {};
  for (const name of names.stages) {
    // A stage kind's name validates specs but runs in workflow code: no activity.
    const impl = deps.registry.getStage(name);
    if (impl === undefined) continue;
    const schema = deps.reportsOutputSchemas ? names.outputSchemas[name] : undefined;
    activities[name] = async (input: StageActivityInput): Promise<StageActivityResult> =>
      supervise(
        async (supervision) => {
          const before = await readAttemptLog(input.previousAttempts, deps.blobs);
          const previousLog = await storeAttemptLog(before, input.stage, deps.blobs);
          // Also reported if the attempt is cut off, so the next attempt names the log instead of carrying it.
          if (previousLog !== null) supervision.report.previousLog = previousLog;
          const ctx: StageContext = await baseContext(input, before, deps.blobs, supervision, agents, {
            feedback: await resolveFeedback(input.feedback, deps.blobs),
          });
          const parsed = StageOutputSchema.safeParse(await impl(ctx));
          if (!parsed.success) throw invalidResult(`stage implementation "${name}"`, parsed.error.issues);
          return {
            ...(await compactStageOutput(parsed.data, deps.blobs, threshold)),
            previousLog,
            // Once per stage: the item keeps it in its state for reviewers' edits.
            ...(schema !== undefined && input.attempt === 1 ? { outputSchema: schema } : {}),
            ...(await callsOf(supervision)),
          };
        },
        { blobs: deps.blobs, onCalls: callLogWriter(deps.callLog, input) },
      );
  }
  return activities;
}

/** One activity per registered gate, its type `gate:<name>`. */
function gateActivities(
  deps: ActivityDependencies,
  names: RegisteredNames,
  agents: AgentProviders,
): Record<string, Activity> {
  const activities: Record<string, Activity> = {};
  for (const name of names.gates) {
    const impl = deps.registry.getGate(name)!;
    activities[gateActivityType(name)] = async (input: GateActivityInput): Promise<GateActivityResult> =>
      supervise(
        async (supervision) => {
          const artefact = await resolveArtefact(input.output.artefact, deps.blobs);
          const ctx: GateContext = await baseContext(
            input,
            await readAttemptLog(input.previousAttempts, deps.blobs),
            deps.blobs,
            supervision,
            agents,
            {
              output: { ...input.output, ...(artefact !== undefined ? { artefact } : {}) },
            },
          );
          const parsed = QualityVerdictSchema.safeParse(await impl(ctx));
          if (!parsed.success) throw invalidResult(`gate implementation "${name}"`, parsed.error.issues);
          return { ...(await compactVerdict(parsed.data, deps.blobs)), ...(await callsOf(supervision)) };
        },
        { blobs: deps.blobs, onCalls: callLogWriter(deps.callLog, input) },
      );
  }
  return activities;
}

/**
 * The earlier attempts, stored as one log so the next attempt's input names it instead of carrying them
 * (`null` on a first attempt).
 */
async function storeAttemptLog(before: AttemptRecord[], stage: string, blobs: BlobStore): Promise<string | null> {
  if (before.length === 0) return null;
  const stored = await blobs.put(
    Buffer.from(JSON.stringify(before)),
    'application/json',
    `${before.length} earlier attempts of ${stage}`,
  );
  return stored.ref;
}

/** A stage's output as the history keeps it: the summary cut short, a large artefact and rejection by reference. */
async function compactStageOutput(
  output: StageOutput,
  blobs: BlobStore,
  threshold: number,
): Promise<Pick<StageActivityResult, 'outcome' | 'artefact' | 'summary' | 'rejection'>> {
  const summary = output.summary !== undefined ? truncateText(output.summary) : undefined;
  const artefact = await offloadArtefact(output.artefact, blobs, threshold, summary);
  const rejection = output.rejection !== undefined ? await offloadFeedback(output.rejection, blobs) : undefined;
  return {
    outcome: output.outcome,
    ...(artefact !== undefined ? { artefact } : {}),
    ...(summary !== undefined ? { summary } : {}),
    ...(rejection !== undefined ? { rejection } : {}),
  };
}

/** The context an implementation gets: the base every stage and gate shares, plus `extra` (feedback, or the output to judge). */
async function baseContext<E extends object>(
  input: ActivityContextBase & { agent?: string },
  previousAttempts: AttemptRecord[],
  blobs: BlobStore,
  supervision: Supervision,
  agents: AgentProviders,
  extra: E,
): Promise<ImplementationContext & E> {
  const { signal, calls } = supervision;
  const upstream: Record<string, Json> = {};
  for (const [stage, artefact] of Object.entries(input.upstream)) {
    const resolved = await resolveArtefact(artefact, blobs);
    if (resolved !== undefined) upstream[stage] = resolved;
  }
  const context = Context.current();
  // Everything large arrives by reference; implementations see it resolved.
  const itemInput = (await resolveArtefact(input.input, blobs)) ?? null;
  const config = await resolveArtefact(input.config, blobs);
  let stepKey: string | undefined;
  return {
    itemId: input.itemId,
    pipeline: input.pipeline,
    stage: input.stage,
    attempt: input.attempt,
    maxAttempts: input.maxAttempts,
    input: itemInput,
    config,
    upstream,
    previousAttempts: await Promise.all(previousAttempts.map((a) => resolveAttempt(a, blobs))),
    signal,
    idempotencyKey: `${context.info.workflowExecution?.workflowId ?? input.itemId}/${input.stage}/${input.attempt}`,
    blobs,
    log: activityLog,
    heartbeat: supervision.heartbeat,
    previousProgress: supervision.previousProgress,
    ...extra,
    // Seed 003's step key, computed on first read: few implementations use it, and hashing the canonical
    // input costs every activity otherwise. Over the references as they came: blobs are content-addressed,
    // so a reference stands for its content.
    get stepKey(): string {
      return (stepKey ??= seedIdempotencyKey(
        input.itemId,
        input.stage,
        inputHash({ input: input.input, upstream: input.upstream, config: input.config ?? null }),
      ));
    },
    agent: (provider?: string) => {
      const name = provider ?? input.agent ?? defaultAgentName();
      const factory = agents[name];
      if (!factory) {
        throw ApplicationFailure.nonRetryable(
          `unknown agent provider "${name}" (available: ${Object.keys(agents).join(', ')})`,
          'UnknownAgent',
        );
      }
      const agentContext = {
        itemId: input.itemId,
        stage: input.stage,
        attempt: input.attempt,
        input: itemInput,
        config,
      };
      return recordingAgent(factory(agentContext), {
        calls,
        conversations: new ConversationStore(blobs),
        ...(input.correlationId !== undefined ? { runCorrelationId: input.correlationId } : {}),
      });
    },
  };
}

function invalidResult(what: string, issues: { path: PropertyKey[]; message: string }[]): ApplicationFailure {
  const first = issues.slice(0, 3).map((i) => `${i.path.map(String).join('.') || 'result'}: ${i.message}`);
  return ApplicationFailure.nonRetryable(
    `${what} returned an invalid result: ${first.join('; ')}`,
    'InvalidImplementationResult',
  );
}

/**
 * The blob store's `resolveArtefact`, minus its schema check for the values that cannot be references
 * (inline artefacts, `null` inputs): that check runs zod on the worker's main thread for every input,
 * upstream artefact and config of every activity.
 */
function resolveArtefact(value: Json | undefined, blobs: BlobStore): Promise<Json | undefined> | Json | undefined {
  const mayBeReference =
    typeof value === 'object' && value !== null && !Array.isArray(value) && typeof value.ref === 'string';
  return mayBeReference ? resolveStored(value, blobs) : value;
}

/** Feedback too long for the history goes to the blob store; the history keeps its short form. */
export async function offloadFeedback(feedback: QualityFeedback, blobs: BlobStore): Promise<QualityFeedback> {
  const text = JSON.stringify(feedback);
  if (Buffer.byteLength(text) <= MAX_INLINE_FEEDBACK_BYTES) return feedback;
  const stored = await blobs.put(
    Buffer.from(text),
    'application/json',
    `feedback: ${truncateText(feedback.summary, 120)}`,
  );
  return shortFeedback(feedback, stored.ref);
}

/** A verdict as the history keeps it: long feedback by reference, long reasons cut short. */
async function compactVerdict(verdict: QualityVerdict, blobs: BlobStore): Promise<QualityVerdict> {
  if (verdict.kind === 'rejected')
    return { kind: 'rejected', feedback: await offloadFeedback(verdict.feedback, blobs) };
  if (verdict.kind === 'uncertain') return { kind: 'uncertain', reason: truncateText(verdict.reason, 1_000) };
  return verdict;
}

/** The whole feedback behind a short form (the short form itself when the whole was never stored). */
async function resolveFeedback<T extends QualityFeedback | null | undefined>(
  feedback: T,
  blobs: BlobStore,
): Promise<T> {
  if (!feedback?.ref) return feedback;
  const whole = QualityFeedbackSchema.safeParse(JSON.parse((await blobs.get(feedback.ref)).toString('utf8')));
  return (whole.success ? whole.data : feedback) as T;
}

/** A previous attempt as implementations see it: artefact and feedback resolved. */
async function resolveAttempt(attempt: AttemptRecord, blobs: BlobStore): Promise<AttemptRecord> {
  const out: AttemptRecord = { ...attempt };
  if (attempt.artefact !== undefined) out.artefact = (await resolveArtefact(attempt.artefact, blobs)) ?? null;
  if (attempt.feedback) out.feedback = await resolveFeedback(attempt.feedback, blobs);
  // The workflow sends a rejected verdict's feedback once, as the attempt's feedback.
  if (attempt.verdict?.kind === 'rejected')
    out.verdict = {
      kind: 'rejected',
      feedback: out.feedback ?? (await resolveFeedback(attempt.verdict.feedback, blobs)),
    };
  return out;
}

/** The spec with every `with:` config larger than the threshold replaced by a blob reference. */
async function offloadConfigs(spec: PipelineSpec, blobs: BlobStore, threshold: number): Promise<PipelineSpec> {
  const offload = async (value: Json | undefined, what: string): Promise<Json | undefined> =>
    value === undefined || isBlobRef(value) ? value : offloadArtefact(value, blobs, threshold, what);
  const gate = async (ref: GateRef, stage: string): Promise<GateRef> => {
    if ('run' in ref)
      return ref.with === undefined
        ? ref
        : { run: ref.run, with: (await offload(ref.with, `with: of gate ${ref.run} in stage ${stage}`)) ?? null };
    if ('all' in ref) return { all: await Promise.all(ref.all.map((g) => gate(g, stage))) };
    return { any: await Promise.all(ref.any.map((g) => gate(g, stage))) };
  };
  const stages = await Promise.all(
    spec.stages.map(async (stage) => {
      const out = { ...stage };
      if (stage.with !== undefined) out.with = (await offload(stage.with, `with: of stage ${stage.name}`)) ?? null;
      if (stage.gate) out.gate = await gate(stage.gate, stage.name);
      return out;
    }),
  );
  return { ...spec, stages };
}

/**
 * The compact records of a stage's earlier attempts: the stored log followed by the recent records. A plain
 * array is what workflows started before the log existed send.
 */
async function readAttemptLog(
  previous: PreviousAttempts | AttemptRecord[],
  blobs: BlobStore,
): Promise<AttemptRecord[]> {
  if (Array.isArray(previous)) return previous;
  const logged = previous.log ? (JSON.parse((await blobs.get(previous.log)).toString('utf8')) as AttemptRecord[]) : [];
  return [...logged, ...previous.recent];
}
