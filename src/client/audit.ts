/**
 * The audit view of a run (seed 003 "Audit Log"): its steps, attempts, reviews, approvals and model calls in
 * order, read from the workflow history — the durable record, which needs no worker and outlives the run —
 * not from a copy kept elsewhere. A correlation id names the run and the fan-out elements that share it.
 */
import type { Client } from '@temporalio/client';
import { defaultPayloadConverter, WorkflowNotFoundError } from '@temporalio/common';
import type { temporal } from '@temporalio/proto';
import { TreadleCorrelationId } from '../model/search-attributes';
import { callBatchOf } from '../engine/usage';
import type { RecordedDecisionArg } from '../model/decisions';
import type { CallRecord } from '../model/shapes';
import type { StoredCalls } from '../model/state';
import { readJson, type BlobStore } from '../storage/blob-store';

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
  // Stable: entries of one history keep their order when times tie.
  return entries
    .map((e, i) => ({ e, i }))
    .sort((a, b) => a.e.at.localeCompare(b.e.at) || a.i - b.i)
    .map(({ e }) => e);
}

/** gRPC's NOT_FOUND: the server's answer for a workflow id it has no run of. */
const GRPC_NOT_FOUND = 5;

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
      add(event, runStarted(started));
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
function runStarted(started: NonNullable<HistoryEvent['workflowExecutionStartedEventAttributes']>): Entry {
  const input = decode(started.input?.payloads?.[0]) as
    { pipelineName?: string; pipeline?: { name?: string }; correlationId?: string } | undefined;
  const name = input?.pipelineName ?? input?.pipeline?.name ?? started.workflowType?.name ?? '?';
  return {
    kind: 'run',
    message: `started: ${started.workflowType?.name} of pipeline ${name}${input?.correlationId ? ` (correlation ${input.correlationId})` : ''}`,
  };
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
type Activity = { type: string; step?: string; attempt?: number; input: unknown; contract?: ContractCallLabel };
type Entry = Omit<AuditEntry, 'at' | 'workflowId'>;

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
    case 'treadle.approvalCreate': {
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
      return;
    }
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
      if (activity.type.startsWith('gate:')) {
        const kind = typeof r.kind === 'string' ? r.kind : '?';
        add({
          kind: 'step',
          ...where(activity),
          message: `gate ${activity.type.slice(5)}: ${kind}${kind === 'rejected' ? `: ${String((r.feedback as { summary?: string } | undefined)?.summary ?? '')}` : kind === 'uncertain' ? `: ${String(r.reason ?? '')}` : ''}`,
        });
      } else if (r.rejection !== undefined && r.rejection !== null) {
        // The attempt's own verdict (an llm reply that failed its output_schema): a failed attempt.
        const reason = (r.rejection as { summary?: unknown }).summary;
        const why = typeof reason === 'string' ? reason : 'its output was rejected';
        const message = `${label(activity)} failed: ${why}${typeof r.summary === 'string' ? ` (${r.summary})` : ''}`;
        add({ kind: 'step', ...where(activity), message });
      } else {
        add({
          kind: 'step',
          ...where(activity),
          message: `${label(activity)} ${String(r.outcome ?? 'completed')}${typeof r.summary === 'string' ? `: ${r.summary}` : ''}`,
        });
      }
  }
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

/**
 * The lines for an activity's calls: one per inline record (batches, and the plain arrays of older
 * histories), and one for the records it stored, with their totals and reference, which `audit` replaces.
 */
function modelCalls(activity: Activity | undefined, raw: unknown): Omit<AuditEntry, 'at' | 'workflowId'>[] {
  const batch = callBatchOf(raw);
  if (!batch) return [];
  const lines = (batch.records ?? []).map((call) => modelCall(activity, call));
  const { usage } = batch;
  const unlisted = usage.calls - (batch.records?.length ?? 0);
  if (batch.stored) {
    lines.unshift({
      kind: 'model_call',
      ...where(activity),
      message: storedMessage(batch.stored, usage),
      stored: batch.stored,
    });
  } else if (unlisted > 0) {
    lines.push({
      kind: 'model_call',
      ...where(activity),
      message: `${unlisted} more model calls whose records were not stored (${usage.calls} in all: ${usage.inputTokens} in + ${usage.outputTokens} out tokens, ${usage.errors} errors)`,
    });
  }
  return lines;
}

