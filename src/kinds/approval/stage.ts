/**
 * The approval stage kind (seed 003 "Approval Gate"), run by the work item's stage runner as one attempt:
 * the stage's actions become approval requests (an activity validates every payload against its action
 * type and makes ids and idempotency keys), the requests wait for decisions in parallel, each approved one's
 * action executes at once (an idempotent activity), and the attempt's artefact is every request's outcome.
 *
 * A request's life: pending → approved (its action runs) | rejected | expired (no decision within the TTL;
 * treated as rejected). With an escalation, the TTL first hands the request to the escalation group with a
 * TTL of its own, after which the escalation's default decision applies. A rejection with `on_reject: stop`
 * stops the stage at once (its other pending requests are rejected with it) and fails it; with `skip` the
 * stage goes on, and when nothing at all was approved it ends skipped, so the run continues without it.
 */
import {
  ActivityCancellationType,
  ApplicationFailure,
  condition,
  proxyActivities,
  workflowInfo,
} from '@temporalio/workflow';
import {
  APPROVAL_CREATE_ACTIVITY,
  APPROVAL_EXECUTE_ACTIVITY,
  APPROVAL_OUTCOME_SUMMARY,
  APPROVAL_REQUESTS_SUMMARY,
  type ApprovalCreateInput,
  type ApprovalCreateResult,
  type ApprovalExecuteInput,
  type ApprovalExecuteResult,
  type ApprovalRequest,
  type ApprovalStageArtefact,
  type ApprovalStageConfig,
} from './shapes';
import { STORE_ARTEFACT_ACTIVITY } from '../../model/activity-types';
import { truncateText } from '../../model/limits';
import type { ReviewSla, StageSpec } from '../../model/pipeline';
import type { Artefact, Json } from '../../model/shapes';
import type { StageActivityResult, StoreArtefactInput, StoreArtefactResult } from '../../model/state';
import { decisionAnnouncer, type Announcer } from '../../notify/announce';
import { dueAt, recordOverdue, type DeadlineFields } from '../../workflow-kit/deadline';
import { describeFailure, now, retryPolicyOf, type StageKindRun } from '../../workflow-kit/common';

/**
 * The step's own activities, named `<stage> · attempt n/m · <what>` like every stage attempt, so the Web UI
 * and the audit show the approval step as a step (summaries are user metadata: replay does not compare them).
 */
function stepActivities(run: ApprovalRun, what: string) {
  const summary = `${run.stage.name} · attempt ${run.attempt}/${run.stage.retryBudget.maxAttempts} · ${what}`;
  const options = { startToCloseTimeout: '1m', retry: { maximumAttempts: 5 }, summary } as const;
  // An action type Treadle does not ship is checked and executed by the worker of the stage's queue.
  const taskQueue = run.stage.queues?.[APPROVAL_CREATE_ACTIVITY];
  // Proxies have no own keys to spread: each activity is taken from its own.
  return {
    [APPROVAL_CREATE_ACTIVITY]: proxyActivities<{
      [APPROVAL_CREATE_ACTIVITY]: (input: ApprovalCreateInput) => Promise<ApprovalCreateResult>;
    }>(taskQueue !== undefined ? { ...options, taskQueue } : options)[APPROVAL_CREATE_ACTIVITY],
    [STORE_ARTEFACT_ACTIVITY]: proxyActivities<{
      [STORE_ARTEFACT_ACTIVITY]: (input: StoreArtefactInput) => Promise<StoreArtefactResult>;
    }>(options)[STORE_ARTEFACT_ACTIVITY],
  };
}

/** What an approval attempt needs of its work item. */
export type ApprovalRun = StageKindRun;

/** Who decided when nobody did. */
const TREADLE = 'treadle';
/** Approved actions of one stage executing at once (a batch approval of 1,000 must not flood the worker). */
const MAX_CONCURRENT_ACTIONS = 20;

