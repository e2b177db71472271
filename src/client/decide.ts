/**
 * One way to answer any pending decision by its key (issue 27): the answer is checked against what the kind
 * takes, then routed to the validated update that decides it (a work item's or TDD node's `resolveReview`,
 * `decideApproval`, a loop's `resumeLoop`). Someone else deciding first is an outcome, `already_decided`,
 * read from the state the workflow keeps; every other refusal stays an error.
 */
import type { Client } from '@temporalio/client';
import {
  ANSWERS,
  parseDecisionKey,
  type DecisionAnswer,
  type DecisionKind,
  type DecisionOutcome,
} from '../model/decisions';
import type { Json, ReviewOutcome } from '../model/shapes';
import type { StateQueryArgs, WorkItemState } from '../model/state';
import type { ApprovalDecided, ApprovalRequest } from '../kinds/approval/shapes';
import type { TddNodeState } from '../kinds/tdd/shapes';
import type { LoopState, ResumeRequest } from '../kinds/loop/shapes';
import { sendResume } from './loop-resume';
import { TreadleError } from './errors';
import { AlreadyDecidedError } from '../config/errors';
import type { SchemaProblem } from '../agents/output-schema-checks';
import { outputSchemaChecks } from '../agents/output-schema-checks-lazy';

/** What deciding needs of `TreadleClient` (it passes itself). */
export interface DecideContext {
  readonly client: Client;
  /** How long an answer may take once a worker has answered (a stuck worker must not hold the caller forever). */
  readonly reviewTimeoutMs: number;
  /** How long a query or update waits for a worker to answer at all. */
  readonly answerWaitMs: number;
  review(id: string, stage: string, outcome: ReviewOutcome, reviewer?: string): Promise<unknown>;
  approveWithEdits(
    id: string,
    stage: string,
    artefact: Json,
    options: { reviewer?: string; note?: string },
  ): Promise<unknown>;
  decideApproval(
    id: string,
    decision: 'approve' | 'reject',
    options: { by?: string; reason?: string },
  ): Promise<ApprovalDecided>;
  /** The state queries; past `timeoutMs` (when given) a worker that has not answered is `unreachable`. */
  getState(id: string, page?: StateQueryArgs, timeoutMs?: number): Promise<WorkItemState>;
  getTddState(id: string, page?: StateQueryArgs, timeoutMs?: number): Promise<TddNodeState>;
  getLoopState(id: string, timeoutMs?: number): Promise<LoopState>;
  getApproval(id: string): Promise<ApprovalRequest>;
}

/**
 * The answer's problem for `kind`, or undefined when it is complete: an action the kind does not take, or a
 * field the action needs (a reason to reject or abandon, the attempt to approve, the edited artefact).
 */
export function answerProblem(kind: DecisionKind, answer: DecisionAnswer): string | undefined {
  if (!ANSWERS[kind].includes(answer.action))
    return `${kind} decisions take ${ANSWERS[kind].join(', ')}, not ${answer.action}`;
  const blank = (text: string | undefined): boolean => text === undefined || text.trim() === '';
  if ((answer.action === 'reject' || answer.action === 'abandon') && blank(answer.reason))
    return `${answer.action} needs a reason`;
  if (answer.action === 'approve_attempt' && !(Number.isInteger(answer.attempt) && answer.attempt! >= 1))
    return 'approve_attempt needs the attempt (a whole number from 1)';
  if (answer.action === 'edit' && answer.artefact === undefined) return 'edit needs the edited artefact';
  if (answer.action === 'edit' && kind === 'tdd' && typeof answer.artefact !== 'string')
    return "a TDD step's edit is the answer's text";
  if (answer.action === 'guidance' && blank(answer.note)) return 'guidance needs the note';
  return undefined;
}

/** A review outcome for `resolveReview` (work items and TDD nodes take the same). */
function reviewOutcome(answer: DecisionAnswer): ReviewOutcome {
  const note = answer.note !== undefined ? { note: answer.note } : {};
  switch (answer.action) {
    case 'reject':
      return { kind: 'reject', reason: answer.reason!, ...note };
    case 'approve_attempt':
      return { kind: 'approve', attempt: answer.attempt!, ...note };
    case 'edit':
      return { kind: 'approve_with_edits', artefact: answer.artefact as Json, ...note };
    default:
      // approve; a TDD step's guidance is an approval whose note the next step reads.
      return { kind: 'approve', ...note };
  }
}

