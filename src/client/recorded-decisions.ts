/**
 * How a decision was made, read from what Temporal keeps without a worker: the workflow's memo says whether it
 * still waits, and its history records each accepted `resolveReview` or `decideApproval` update and each `review`
 * or `approval` signal. A late answer that no worker can refuse is thus told who decided first.
 */
import type { Client, WorkflowExecutionDescription } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import type { temporal } from '@temporalio/proto';
import { REVIEWS_MEMO_KEY } from '../model/search-attributes';
import type { RecordedDecisionArg } from '../model/decisions';
import type { ReviewsMemo } from '../model/state';
import { APPROVALS_MEMO_KEY, type ApprovalsMemo } from '../kinds/approval/shapes';

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;
type Payload = temporal.api.common.v1.IPayload;

/** A decision as the history records it. */
export interface RecordedDecision {
  /** Who decided (the reviewer, the approver). */
  by?: string;
  /** The reviewer group they decided in, when the inbox recorded one. */
  group?: string;
  /** What they decided: approve, reject, approve_with_edits; approved, rejected. */
  outcome?: string;
  /** When the workflow took it (ISO 8601). */
  at: string;
  reason?: string;
}

/**
 * How the review of `stage` of workflow `workflowId` (a work item or TDD node) was decided, when its memo no longer
 * lists it as pending and its history records the decision (the last one for the stage); else undefined.
 * `description` saves a describe when the caller has one.
 */
export async function recordedReview(
  client: Client,
  workflowId: string,
  stage: string,
  description?: WorkflowExecutionDescription,
): Promise<RecordedDecision | undefined> {
  const handle = client.workflow.getHandle(workflowId);
  const memo = openMemo<ReviewsMemo>(description ?? (await handle.describe()), REVIEWS_MEMO_KEY);
  // Still listed, or maybe among the ones a long memo leaves out: nobody is known to have decided.
  if (memo && (memo.omitted > 0 || memo.reviews.some((r) => r.stage === stage))) return undefined;
  const decisions = decisionsIn((await handle.fetchHistory()).events ?? [], 'resolveReview', 'review');
  const last = decisions.filter(({ arg }) => arg.stage === stage).pop();
  if (!last) return undefined;
  const { arg, at } = last;
  return {
    at,
    ...(arg.reviewer !== undefined ? { by: arg.reviewer } : {}),
    ...(typeof arg.group === 'string' ? { group: arg.group } : {}),
    ...(arg.outcome?.kind !== undefined ? { outcome: arg.outcome.kind } : {}),
    ...(arg.outcome?.reason !== undefined ? { reason: arg.outcome.reason } : {}),
  };
}

/**
 * How approval request `requestId` of work item `itemId` was decided, when its memo no longer lists it as pending and
 * its history records the decision (the first one: later ones were refused); else undefined (an expiry is a timer,
 * not a decision).
 */
export async function recordedApproval(
  client: Client,
  itemId: string,
  requestId: string,
  description?: WorkflowExecutionDescription,
): Promise<RecordedDecision | undefined> {
  const handle = client.workflow.getHandle(itemId);
  const memo = openMemo<ApprovalsMemo>(description ?? (await handle.describe()), APPROVALS_MEMO_KEY);
  if (memo && (memo.omitted > 0 || memo.requests.some((r) => r.id === requestId))) return undefined;
  const decisions = decisionsIn((await handle.fetchHistory()).events ?? [], 'decideApproval', 'approval');
  const first = decisions.find(({ arg }) => arg.id === requestId);
  if (!first) return undefined;
  const { arg, at } = first;
  const outcome = arg.decision === 'approve' ? 'approved' : arg.decision === 'reject' ? 'rejected' : arg.decision;
  return {
    at,
    by: arg.by ?? 'anonymous',
    ...(typeof arg.group === 'string' ? { group: arg.group } : {}),
    ...(outcome !== undefined ? { outcome } : {}),
    ...(arg.reason !== undefined ? { reason: arg.reason } : {}),
  };
}

/**
 * The memo `key` of a running workflow, which lists what it still waits for; undefined for a closed one, whose last
 * memo may still list what it waited for when it ended.
 */
function openMemo<T>(description: WorkflowExecutionDescription, key: string): T | undefined {
  return description.status.name === 'RUNNING' ? (description.memo?.[key] as T | undefined) : undefined;
}

/** "approve by alice at …: why", as a message tells a recorded decision. */
export function describeDecision(decision: RecordedDecision): string {
  const by = decision.by !== undefined ? ` by ${decision.by}${decision.group ? ` (group ${decision.group})` : ''}` : '';
  const why = decision.reason ? `: ${decision.reason}` : '';
  return `${decision.outcome ?? 'decided'}${by} at ${decision.at}${why}`;
}

/** The decisions among `events`, oldest first: accepted `update`s and received `signal`s of these names. */
function decisionsIn(
  events: HistoryEvent[],
  update: string,
  signal: string,
): { arg: RecordedDecisionArg; at: string }[] {
  const out: { arg: RecordedDecisionArg; at: string }[] = [];
  for (const event of events) {
    const accepted = event.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.input;
    const signaled = event.workflowExecutionSignaledEventAttributes;
    const payload =
      accepted?.name === update
        ? accepted.args?.payloads?.[0]
        : signaled?.signalName === signal
          ? signaled.input?.payloads?.[0]
          : undefined;
    const arg = payload ? decode(payload) : undefined;
    if (arg) out.push({ arg, at: timeOf(event) });
  }
  return out;
}

function decode(payload: Payload): RecordedDecisionArg | undefined {
  const value = decodedPayload(payload);
  return typeof value === 'object' && value !== null ? (value as RecordedDecisionArg) : undefined;
}

/** A payload's value, or undefined when it is stored elsewhere (an external storage reference) or not JSON. */
export function decodedPayload(payload: Payload): unknown {
  try {
    return defaultPayloadConverter.fromPayload(payload as Parameters<typeof defaultPayloadConverter.fromPayload>[0]);
  } catch {
    return undefined;
  }
}

function timeOf(event: HistoryEvent): string {
  const seconds = Number(event.eventTime?.seconds ?? 0);
  const nanos = event.eventTime?.nanos ?? 0;
  return new Date(seconds * 1000 + Math.floor(nanos / 1e6)).toISOString();
}