/** One attempt of an approval stage; see the module comment. */
export async function runApprovalStage(run: ApprovalRun): Promise<StageActivityResult> {
  const { stage, state } = run;
  const info = workflowInfo();
  const create = stepActivities(run, APPROVAL_REQUESTS_SUMMARY)[APPROVAL_CREATE_ACTIVITY];
  const { itemId, attempt, upstream, input } = run;
  const created = await create({
    itemId,
    runId: info.runId,
    step: stage.name,
    attempt,
    config: stage.with ?? null,
    upstream,
    input,
  });
  if (!created.ok)
    throw ApplicationFailure.nonRetryable(
      `${stage.name} cannot make its approval requests (${created.problems.length} problem${created.problems.length === 1 ? '' : 's'}): ${created.problems.join('; ')}`,
      'InvalidApprovalRequests',
    );
  const requests = pendingRequests(run, info.runId, created);
  state.approvals = [...(state.approvals ?? []), ...requests];
  const st = state.stages[stage.name]!;
  if (requests.length > 0) st.status = 'waiting_approval';
  announceRequests(run, requests);
  const said = requests.length > 0 ? batchAnnouncer(run, requests) : undefined;
  if (said) await said('decision_owed', truncateText(`${stage.name}: ${owedLine(requests)}`, 500));

  const pending = new PendingApprovals(run, created.config, said);
  await Promise.all(requests.map((request) => pending.lifecycle(request)));
  st.status = 'running';
  run.touch();

  const artefact = artefactOf(requests);
  if (said)
    await said(
      'decided',
      `${stage.name}: ${artefact.approved} approved, ${artefact.rejected} rejected, ${artefact.expired} expired${pending.stopped ? ` (stopped by ${pending.stopped.id})` : ''}`,
    );
  if (pending.stopped) throw stoppedOnRejection(pending.stopped);
  const failed = requests.filter((r) => r.error !== undefined);
  if (failed.length > 0)
    throw ApplicationFailure.nonRetryable(
      `${failed.length} approved action${failed.length === 1 ? '' : 's'} failed: ${failed.map((r) => `${r.id} (${r.actionType}): ${r.error}`).join('; ')}`,
      'ApprovalActionFailed',
    );

  const summary = truncateText(
    `${artefact.approved} approved, ${artefact.rejected} rejected, ${artefact.expired} expired of ${requests.length} request${requests.length === 1 ? '' : 's'}`,
  );
  const storeOutcome = stepActivities(run, APPROVAL_OUTCOME_SUMMARY)[STORE_ARTEFACT_ACTIVITY];
  const stored = (await storeOutcome({ artefact: artefact as unknown as Json, summary })).artefact as Artefact;
  // Nothing approved (and something asked): the run goes on without this step, as the seed's "completed (with skip)".
  const outcome = requests.length > 0 && artefact.approved === 0 ? 'skipped' : 'completed';
  return { outcome, artefact: stored, summary, previousLog: null };
}

/** The requests the create activity made, as the item keeps them: pending, with their TTL and reviewers. */
function pendingRequests(
  run: ApprovalRun,
  runId: string,
  { config, requests }: Extract<ApprovalCreateResult, { ok: true }>,
): ApprovalRequest[] {
  return requests.map((r) => ({
    ...r,
    itemId: run.itemId,
    runId,
    step: run.stage.name,
    status: 'pending',
    createdAt: now(),
    ...(config.ttlMs !== null ? { expiresAt: new Date(Date.now() + config.ttlMs).toISOString() } : {}),
    ...(config.reviewers !== undefined ? { reviewers: config.reviewers } : {}),
    // A deadline the TTL comes before never acts: no dueAt, so no listing calls the request overdue.
    ...(deadlineActs(run.stage.reviewSla, config.ttlMs) ? { dueAt: dueAt(now(), run.stage.reviewSla) } : {}),
  }));
}