function storedMessage(
  stored: StoredCalls,
  usage: { calls: number; inputTokens: number; outputTokens: number; errors: number },
): string {
  return `${stored.count} model calls, records in the blob store as ${stored.ref} (${usage.calls} in all: ${usage.inputTokens} in + ${usage.outputTokens} out tokens, ${usage.errors} errors)`;
}

/** The audit with every stored-calls line replaced by a line per call read from `blobs`; lines it cannot read stay. */
async function withStoredCalls(entries: AuditEntry[], blobs: BlobStore | undefined): Promise<AuditEntry[]> {
  if (!blobs || !entries.some((e) => e.stored)) return entries;
  const out: AuditEntry[] = [];
  for (const entry of entries) {
    if (!entry.stored) {
      out.push(entry);
      continue;
    }
    let records: CallRecord[];
    try {
      records = await readJson<CallRecord[]>(blobs, entry.stored.ref);
    } catch (error) {
      out.push({ ...entry, message: `${entry.message}; not readable: ${(error as Error).message}` });
      continue;
    }
    const { stored: _stored, ...base } = entry;
    for (const call of records) out.push({ ...base, message: modelCall(undefined, call).message });
  }
  return out;
}

function modelCall(activity: Activity | undefined, raw: unknown): Omit<AuditEntry, 'at' | 'workflowId'> {
  const c = (raw ?? {}) as {
    provider?: string;
    model?: string;
    inputTokens?: number;
    outputTokens?: number;
    latencyMs?: number;
    status?: string;
    error?: string;
    promptHash?: string;
  };
  return {
    kind: 'model_call',
    ...where(activity),
    message: `${c.provider}/${c.model}: ${c.status}${c.error ? ` (${c.error})` : ''}, ${c.inputTokens ?? 0} in + ${c.outputTokens ?? 0} out tokens, ${Math.round(c.latencyMs ?? 0)} ms, prompt ${String(c.promptHash ?? '').slice(0, 19)}`,
  };
}