/** Answers the decision `key` as `reviewer`. See `TreadleClient.decide`. */
export async function decide(
  context: DecideContext,
  key: string,
  answer: DecisionAnswer,
  reviewer: string,
): Promise<DecisionOutcome> {
  const parsed = parseDecisionKey(key);
  if (!parsed) throw new TreadleError(`"${key}" is not a decision key`, 'invalid_review');
  const { workflowId, kind, subject } = parsed;
  const problem = answerProblem(kind, answer);
  if (problem) throw new TreadleError(`cannot answer ${key}: ${problem}`, 'invalid_review');
  const outcome = answer.action === 'approve_attempt' ? 'approve' : answer.action;
  try {
    if (kind === 'approval') {
      const decided = await context.decideApproval(subject, answer.action as 'approve' | 'reject', {
        by: reviewer,
        ...(answer.reason !== undefined ? { reason: answer.reason } : {}),
      });
      return { status: 'decided', by: decided.decidedBy, outcome: decided.status };
    }
    if (kind === 'loop') {
      await resumeLoop(context, workflowId, answer, reviewer);
      return { status: 'decided', by: reviewer, outcome };
    }
    if (answer.action === 'edit' && kind !== 'tdd')
      await context.approveWithEdits(workflowId, subject, answer.artefact as Json, {
        reviewer,
        ...(answer.note !== undefined ? { note: answer.note } : {}),
      });
    else await context.review(workflowId, subject, reviewOutcome(answer), reviewer);
    return { status: 'decided', by: reviewer, outcome };
  } catch (error) {
    // Refused without a worker, from the history: who decided first is known already.
    if (error instanceof AlreadyDecidedError) return { status: 'already_decided', ...error.decided };
    if (!(error instanceof TreadleError) || error.code !== 'invalid_review') throw error;
    const earlier = await decidedEarlier(context, kind, workflowId, subject).catch(() => undefined);
    if (earlier) return earlier;
    throw error;
  }
}

/**
 * Resumes or abandons the loop stage workflow `loopId`, recording who decided; sent only once a worker answers, and
 * bounded by the context's review timeout as reviews and approvals are (see `updatedByWorker`).
 */
async function resumeLoop(context: DecideContext, loopId: string, answer: DecisionAnswer, by: string): Promise<void> {
  const request: ResumeRequest = {
    action: answer.action === 'abandon' ? 'abandon' : 'resume',
    ...(answer.reason !== undefined ? { reason: answer.reason } : {}),
    by,
  };
  await sendResume(context.client, loopId, request, context.reviewTimeoutMs, context.answerWaitMs);
}

/**
 * How the decision was made when the workflow no longer waits on it: the stage's review record, the approval
 * request's decision, the TDD node or loop no longer asking. Undefined when it still waits (the refusal was
 * about the answer, not about someone deciding first).
 */
async function decidedEarlier(
  context: DecideContext,
  kind: DecisionKind,
  workflowId: string,
  subject: string,
): Promise<DecisionOutcome | undefined> {
  switch (kind) {
    case 'approval': {
      const request = await context.getApproval(subject);
      if (request.status === 'pending') return undefined;
      return {
        status: 'already_decided',
        outcome: request.status,
        ...(request.decidedBy ? { by: request.decidedBy } : {}),
        ...(request.decidedAt ? { at: request.decidedAt } : {}),
      };
    }
    case 'tdd': {
      const state = await context.getTddState(workflowId);
      return state.pendingReviews.some((r) => r.stage === subject) ? undefined : { status: 'already_decided' };
    }
    case 'loop': {
      const state = await context.getLoopState(workflowId);
      return state.status === 'failed' ? undefined : { status: 'already_decided', outcome: state.status };
    }
    default: {
      const state = await context.getState(workflowId, { eventLimit: 1 });
      const stage = state.stages[subject];
      if (!stage || stage.status === 'waiting_review') return undefined;
      const record = stage.review;
      return record
        ? { status: 'already_decided', by: record.reviewer, outcome: record.kind, at: record.at }
        : { status: 'already_decided', outcome: stage.status };
    }
  }
}

/**
 * The problems of an edited artefact against the stage's output schema (empty: it may be sent). Items that keep
 * no schema for the stage accept any JSON.
 */
export async function checkEdit(context: DecideContext, key: string, artefact: unknown): Promise<SchemaProblem[]> {
  const parsed = parseDecisionKey(key);
  if (!parsed) throw new TreadleError(`"${key}" is not a decision key`, 'invalid_review');
  if (parsed.kind !== 'review' && parsed.kind !== 'budget') return [];
  return problemsOf(context, parsed.workflowId, parsed.subject, artefact);
}

/** The problems of an edit of `stage` of work item `workflowId` against the schema its state keeps for it. */
async function problemsOf(
  context: DecideContext,
  workflowId: string,
  stage: string,
  artefact: unknown,
): Promise<SchemaProblem[]> {
  const state = await context.getState(workflowId, { eventLimit: 1 });
  // Ajv loads with the first check: status, reviews and the other short commands never need it.
  return outputSchemaChecks().checkOutput(state.outputSchemas?.[stage], artefact);
}

/**
 * Refuses an edit of `stage` of work item `id` that breaks the stage's output schema, before anything is sent:
 * a TreadleError (`invalid_input`: what the reviewer gave) listing each problem as `<JSON Pointer>: <why>`.
 */
export async function refuseNonconformingEdit(
  context: DecideContext,
  id: string,
  stage: string,
  artefact: Json,
): Promise<void> {
  const problems = await problemsOf(context, id, stage, artefact);
  if (problems.length === 0) return;
  const lines = problems.map((p) => `${p.path === '' ? '(the whole artefact)' : p.path}: ${p.message}`);
  throw new TreadleError(
    `the edited ${stage} of ${id} does not match the stage's output schema:\n${lines.map((l) => `  - ${l}`).join('\n')}`,
    'invalid_input',
    lines,
  );
}