/** One `ApprovalRequested` event per request, then one look at the item (its status is now waiting). */
function announceRequests(run: ApprovalRun, requests: readonly ApprovalRequest[]): void {
  const { stage } = run;
  for (const r of requests)
    run.emit('ApprovalRequested', `${stage.name}: approval ${r.id} requested: ${r.summary}`, {
      stage: stage.name,
      attempt: run.attempt,
      details: { id: r.id, actionType: r.actionType },
    });
  run.touch();
}

/** Whether a deadline acts at all: one at or past the TTL never does (the TTL decides first). */
function deadlineActs(sla: ReviewSla | undefined, ttlMs: number | null): sla is ReviewSla {
  return sla !== undefined && (ttlMs === null || sla.afterMs < ttlMs);
}

/**
 * Announces an attempt's requests as one batch when the item announces (notify/announce.ts): one `decision_owed`
 * when they are made and one `decided` when all are settled, however many there are (a step can ask 1,000 at once),
 * keyed by the first request's decision (its link opens that request); else undefined.
 */
function batchAnnouncer(run: ApprovalRun, requests: readonly ApprovalRequest[]): Announcer | undefined {
  if (run.announces !== true) return undefined;
  const first = requests[0]!;
  const { itemId, pipeline, stage } = run;
  return decisionAnnouncer(
    { kind: 'approval', subject: first.id, itemId, pipeline, stage: stage.name, requestedAt: first.createdAt },
    () => first.reviewers,
  );
}

/** "1 approval request owed: <summary>" / "12 approval requests owed; the first: <summary>". */
function owedLine(requests: readonly ApprovalRequest[]): string {
  const first = requests[0]!;
  return requests.length === 1
    ? `approval ${first.id} owed: ${first.summary}`
    : `${requests.length} approval requests owed; the first, ${first.id}: ${first.summary}`;
}

/** The attempt's artefact: every request's outcome and the counts. */
function artefactOf(requests: readonly ApprovalRequest[]): ApprovalStageArtefact {
  return {
    requests: requests.map((r) => ({
      id: r.id,
      actionType: r.actionType,
      status: r.status,
      ...(r.decidedBy !== undefined ? { decidedBy: r.decidedBy } : {}),
      ...(r.reason !== undefined ? { reason: r.reason } : {}),
      ...(r.result !== undefined ? { result: r.result } : {}),
      ...(r.error !== undefined ? { error: r.error } : {}),
    })),
    approved: requests.filter((r) => r.status === 'approved').length,
    rejected: requests.filter((r) => r.status === 'rejected').length,
    expired: requests.filter((r) => r.status === 'expired').length,
  };
}

/** The stage's failure when a request was rejected (or expired) under `on_reject: stop`. */
function stoppedOnRejection(stopped: ApprovalRequest): ApplicationFailure {
  return ApplicationFailure.nonRetryable(
    `approval ${stopped.id} (${stopped.actionType}) was ${stopped.status}${stopped.decidedBy ? ` by ${stopped.decidedBy}` : ''}${stopped.reason ? `: ${stopped.reason}` : ''}; the stage stops on rejection (on_reject: stop)`,
    'ApprovalRejected',
  );
}

/**
 * The requests of one attempt waiting together: a rejection that stops the stage ends the other pending
 * requests with it, and approved actions share {@link MAX_CONCURRENT_ACTIONS} slots.
 */
class PendingApprovals {
  /** The request whose rejection stopped the stage (`on_reject: stop`), once there is one. */
  stopped: ApprovalRequest | undefined;
  private freeSlots = MAX_CONCURRENT_ACTIONS;

  /** Whether the batch's `overdue` was announced (once, for the first request past its deadline). */
  private overdueSaid = false;

  constructor(
    private readonly run: ApprovalRun,
    private readonly config: ApprovalStageConfig,
    private readonly said: Announcer | undefined,
  ) {}

