/**
 * The audit view of a run (seed 003 "Audit Log"): its steps, attempts, reviews, approvals and model calls in
 * order, read from the workflow history — the durable record, which needs no worker and outlives the run —
 * not from a copy kept elsewhere. A correlation id names the run and the fan-out elements that share it.
 */
import type { Client } from '@temporalio/client';
import { defaultPayloadConverter, WorkflowNotFoundError } from '@temporalio/common';
import type { temporal } from '@temporalio/proto';
import { TreadleCorrelationId } from '../model/search-attributes';
import type { RecordedDecisionArg } from '../model/decisions';
import type { ForkOrigin, StoredCalls } from '../model/state';
import { forksOf } from './fork';
import { GRPC_NOT_FOUND } from './errors';
import type { BlobStore } from '../storage/blob-store';
import {
  contractCall,
  contractLine,
  label,
  modelCalls,
  stepLabel,
  where,
  withStoredCalls,
  type Activity,
  type ContractCallLabel,
  type Entry,
} from './audit-lines';

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;
type Payload = temporal.api.common.v1.IPayload;

/** One line of the audit: when, which run, what kind of entry, and what happened. */
export interface AuditEntry {
  at: string;
  workflowId: string;
  kind: 'run' | 'step' | 'model_call' | 'review' | 'approval' | 'child';
  /** The step (stage) it concerns, when it concerns one. */
  step?: string;
  attempt?: number;
  message: string;
  /**
   * On a `model_call` line that stands for an activity's calls whose records are in the blob store and were
   * not read (no store given, or the blob is missing): where they are. `audit` with a store lists them instead.
   */
  stored?: StoredCalls;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The workflow ids an audit covers: the run itself, or every run with that correlation id. */
export async function auditTargets(client: Client, idOrCorrelation: string): Promise<string[]> {
  if (!UUID.test(idOrCorrelation)) return [idOrCorrelation];
  const ids: string[] = [];
  for await (const execution of client.workflow.list({ query: `${TreadleCorrelationId.name} = '${idOrCorrelation}'` }))
    ids.push(execution.workflowId);
  if (ids.length === 0) throw new Error(`no run has correlation id ${idOrCorrelation}`);
  return ids.sort();
}

/**
 * The audit of the runs, merged in time order. Model calls whose records an activity put in the blob store
 * (it made more than travel inline) are read from `blobs`, one line per call, like the inline ones.
 */
export async function audit(client: Client, idOrCorrelation: string, blobs?: BlobStore): Promise<AuditEntry[]> {
  const entries: AuditEntry[] = [];
  for (const workflowId of await auditTargets(client, idOrCorrelation)) {
    const history = await historyOf(client, workflowId);
    entries.push(...(await withStoredCalls(auditHistory(workflowId, history.events ?? []), blobs)));
  }
  // The other half of a run's lineage: the forks made of it (its history, closed, cannot name them). One listing,
  // for a run named by id; a correlation id's fan-out elements are not forked on their own.
  if (!UUID.test(idOrCorrelation))
    for (const fork of await forksOf(client, idOrCorrelation))
      entries.push({
        at: fork.startedAt,
        workflowId: idOrCorrelation,
        kind: 'run',
        message: `forked as ${fork.id}, which runs again from ${fork.from} (${fork.status.toLowerCase()})`,
      });
  // Stable: entries of one history keep their order when times tie.
  return entries
    .map((e, i) => ({ e, i }))
    .sort((a, b) => a.e.at.localeCompare(b.e.at) || a.i - b.i)
    .map(({ e }) => e);
}

/** A run's history; an id the server has no run of is a {@link WorkflowNotFoundError}, not a raw gRPC error. */
async function historyOf(client: Client, workflowId: string) {
  try {
    return await client.workflow.getHandle(workflowId).fetchHistory();
  } catch (error) {
    const e = error as { code?: unknown; cause?: { code?: unknown } };
    if (e.code === GRPC_NOT_FOUND || e.cause?.code === GRPC_NOT_FOUND) {
      const message = `no work item ${workflowId} in namespace ${client.options.namespace}`;
      throw new WorkflowNotFoundError(message, workflowId, undefined);
    }
    throw error;
  }
}

/** The audit entries one history holds. */
export function auditHistory(workflowId: string, events: HistoryEvent[]): AuditEntry[] {
  const out: AuditEntry[] = [];
  const scheduled = new Map<string, Activity>();
  // The step and attempt of each approval request seen so far: a decision names only the request.
  const approvalSteps: ApprovalSteps = new Map();
  // Contracts of a stage run one after another: an older history's later calls belong to the last one named.
  let lastContract: ContractCallLabel | undefined;
  const add = (event: HistoryEvent, entry: Entry): void => {
    out.push({ at: timeOf(event), workflowId, ...entry });
  };
  for (const event of events) {
    const started = event.workflowExecutionStartedEventAttributes;
    if (started) {
      for (const entry of runStarted(started)) add(event, entry);
      continue;
    }
    const scheduledAttrs = event.activityTaskScheduledEventAttributes;
    if (scheduledAttrs) {
      const activity = scheduledActivity(event, scheduledAttrs, lastContract);
      if (activity.contract) lastContract = activity.contract;
      scheduled.set(String(event.eventId), activity);
      continue;
    }
    const completed = event.activityTaskCompletedEventAttributes;
    if (completed) {
      const activity = scheduled.get(String(completed.scheduledEventId));
      const result = decode(completed.result?.payloads?.[0]);
      if (activity) auditActivityResult(activity, result, (entry) => add(event, entry), approvalSteps);
      continue;
    }
    const ended = activityEnd(event, (scheduledEventId) => scheduled.get(String(scheduledEventId)));
    if (ended) {
      for (const entry of ended) add(event, entry);
      continue;
    }
    const accepted = event.workflowExecutionUpdateAcceptedEventAttributes;
    if (accepted) {
      const name = accepted.acceptedRequest?.input?.name;
      const arg = decode(accepted.acceptedRequest?.input?.args?.payloads?.[0]);
      if (name) add(event, decision(name, arg, 'update', approvalSteps));
      continue;
    }
    const signaled = event.workflowExecutionSignaledEventAttributes;
    if (signaled && (signaled.signalName === 'review' || signaled.signalName === 'approval')) {
      const name = signaled.signalName === 'review' ? 'resolveReview' : 'decideApproval';
      add(event, decision(name, decode(signaled.input?.payloads?.[0]), 'signal', approvalSteps));
      continue;
    }
    const other = childEntry(event) ?? runEnd(event);
    if (other) add(event, other);
  }
  return out;
}

/** The run's first entry: its workflow type, pipeline and correlation id. */
function runStarted(started: NonNullable<HistoryEvent['workflowExecutionStartedEventAttributes']>): Entry[] {
  const input = decode(started.input?.payloads?.[0]) as
    { pipelineName?: string; pipeline?: { name?: string }; correlationId?: string; fork?: ForkOrigin } | undefined;
  const name = input?.pipelineName ?? input?.pipeline?.name ?? started.workflowType?.name ?? '?';
  const start: Entry = {
    kind: 'run',
    message: `started: ${started.workflowType?.name} of pipeline ${name}${input?.correlationId ? ` (correlation ${input.correlationId})` : ''}`,
  };
  const fork = input?.fork;
  if (fork === undefined) return [start];
  // A fork's lineage: its original, and the stages it took from it instead of running them.
  const carried = Object.keys(fork.carried);
  return [
    start,
    {
      kind: 'run',
      message: `forked from ${fork.of}: runs again from ${fork.from}; carries ${carried.join(', ') || 'no stage'}`,
    },
    ...carried.map((step): Entry => ({
      kind: 'step',
      step,
      message: `carried from ${fork.of} as it ended there (not run again)`,
    })),
  ];
}

/**
 * A scheduled activity with the step (and attempt) it serves, read from its summary (`<step> · … attempt N`)
 * or its input; a contract call names its contract, or inherits `lastContract` in an older history.
 */
function scheduledActivity(
  event: HistoryEvent,
  attrs: NonNullable<HistoryEvent['activityTaskScheduledEventAttributes']>,
  lastContract: ContractCallLabel | undefined,
): Activity {
  const summary = text(decode(event.userMetadata?.summary));
  const type = attrs.activityType?.name ?? '?';
  const input = decode(attrs.input?.payloads?.[0]) as { stage?: string; attempt?: number; step?: string } | undefined;
  const contract = contractCall(type, summary, input, lastContract);
  const match = summary !== undefined ? /^(.+?) · .*?attempt (\d+)/.exec(summary) : null;
  return {
    type,
    ...(contract
      ? { step: contract.stage, contract }
      : match
        ? { step: match[1]!, attempt: Number(match[2]) }
        : input?.stage
          ? { step: input.stage, ...(input.attempt ? { attempt: input.attempt } : {}) }
          : input?.step
            ? { step: input.step, ...(input.attempt ? { attempt: input.attempt } : {}) }
            : {}),
    input,
  };
}

/**
 * An activity that failed, timed out or was cancelled: the model calls it reported (in its failure details,
 * last heartbeat or cancellation details) and the step entry; undefined for any other event.
 */
function activityEnd(
  event: HistoryEvent,
  activityOf: (scheduledEventId: unknown) => Activity | undefined,
): Entry[] | undefined {
  const ending = (activity: Activity | undefined, reported: unknown, outcome: string): Entry[] => [
    ...modelCalls(activity, (reported as { calls?: unknown } | undefined)?.calls),
    { kind: 'step', ...where(activity), message: `${label(activity)} ${outcome}` },
  ];
  const failed = event.activityTaskFailedEventAttributes;
  if (failed) {
    const details = decode(failed.failure?.applicationFailureInfo?.details?.payloads?.[0]);
    return ending(activityOf(failed.scheduledEventId), details, `failed: ${failed.failure?.message ?? '?'}`);
  }
  const timedOut = event.activityTaskTimedOutEventAttributes;
  if (timedOut) {
    // What its last heartbeat reported: all that is left of the calls of an activity whose worker died.
    const beat = decode(timedOut.failure?.timeoutFailureInfo?.lastHeartbeatDetails?.payloads?.[0]);
    return ending(activityOf(timedOut.scheduledEventId), beat, `timed out: ${timedOut.failure?.message ?? '?'}`);
  }
  const canceled = event.activityTaskCanceledEventAttributes;
  if (canceled) {
    const details = decode(canceled.details?.payloads?.[0]);
    return ending(activityOf(canceled.scheduledEventId), details, 'cancelled');
  }
  return undefined;
}

/** A child workflow started or ended, or undefined for any other event. */
function childEntry(event: HistoryEvent): Entry | undefined {
  const child = event.startChildWorkflowExecutionInitiatedEventAttributes;
  if (child) return { kind: 'child', message: `child ${child.workflowType?.name} ${child.workflowId} started` };
  const childDone =
    event.childWorkflowExecutionCompletedEventAttributes ?? event.childWorkflowExecutionFailedEventAttributes;
  if (!childDone) return undefined;
  const result = decode(event.childWorkflowExecutionCompletedEventAttributes?.result?.payloads?.[0]) as
    { status?: string } | undefined;
  return {
    kind: 'child',
    message: `child ${childDone.workflowExecution?.workflowId} ${event.childWorkflowExecutionFailedEventAttributes ? 'failed' : (result?.status ?? 'completed')}`,
  };
}

/** How the run ended (finished with its status, failed, cancelled, terminated), or undefined for any other event. */
function runEnd(event: HistoryEvent): Entry | undefined {
  const done = event.workflowExecutionCompletedEventAttributes;
  if (done) {
    const result = decode(done.result?.payloads?.[0]) as { status?: string; error?: string } | undefined;
    return {
      kind: 'run',
      message: `finished: ${result?.status ?? 'completed'}${result?.error ? ` (${result.error})` : ''}`,
    };
  }
  if (event.workflowExecutionFailedEventAttributes)
    return { kind: 'run', message: `failed: ${event.workflowExecutionFailedEventAttributes.failure?.message ?? '?'}` };
  if (event.workflowExecutionCanceledEventAttributes) return { kind: 'run', message: 'cancelled' };
  if (event.workflowExecutionTerminatedEventAttributes)
    return { kind: 'run', message: `terminated: ${event.workflowExecutionTerminatedEventAttributes.reason ?? ''}` };
  return undefined;
}

/** A scheduled activity: its type, the step (and attempt) it serves, its input, and for contract calls which. */
/** Where each approval request was made: its step and attempt, by request id. */
type ApprovalSteps = Map<string, Pick<AuditEntry, 'step' | 'attempt'>>;

function auditActivityResult(
  activity: Activity,
  result: unknown,
  add: (entry: Entry) => void,
  approvalSteps: ApprovalSteps,
): void {
  const r = (result ?? {}) as Record<string, unknown>;
  for (const entry of modelCalls(activity, r.calls)) add(entry);
  for (const entry of refusalLines(activity, r.refusals)) add(entry);
  if (activity.contract) {
    add(contractLine(activity, activity.contract, r));
    return;
  }
  switch (activity.type) {
    case 'treadle.approvalCreate':
      approvalCreateLines(activity, r, add, approvalSteps);
      return;
    case 'treadle.storeArtefact': {
      // The approval step stores its outcome last (its summary says so); other kinds' stores are plumbing.
      const input = activity.input as { summary?: string } | undefined;
      if (activity.step === undefined) return;
      const message = `${stepLabel(activity, 'approval')} completed: ${input?.summary ?? ''}`;
      add({ kind: 'step', ...where(activity), message });
      return;
    }
    case 'treadle.approvalExecute': {
      const input = activity.input as { id?: string } | undefined;
      add({
        kind: 'approval',
        ...where(activity),
        message: `${input?.id ?? '?'} executed: ${String(r.summary ?? '')}`,
      });
      return;
    }
    case 'treadle.fanOutPrepare':
      add({
        kind: 'step',
        ...where(activity),
        message:
          r.ok === false
            ? `fan-out refused: ${(r.problems as string[] | undefined)?.join('; ')}`
            : `fans out over ${Array.isArray(r.elements) ? r.elements.length : '?'} elements`,
      });
      return;
    case 'treadle.preparePipeline':
      add({
        kind: 'run',
        message:
          r.ok === false
            ? `pipeline refused: ${(r.problems as string[] | undefined)?.join('; ')}`
            : 'pipeline validated',
      });
      return;
    default:
      add(stepLine(activity, r));
  }
}

/** An approval step's requests: a line for the step, and one per request (remembered for its decision's line). */
function approvalCreateLines(
  activity: Activity,
  r: Record<string, unknown>,
  add: (entry: Entry) => void,
  approvalSteps: ApprovalSteps,
): void {
  const requests = Array.isArray(r.requests)
    ? (r.requests as { id: string; actionType: string; summary: string }[])
    : [];
  const step = stepLabel(activity, 'approval');
  const made = `${requests.length} request${requests.length === 1 ? '' : 's'} made, waiting for decisions`;
  const refused = `approval requests refused: ${(r.problems as string[] | undefined)?.join('; ')}`;
  const message = r.ok === false ? `${step} failed: ${refused}` : `${step}: ${made}`;
  add({ kind: 'step', ...where(activity), message });
  for (const request of requests) {
    approvalSteps.set(request.id, where(activity));
    const message = `${request.id} requested: ${request.actionType}: ${request.summary}`;
    add({ kind: 'approval', ...where(activity), message });
  }
}

/** A gate's verdict, a failed attempt's rejection, or a step's outcome: the line of any other activity. */
function stepLine(activity: Activity, r: Record<string, unknown>): Entry {
  if (activity.type.startsWith('gate:')) {
    const kind = typeof r.kind === 'string' ? r.kind : '?';
    return {
      kind: 'step',
      ...where(activity),
      message: `gate ${activity.type.slice(5)}: ${kind}${kind === 'rejected' ? `: ${String((r.feedback as { summary?: string } | undefined)?.summary ?? '')}` : kind === 'uncertain' ? `: ${String(r.reason ?? '')}` : ''}`,
    };
  }
  if (r.rejection !== undefined && r.rejection !== null) {
    // The attempt's own verdict (an llm reply that failed its output_schema): a failed attempt.
    const reason = (r.rejection as { summary?: unknown }).summary;
    const why = typeof reason === 'string' ? reason : 'its output was rejected';
    const message = `${label(activity)} failed: ${why}${typeof r.summary === 'string' ? ` (${r.summary})` : ''}`;
    return { kind: 'step', ...where(activity), message };
  }
  return {
    kind: 'step',
    ...where(activity),
    message: `${label(activity)} ${String(r.outcome ?? 'completed')}${typeof r.summary === 'string' ? `: ${r.summary}` : ''}`,
  };
}

/**
 * What a TDD node call refused its agent (a path outside the worktree, a read-only file, children past the
 * tree's limits), one line each as the call reported them (the first few, cut), and a line for the rest.
 */
function refusalLines(activity: Activity, raw: unknown): Omit<AuditEntry, 'at' | 'workflowId'>[] {
  const refusals = raw as { count?: unknown; texts?: unknown } | undefined;
  if (!refusals || !Array.isArray(refusals.texts)) return [];
  const input = activity.input as { nodePath?: string; node?: string } | undefined;
  const at = input?.node ? { step: input.node } : where(activity);
  const who = input?.node ? `${input.nodePath ?? '?'} ${input.node}` : label(activity);
  const lines = refusals.texts.map((t) => ({ kind: 'step' as const, ...at, message: `${who} refused: ${String(t)}` }));
  const rest = typeof refusals.count === 'number' ? refusals.count - refusals.texts.length : 0;
  if (rest > 0) lines.push({ kind: 'step', ...at, message: `${who} refused ${rest} more (not listed)` });
  return lines;
}

function decision(name: string, arg: unknown, via: 'update' | 'signal', approvalSteps: ApprovalSteps): Entry {
  const a = (arg ?? {}) as RecordedDecisionArg & { action?: string };
  // The reviewer group the inbox answered in, beside the name: "by alice (group legal)".
  const inGroup = typeof a.group === 'string' && a.group !== '' ? ` (group ${a.group})` : '';
  if (name === 'decideApproval') {
    const decided = a.decision === 'approve' ? 'approved' : a.decision === 'reject' ? 'rejected' : a.decision;
    const message = `${a.id} ${decided} by ${a.by ?? 'anonymous'}${inGroup}${a.reason ? `: ${a.reason}` : ''} (${via})`;
    return { kind: 'approval', ...approvalSteps.get(String(a.id)), message };
  }
  if (name === 'resolveReview')
    return {
      kind: 'review',
      ...(a.stage ? { step: a.stage } : {}),
      message: `review of ${a.stage}: ${a.outcome?.kind} by ${a.reviewer ?? 'anonymous'}${inGroup}${a.outcome?.reason ? `: ${a.outcome.reason}` : ''} (${via})`,
    };
  if (name === 'resumeLoop') {
    const done = a.action === 'abandon' ? 'abandoned' : 'resumed';
    return {
      kind: 'review',
      message: `loop ${done} by ${a.by ?? 'anonymous'}${a.reason ? `: ${a.reason}` : ''} (${via})`,
    };
  }
  return { kind: 'run', message: `${name} (${via})` };
}

function decode(payload: Payload | null | undefined): unknown {
  if (!payload) return undefined;
  try {
    return defaultPayloadConverter.fromPayload(payload as Parameters<typeof defaultPayloadConverter.fromPayload>[0]);
  } catch {
    return undefined; // stored externally (a claim-check reference) or not JSON: the audit says what it can
  }
}

function text(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

function timeOf(event: HistoryEvent): string {
  const t = event.eventTime;
  if (!t) return '';
  return new Date(Number(t.seconds ?? 0) * 1000 + Math.floor((t.nanos ?? 0) / 1e6)).toISOString();
}
