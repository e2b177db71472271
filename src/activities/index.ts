/**
 * Builds the worker's activities from a {@link Registry}: one activity per stage implementation (type =
 * its name) and per gate (`gate:<name>`), plus Treadle's own. Each activity resolves blob references
 * before calling the implementation, offloads large artefacts after, validates what the implementation
 * returned, heartbeats while it runs, and aborts it when the attempt is cancelled.
 */
import { Context, log as activityLog } from '@temporalio/activity';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { DEFAULT_BLOB_THRESHOLD_BYTES, offloadArtefact, resolveArtefact, type BlobStore } from '../storage/blob-store';
import type { GateContext, ImplementationContext, Registry, StageContext } from './registry';
import { CallRecordSchema, QualityVerdictSchema, StageOutputSchema, type CallRecord, type Json } from '../model/shapes';
import { ConversationStore } from '../storage/conversation';
import { defaultAgentName, type AgentProviders } from '../agents/providers';
import { defaultAgentProviders, recordingAgent } from '../agents';
import type {
  ActivityContextBase,
  PreparePipelineInput,
  PreparePipelineResult,
  GateActivityInput,
  GateActivityResult,
  StageActivityInput,
  StageActivityResult,
} from '../model/state';
import { PREPARE_PIPELINE_ACTIVITY, gateActivityType } from '../model/activity-types';
import { validatePipeline } from '../model/pipeline';

/** What activities need; tests pass their own. */
export interface ActivityDependencies {
  registry: Registry;
  blobs: BlobStore;
  /** Artefacts whose JSON is larger go to the blob store. */
  blobThresholdBytes?: number;
  /** Agent providers by name (default: anthropic, scripted, claude-code). */
  agents?: AgentProviders;
}

/** Heartbeat at most this often, and at least three times per heartbeat timeout. */
const MAX_HEARTBEAT_INTERVAL_MS = 5_000;

type Activity = (input: never) => Promise<unknown>;

/** The activity functions to register on a worker, keyed by activity type. */
export function createActivities(deps: ActivityDependencies): Record<string, Activity> {
  const threshold = deps.blobThresholdBytes ?? DEFAULT_BLOB_THRESHOLD_BYTES;
  const activities: Record<string, Activity> = {};
  const names = deps.registry.names();

  activities[PREPARE_PIPELINE_ACTIVITY] = async (input: PreparePipelineInput): Promise<PreparePipelineResult> => {
    const result = validatePipeline(input.pipeline, names);
    return result.ok ? { ok: true, spec: result.spec, agentBacked: deps.registry.agentBackedTypes() } : { ok: false, problems: result.problems };
  };

  const agents = deps.agents ?? defaultAgentProviders();

  for (const name of names.stages) {
    const impl = deps.registry.getStage(name)!;
    activities[name] = async (input: StageActivityInput): Promise<StageActivityResult> =>
      supervise(async (supervision) => {
        const ctx: StageContext = { ...(await baseContext(input, deps.blobs, supervision, agents)), feedback: input.feedback };
        const parsed = StageOutputSchema.safeParse(await impl(ctx));
        if (!parsed.success) throw invalidResult(`stage implementation "${name}"`, parsed.error.issues);
        const output = parsed.data;
        const artefact = await offloadArtefact(output.artefact, deps.blobs, threshold, output.summary);
        return {
          outcome: output.outcome,
          ...(artefact !== undefined ? { artefact } : {}),
          ...(output.summary !== undefined ? { summary: output.summary } : {}),
          ...(output.rejection !== undefined ? { rejection: output.rejection } : {}),
          ...(supervision.calls.length > 0 ? { calls: supervision.calls } : {}),
        };
      });
  }

  for (const name of names.gates) {
    const impl = deps.registry.getGate(name)!;
    activities[gateActivityType(name)] = async (input: GateActivityInput): Promise<GateActivityResult> =>
      supervise(async (supervision) => {
        const artefact = await resolveArtefact(input.output.artefact, deps.blobs);
        const ctx: GateContext = {
          ...(await baseContext(input, deps.blobs, supervision, agents)),
          output: { ...input.output, ...(artefact !== undefined ? { artefact } : {}) },
        };
        const parsed = QualityVerdictSchema.safeParse(await impl(ctx));
        if (!parsed.success) throw invalidResult(`gate implementation "${name}"`, parsed.error.issues);
        return { ...parsed.data, ...(supervision.calls.length > 0 ? { calls: supervision.calls } : {}) };
      });
  }
  return activities;
}