  /**
   * One request: wait for a decision (overdue past the stage's `review_sla`, escalating or expiring on its TTL),
   * then run its action if approved.
   */
  async lifecycle(request: ApprovalRequest): Promise<void> {
    const { config } = this;
    const decidedOrStopped = (): boolean => request.status !== 'pending' || this.stopped !== undefined;
    // Without a deadline nothing waits here and the TTL is whole: the commands every earlier history has.
    const waited = request.dueAt !== undefined ? await this.untilDeadline(request, decidedOrStopped) : 0;
    if (config.ttlMs === null) await condition(decidedOrStopped);
    else if (!(await condition(decidedOrStopped, Math.max(1, config.ttlMs - waited)))) {
      if (config.escalation) {
        this.escalate(request, config.escalation, config.ttlMs);
        if (!(await condition(decidedOrStopped, config.escalation.ttlMs)))
          this.decideByDefault(request, config.escalation);
      } else this.expire(request, config.ttlMs);
      this.run.touch();
    }
    if (request.status === 'pending') {
      // Another request stopped the stage.
      const by = this.stopped!;
      decide(request, 'rejected', TREADLE, `the stage stopped: ${by.id} was ${by.status}`);
      this.run.touch();
      return;
    }
    if (request.status !== 'approved') {
      if (config.onReject === 'stop') this.stopped ??= request;
      return;
    }
    await condition(() => this.freeSlots > 0);
    this.freeSlots--;
    try {
      this.executed(request, await executeActivity(this.run.stage)(executeInput(request)));
    } catch (error) {
      this.actionFailed(request, error);
    } finally {
      this.freeSlots++;
    }
    this.run.touch();
  }

  /**
   * Waits until the request is decided or its deadline (`review_sla`) passes, unless the TTL comes first; past it,
   * the request is overdue (with `escalate_to`, handed to that group) and the batch says so once. Returns how long
   * it waited, which the TTL's wait then leaves out.
   */
  private async untilDeadline(request: ApprovalRequest, decided: () => boolean): Promise<number> {
    const sla = this.run.stage.reviewSla!;
    const started = Date.now();
    if (await condition(decided, sla.afterMs, { summary: `${this.run.stage.name} · review SLA` }))
      return Date.now() - started;
    // The request keeps `escalated` as a flag (ADR-12's escalation): the breach is worked out on a copy.
    const fields: DeadlineFields = { ...(request.reviewers !== undefined ? { reviewers: request.reviewers } : {}) };
    const announce = this.said && !this.overdueSaid ? this.said : undefined;
    this.overdueSaid ||= announce !== undefined;
    await recordOverdue(
      this.run,
      Object.assign(fields, { stage: this.run.stage.name, attempt: this.run.attempt, dueAt: request.dueAt }),
      sla,
      `approval ${request.id}`,
      async (message) => {
        // The hand-over lands on the request (listings, answers) before anyone is told of it.
        if (fields.escalated) {
          request.escalated = true;
          request.reviewers = fields.escalated.to;
          this.run.touch();
        }
        if (announce) await announce('overdue', message);
      },
    );
    return Date.now() - started;
  }

  /** No decision within the TTL: the request goes to the escalation group, with a TTL of its own. */
  private escalate(request: ApprovalRequest, escalation: Escalation, ttlMs: number): void {
    const { stage } = this.run;
    request.escalated = true;
    request.reviewers = escalation.to;
    request.expiresAt = new Date(Date.now() + escalation.ttlMs).toISOString();
    this.run.emit(
      'ApprovalEscalated',
      `${stage.name}: approval ${request.id} escalated to ${escalation.to} (no decision within ${Math.round(ttlMs / 1000)}s)`,
      { stage: stage.name, details: { id: request.id, to: escalation.to } },
    );
    this.run.touch();
  }