function decision(name: string, arg: unknown, via: 'update' | 'signal', approvalSteps: ApprovalSteps): Entry {
  const a = (arg ?? {}) as RecordedDecisionArg & { action?: string };
  if (name === 'decideApproval') {
    const decided = a.decision === 'approve' ? 'approved' : a.decision === 'reject' ? 'rejected' : a.decision;
    const message = `${a.id} ${decided} by ${a.by ?? 'anonymous'}${a.reason ? `: ${a.reason}` : ''} (${via})`;
    return { kind: 'approval', ...approvalSteps.get(String(a.id)), message };
  }
  if (name === 'resolveReview')
    return {
      kind: 'review',
      ...(a.stage ? { step: a.stage } : {}),
      message: `review of ${a.stage}: ${a.outcome?.kind} by ${a.reviewer ?? 'anonymous'}${a.outcome?.reason ? `: ${a.outcome.reason}` : ''} (${via})`,
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

function where(activity: Activity | undefined): Pick<AuditEntry, 'step' | 'attempt'> {
  return {
    ...(activity?.step !== undefined ? { step: activity.step } : {}),
    ...(activity?.attempt !== undefined ? { attempt: activity.attempt } : {}),
  };
}

function label(activity: Activity | undefined): string {
  if (!activity) return 'activity';
  if (activity.contract) return contractLabel(activity.contract);
  return activity.step ? stepLabel(activity, activity.type) : activity.type;
}

/** `<step> attempt n (<what>)`: how a step's lines name it. */
function stepLabel(activity: Activity, what: string): string {
  return `${activity.step}${activity.attempt ? ` attempt ${activity.attempt}` : ''} (${what})`;
}

// ---------------------------------------------------------------------------------------------------------
// Contract rounds (seed 002): which contract and round a call served, and what the round counted.

/** Which contract call an activity is: the consuming stage, the edge when known, the round, and what it did. */
interface ContractCallLabel {
  stage: string;
  edge?: string;
  round: number;
  what: string;
}

const CONTRACT_ACTIVITIES: Record<string, string> = {
  'treadle.contractValidate': 'validate',
  'treadle.contractRevise': 'revise',
  'treadle.contractFinalize': 'finalize',
};

/**
 * The contract call behind a scheduled activity: from its summary (`<stage> · contract <from>→<to> · round n
 * · <what>`), or, in histories recorded before summaries, from its input (the consumer, the round, the edge
 * in round 0) and the last contract call before it.
 */
function contractCall(
  type: string,
  summary: string | undefined,
  input: unknown,
  last: ContractCallLabel | undefined,
): ContractCallLabel | undefined {
  const what = CONTRACT_ACTIVITIES[type];
  if (what === undefined) return undefined;
  const named = summary !== undefined ? /^(.+?) · contract (.+?) · round (\d+)(?: · (.+))?$/.exec(summary) : null;
  if (named) return { stage: named[1]!, edge: named[2]!, round: Number(named[3]), what: named[4] ?? what };
  const i = (input ?? {}) as {
    consumer?: unknown;
    round?: unknown;
    retries?: unknown;
    contract?: { from?: unknown; to?: unknown };
  };
  // Finalize's input names only the state and the rounds it took.
  if (typeof i.consumer !== 'string') {
    return last && typeof i.retries === 'number' ? { ...last, round: i.retries, what } : undefined;
  }
  const from = i.contract?.from;
  const sameStage = last?.stage === i.consumer ? last.edge : undefined;
  const edge = typeof from === 'string' ? `${from}→${String(i.contract?.to)}` : sameStage;
  const round = typeof i.round === 'number' ? i.round : 0;
  return { stage: i.consumer, ...(edge !== undefined ? { edge } : {}), round, what };
}

function contractLabel(c: ContractCallLabel): string {
  return `contract${c.edge ? ` ${c.edge}` : ''} round ${c.round}`;
}

/** A contract call's line: a round's counts (validated, accepted, rejected, revised), a revision, or the final list. */
function contractLine(activity: Activity, c: ContractCallLabel, r: Record<string, unknown>): Entry {
  const base = { kind: 'step' as const, ...where(activity) };
  switch (activity.type) {
    case 'treadle.contractValidate': {
      if (r.ok === false) {
        const problems = (r.problems as string[] | undefined)?.join('; ');
        return { ...base, message: `${contractLabel(c)}: the items cannot be validated: ${problems}` };
      }
      const revisions = (activity.input as { revisions?: { revisedRef: unknown }[] } | undefined)?.revisions;
      const made = Array.isArray(revisions) ? revisions.filter((x) => x.revisedRef !== null).length : undefined;
      const revised = made !== undefined ? `${made} revised, ` : '';
      const detail = typeof r.fallbackDetail === 'string' ? ` (${r.fallbackDetail})` : '';
      const fallback = typeof r.fallback === 'string' ? `; fallback: ${r.fallback}${detail}` : '';
      const counts = `${num(r.validated)} validated, ${num(r.accepted)} accepted, ${num(r.rejectedNow)} rejected`;
      return { ...base, message: `${contractLabel(c)}: ${revised}${counts}${fallback}` };
    }
    case 'treadle.contractRevise': {
      const unusable = `${contractLabel(c)}: revision of ${String(r.id)} unusable: ${String(r.error ?? '?')}`;
      return { ...base, message: r.ok === false ? unusable : `${contractLabel(c)}: ${String(r.id)} revised` };
    }
    default:
      return { ...base, message: `${contractLabel(c)}: final list: ${String(r.summary ?? '')}` };
  }
}

function num(value: unknown): string {
  return typeof value === 'number' ? String(value) : '?';
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