async function baseContext(
  input: ActivityContextBase & { agent?: string },
  blobs: BlobStore,
  supervision: Supervision,
  agents: AgentProviders,
): Promise<ImplementationContext> {
  const { signal, calls } = supervision;
  const upstream: Record<string, Json> = {};
  for (const [stage, artefact] of Object.entries(input.upstream)) {
    const resolved = await resolveArtefact(artefact, blobs);
    if (resolved !== undefined) upstream[stage] = resolved;
  }
  const context = Context.current();
  return {
    itemId: input.itemId,
    pipeline: input.pipeline,
    stage: input.stage,
    attempt: input.attempt,
    maxAttempts: input.maxAttempts,
    input: input.input,
    config: input.config,
    upstream,
    previousAttempts: await Promise.all(
      input.previousAttempts.map(async (a) => (a.artefact === undefined ? a : { ...a, artefact: (await resolveArtefact(a.artefact, blobs)) ?? null })),
    ),
    signal,
    idempotencyKey: `${context.info.workflowExecution?.workflowId ?? input.itemId}/${input.stage}/${input.attempt}`,
    blobs,
    log: activityLog,
    heartbeat: supervision.heartbeat,
    previousProgress: supervision.previousProgress,
    agent: (provider?: string) => {
      const name = provider ?? input.agent ?? defaultAgentName();
      const factory = agents[name];
      if (!factory) {
        throw ApplicationFailure.nonRetryable(`unknown agent provider "${name}" (available: ${Object.keys(agents).join(', ')})`, 'UnknownAgent');
      }
      const agentContext = { itemId: input.itemId, stage: input.stage, attempt: input.attempt, input: input.input, config: input.config };
      return recordingAgent(factory(agentContext), { calls, conversations: new ConversationStore(blobs) });
    },
  };
}

/**
 * Runs an implementation under the activity's supervision: heartbeats so that cancellation (attempt
 * timeout, item cancelled) reaches it, and stops waiting for it as soon as cancellation arrives. Model
 * calls are collected in `calls`; they ride on heartbeats so a retried execution still reports the calls
 * of the executions before it, and on the failure when the activity gives up.
 */
/** What supervision gives an activity body: cancellation, the call log, and progress heartbeats. */
interface Supervision {
  signal: AbortSignal;
  calls: CallRecord[];
  /** What the previous execution of this activity last reported with `heartbeat(details)`. */
  previousProgress: unknown;
  heartbeat(details?: unknown): void;
}

async function supervise<T>(run: (supervision: Supervision) => Promise<T>): Promise<T> {
  const context = Context.current();
  const previous = context.info.heartbeatDetails as { calls?: unknown; progress?: unknown } | undefined;
  const calls: CallRecord[] = callsFromHeartbeat(previous);
  let progress: unknown = previous?.progress;
  const beatNow = (): void => context.heartbeat({ calls, progress });
  const supervision: Supervision = {
    signal: context.cancellationSignal,
    calls,
    previousProgress: previous?.progress,
    heartbeat: (details?: unknown) => {
      if (details !== undefined) progress = details;
      beatNow();
    },
  };
  const timeout = context.info.heartbeatTimeoutMs;
  const every = Math.min(MAX_HEARTBEAT_INTERVAL_MS, timeout ? Math.max(100, Math.floor(timeout / 3)) : MAX_HEARTBEAT_INTERVAL_MS);
  const beat = setInterval(beatNow, every);
  try {
    return await Promise.race([run(supervision), context.cancelled]);
  } catch (error) {
    beatNow();
    if (error instanceof CancelledFailure || !(error instanceof Error)) throw error;
    // Every failure carries the calls made so far, so the workflow can log them when Temporal gives up.
    const failure = error instanceof ApplicationFailure ? error : undefined;
    throw ApplicationFailure.create({
      message: error.message,
      type: failure?.type ?? error.name,
      nonRetryable: failure?.nonRetryable === true,
      details: [{ calls }],
      ...(failure?.nextRetryDelay ? { nextRetryDelay: failure.nextRetryDelay } : {}),
      cause: error,
    });
  } finally {
    clearInterval(beat);
  }
}

function callsFromHeartbeat(details: { calls?: unknown } | undefined): CallRecord[] {
  const calls = details?.calls;
  if (!Array.isArray(calls)) return [];
  return calls.filter((c) => CallRecordSchema.safeParse(c).success) as CallRecord[];
}

function invalidResult(what: string, issues: { path: PropertyKey[]; message: string }[]): ApplicationFailure {
  const first = issues.slice(0, 3).map((i) => `${i.path.map(String).join('.') || 'result'}: ${i.message}`);
  return ApplicationFailure.nonRetryable(`${what} returned an invalid result: ${first.join('; ')}`, 'InvalidImplementationResult');
}
