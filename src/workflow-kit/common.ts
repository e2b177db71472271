/**
 * Helpers every Treadle workflow uses (work items, TDD nodes, and the stage kinds to come): workflow-safe,
 * no activities, no zod.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  CancelledFailure,
  ChildWorkflowFailure,
  TimeoutFailure,
} from '@temporalio/workflow';
import { DEFAULT_EVENT_PAGE, type CallBatch, type StateQueryArgs, type WorkItemState } from '../model/state';
import { callBatchOf } from '../engine/usage';
import type { QualityFeedback } from '../model/shapes';
import type { ActivitySettings, StageSpec } from '../model/pipeline';
import type { Artefact, EventType, Json, TreadleEvent, UsageTotals } from '../model/shapes';

/** Workflow time (deterministic: the SDK replaces `Date` in workflow code). */
export function now(): string {
  return new Date().toISOString();
}

/** The events after `eventsAfter`, at most `eventLimit` of them (seq is the index + 1, so a page is a slice). */
export function eventPage(events: TreadleEvent[], args: StateQueryArgs | undefined): TreadleEvent[] {
  const after = Math.max(0, Math.floor(Number(args?.eventsAfter ?? 0)) || 0);
  const limit = Math.max(1, Math.floor(Number(args?.eventLimit ?? DEFAULT_EVENT_PAGE)) || DEFAULT_EVENT_PAGE);
  return events.slice(after, after + limit);
}

/**
 * What went wrong, for users. ActivityFailure and ChildWorkflowFailure only say which activity or child
 * failed; the message users need is their cause's (the failure the implementation threw), not anything
 * deeper, which would be a provider's raw error.
 */
export function describeFailure(error: unknown): string {
  let cause: unknown = error;
  while ((cause instanceof ActivityFailure || cause instanceof ChildWorkflowFailure) && cause.cause)
    cause = cause.cause;
  return cause instanceof Error ? cause.message : String(error);
}

/**
 * The model calls a failure reports (a batch, or an array of records in older histories), or undefined:
 * - an activity's: supervision puts `{ calls }` in the details of every failure and of the cancellation it
 *   acknowledges, and on every heartbeat, which is all that is left of an activity whose worker died (a
 *   heartbeat timeout);
 * - a stage kind's (a TDD tree, a loop, a fan-out), thrown by it or by its child workflow: `{ calls: { usage } }`.
 */
export function callsReported(error: unknown): unknown {
  if (error instanceof ActivityFailure && error.cause instanceof TimeoutFailure)
    return detailsIn(error.cause.lastHeartbeatDetails)?.calls; // the first detail
  return failureDetails(error, true)?.calls;
}

/** The totals of the model calls a failure reports ({@link callsReported}), or undefined. */
export function usageReported(error: unknown): UsageTotals | undefined {
  return callBatchOf(callsReported(error))?.usage;
}

/**
 * A stage kind's totals as a result or a failure carries them, `{ calls: { usage } }` (a batch without
 * records), or nothing when it made no calls.
 */
export function usageBatch(usage: UsageTotals | undefined): { calls?: CallBatch } {
  return usage && usage.calls > 0 ? { calls: { usage } } : {};
}

/** A stage kind's failure for good, with the totals of its model calls in its details, where {@link callsReported} reads them. */
export function failureWithUsage(
  message: string,
  type: string,
  usage: UsageTotals | undefined,
  cause?: Error,
): ApplicationFailure {
  const batch = usageBatch(usage);
  return ApplicationFailure.create({
    message,
    type,
    nonRetryable: true,
    ...(cause ? { cause } : {}),
    ...(batch.calls ? { details: [batch] } : {}),
  });
}

/**
 * What a failed or cancelled activity's dispatcher reported: `{ calls, previousLog? }`; with `stageKinds`,
 * also what a stage kind's failure carries, thrown directly or by a child workflow.
 */
export function failureDetails(
  error: unknown,
  stageKinds: boolean,
): { calls?: unknown; previousLog?: unknown } | undefined {
  const cause =
    error instanceof ActivityFailure || (stageKinds && error instanceof ChildWorkflowFailure)
      ? error.cause
      : stageKinds
        ? error
        : undefined;
  return detailsIn(
    cause instanceof ApplicationFailure || cause instanceof CancelledFailure ? cause.details?.[0] : undefined,
  );
}

/**
 * The failure a failed work item or TDD node ends its workflow with (engine 6): non-retryable, its message
 * Treadle's summary and its first detail the result, which {@link resultOfFailure} reads back.
 */
export function failureCarrying(type: string, message: string, result: unknown): ApplicationFailure {
  return ApplicationFailure.create({ type, message, nonRetryable: true, details: [result] });
}

/**
 * The result a child workflow failed with (engine 6): the first detail of its `type` failure, or undefined
 * for any other failure. Parents read a failed child's result from here as they read a returned one.
 */
export function resultOfFailure<T>(error: unknown, type: string): T | undefined {
  const cause = error instanceof ChildWorkflowFailure ? error.cause : error;
  return cause instanceof ApplicationFailure && cause.type === type ? (cause.details?.[0] as T | undefined) : undefined;
}

/** A heartbeat's or a failure's first detail, when it is an object. */
function detailsIn(detail: unknown): { calls?: unknown; previousLog?: unknown } | undefined {
  return typeof detail === 'object' && detail !== null
    ? (detail as { calls?: unknown; previousLog?: unknown })
    : undefined;
}

/** A stage's activity settings as Temporal's retry policy; `nonRetryable` adds error types retrying cannot help. */
export function retryPolicyOf(activity: ActivitySettings, nonRetryable: readonly string[] = []) {
  return {
    maximumAttempts: activity.retry.maximumAttempts,
    initialInterval: activity.retry.initialIntervalMs,
    backoffCoefficient: activity.retry.backoffCoefficient,
    maximumInterval: activity.retry.maximumIntervalMs,
    nonRetryableErrorTypes: [...nonRetryable, ...activity.retry.nonRetryableErrorTypes],
  };
}

/** What a stage kind run inside the work item (approval, fan_out) needs of it for one attempt. */
export interface StageKindRun {
  itemId: string;
  pipeline: string;
  stage: StageSpec;
  attempt: number;
  input: Json;
  upstream: Record<string, Artefact>;
  state: WorkItemState;
  emit: (type: EventType, message: string, fields?: Partial<TreadleEvent>) => void;
  /** Wakes the work item's main loop, which publishes status, listings and details. */
  touch: () => void;
  /** The gate's feedback on the previous attempt (null on a first attempt). */
  feedback?: QualityFeedback | null;
  /** The item's engine publishes decisions (engine 7): its child loops are asked to list their failures. */
  publishesDecisions?: boolean;
  /**
   * The item announces its decisions to webhooks (engine 8 with a notifications file, see notify/announce.ts): a kind
   * whose stage waits on a person announces through `announceQuietly` only then.
   */
  announces?: boolean;
}