  /** No decision from the escalation group either: the escalation's default applies. */
  private decideByDefault(request: ApprovalRequest, escalation: Escalation): void {
    const { stage } = this.run;
    decide(
      request,
      escalation.default === 'approve' ? 'approved' : 'expired',
      TREADLE,
      `no decision from ${escalation.to} in time; the escalation's default is ${escalation.default}`,
    );
    this.run.emit(
      request.status === 'approved' ? 'ApprovalDecided' : 'ApprovalExpired',
      `${stage.name}: approval ${request.id} ${request.status} by default: ${request.reason}`,
      { stage: stage.name, details: { id: request.id, status: request.status } },
    );
  }

  /** No decision within the TTL and no escalation: the request expires (treated as rejected). */
  private expire(request: ApprovalRequest, ttlMs: number): void {
    const { stage } = this.run;
    decide(request, 'expired', TREADLE, `no decision within ${Math.round(ttlMs / 1000)}s`);
    this.run.emit('ApprovalExpired', `${stage.name}: approval ${request.id} expired: ${request.reason}`, {
      stage: stage.name,
      details: { id: request.id },
    });
  }

  /** An approved action ran: its result goes on the request. */
  private executed(request: ApprovalRequest, executed: ApprovalExecuteResult): void {
    const { stage } = this.run;
    request.result = executed.result;
    request.executedAt = now();
    this.run.emit('ApprovalExecuted', `${stage.name}: approval ${request.id}: ${executed.summary}`, {
      stage: stage.name,
      details: { id: request.id },
    });
  }

  /** An approved action failed (after its retries): the error goes on the request, and the stage fails at its end. */
  private actionFailed(request: ApprovalRequest, error: unknown): void {
    const { stage } = this.run;
    request.error = truncateText(describeFailure(error), 500);
    this.run.emit('ApprovalExecuted', `${stage.name}: approval ${request.id}: the action failed: ${request.error}`, {
      stage: stage.name,
      details: { id: request.id, failed: true },
    });
  }
}

/** A stage's escalation settings (`escalation:` in its `with`). */
type Escalation = NonNullable<ApprovalStageConfig['escalation']>;

/** What the execute activity receives of an approved request. */
function executeInput(request: ApprovalRequest): ApprovalExecuteInput {
  return {
    id: request.id,
    itemId: request.itemId,
    step: request.step,
    actionType: request.actionType,
    payload: request.payload,
    idempotencyKey: request.idempotencyKey,
  };
}

function decide(
  request: ApprovalRequest,
  status: 'approved' | 'rejected' | 'expired',
  by: string,
  reason?: string,
): void {
  request.status = status;
  request.decidedAt = now();
  request.decidedBy = by;
  if (reason !== undefined) request.reason = reason;
}

/** Applies a validated human decision (the update's and signal's handler). */
export function applyDecision(
  request: ApprovalRequest,
  decision: 'approve' | 'reject',
  by: string,
  reason?: string,
): void {
  decide(request, decision === 'approve' ? 'approved' : 'rejected', by, reason);
}

/** The action runs with the stage's activity settings: its timeouts and the seed's retry policy. */
function executeActivity(stage: StageSpec): (input: ApprovalExecuteInput) => Promise<ApprovalExecuteResult> {
  const { activity } = stage;
  const taskQueue = stage.queues?.[APPROVAL_EXECUTE_ACTIVITY];
  return proxyActivities<{
    [APPROVAL_EXECUTE_ACTIVITY]: (input: ApprovalExecuteInput) => Promise<ApprovalExecuteResult>;
  }>({
    ...(taskQueue !== undefined ? { taskQueue } : {}),
    startToCloseTimeout: activity.startToCloseTimeoutMs,
    heartbeatTimeout: activity.heartbeatTimeoutMs,
    retry: retryPolicyOf(activity, ['InvalidPayload', 'UnknownActionType', 'UnknownTask', 'IdempotencyConflict']),
    summary: `${stage.name} · execute approved action`,
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
  })[APPROVAL_EXECUTE_ACTIVITY];
}
