/**
 * Builds the worker's activities from a {@link Registry}: one activity per stage implementation (type =
 * its name) and per gate (`gate:<name>`), plus Treadle's own. Each activity resolves blob references
 * before calling the implementation, offloads large artefacts after, validates what the implementation
 * returned, heartbeats while it runs, and aborts it when the attempt is cancelled.
 */
import { Context, log as activityLog } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { DEFAULT_BLOB_THRESHOLD_BYTES, offloadArtefact, resolveArtefact, type BlobStore } from './blob-store';
import type { GateContext, ImplementationContext, Registry, StageContext } from './registry';
import { QualityVerdictSchema, StageOutputSchema, type Json } from '../model/shapes';
import type {
  ActivityContextBase,
  CheckImplementationsInput,
  CheckImplementationsResult,
  GateActivityInput,
  GateActivityResult,
  StageActivityInput,
  StageActivityResult,
} from '../model/state';
import { CHECK_IMPLEMENTATIONS_ACTIVITY, gateActivityType } from '../model/activity-types';

/** What activities need; tests pass their own. */
export interface ActivityDependencies {
  registry: Registry;
  blobs: BlobStore;
  /** Artefacts whose JSON is larger go to the blob store. */
  blobThresholdBytes?: number;
}

/** Heartbeat at most this often, and at least three times per heartbeat timeout. */
const MAX_HEARTBEAT_INTERVAL_MS = 5_000;

type Activity = (input: never) => Promise<unknown>;

/** The activity functions to register on a worker, keyed by activity type. */
export function createActivities(deps: ActivityDependencies): Record<string, Activity> {
  const threshold = deps.blobThresholdBytes ?? DEFAULT_BLOB_THRESHOLD_BYTES;
  const activities: Record<string, Activity> = {};
  const names = deps.registry.names();

  activities[CHECK_IMPLEMENTATIONS_ACTIVITY] = async (input: CheckImplementationsInput): Promise<CheckImplementationsResult> => {
    const problems = [
      ...input.stages.filter((n) => !names.stages.includes(n)).map((n) => `unknown stage implementation "${n}" (registered: ${names.stages.join(', ')})`),
      ...input.gates.filter((n) => !names.gates.includes(n)).map((n) => `unknown gate implementation "${n}" (registered: ${names.gates.join(', ')})`),
    ];
    return { problems };
  };

  for (const name of names.stages) {
    const impl = deps.registry.getStage(name)!;
    activities[name] = async (input: StageActivityInput): Promise<StageActivityResult> =>
      supervise(async (signal) => {
        const ctx: StageContext = { ...(await baseContext(input, deps.blobs, signal)), feedback: input.feedback };
        const parsed = StageOutputSchema.safeParse(await impl(ctx));
        if (!parsed.success) throw invalidResult(`stage implementation "${name}"`, parsed.error.issues);
        const output = parsed.data;
        const artefact = await offloadArtefact(output.artefact, deps.blobs, threshold, output.summary);
        return { outcome: output.outcome, ...(artefact !== undefined ? { artefact } : {}), ...(output.summary !== undefined ? { summary: output.summary } : {}) };
      });
  }

  for (const name of names.gates) {
    const impl = deps.registry.getGate(name)!;
    activities[gateActivityType(name)] = async (input: GateActivityInput): Promise<GateActivityResult> =>
      supervise(async (signal) => {
        const artefact = await resolveArtefact(input.output.artefact, deps.blobs);
        const ctx: GateContext = {
          ...(await baseContext(input, deps.blobs, signal)),
          output: { ...input.output, ...(artefact !== undefined ? { artefact } : {}) },
        };
        const parsed = QualityVerdictSchema.safeParse(await impl(ctx));
        if (!parsed.success) throw invalidResult(`gate implementation "${name}"`, parsed.error.issues);
        return parsed.data;
      });
  }
  return activities;
}

async function baseContext(input: ActivityContextBase, blobs: BlobStore, signal: AbortSignal): Promise<ImplementationContext> {
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
    heartbeat: (details?: unknown) => context.heartbeat(details),
  };
}

/**
 * Runs an implementation under the activity's supervision: heartbeats so that cancellation (attempt
 * timeout, item cancelled) reaches it, and stops waiting for it as soon as cancellation arrives.
 */
async function supervise<T>(run: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const context = Context.current();
  const timeout = context.info.heartbeatTimeoutMs;
  const every = Math.min(MAX_HEARTBEAT_INTERVAL_MS, timeout ? Math.max(100, Math.floor(timeout / 3)) : MAX_HEARTBEAT_INTERVAL_MS);
  const beat = setInterval(() => context.heartbeat(), every);
  try {
    return await Promise.race([run(context.cancellationSignal), context.cancelled]);
  } finally {
    clearInterval(beat);
  }
}

function invalidResult(what: string, issues: { path: PropertyKey[]; message: string }[]): ApplicationFailure {
  const first = issues.slice(0, 3).map((i) => `${i.path.map(String).join('.') || 'result'}: ${i.message}`);
  return ApplicationFailure.nonRetryable(`${what} returned an invalid result: ${first.join('; ')}`, 'InvalidImplementationResult');
}
