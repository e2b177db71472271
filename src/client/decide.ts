/**
 * One way to answer any pending decision by its key (issue 27): the answer is checked against what the kind
 * takes, then handed to the kind's answers (its entry in kind-clients.ts), which send the validated update that decides it
 * (a work item's or TDD node's `resolveReview`, `decideApproval`, a loop's `resumeLoop`). Someone else deciding
 * first is an outcome, `already_decided`, read from the state the workflow keeps; every other refusal stays an error.
 */
import {
  ANSWERS,
  parseDecisionKey,
  type DecisionAnswer,
  type DecisionKind,
  type DecisionOutcome,
} from '../model/decisions';
import type { Json } from '../model/shapes';
import { TreadleError } from './errors';
import { MAX_REVIEW_NOTE_CHARS } from '../model/limits';
import { AlreadyDecidedError } from '../config/errors';
import type { SchemaProblem } from '../agents/output-schema-checks';
import type { DecisionContext, DecisionTarget } from './decision-kind';
import { kindAnswers } from './kind-clients';
import { editProblems } from './item-decisions';

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
  if (answer.action === 'guidance' && blank(answer.note)) return 'guidance needs the note';
  if (answer.action === 'request_changes') {
    if (blank(answer.note)) return 'request_changes needs a note saying what to change';
    if (answer.note!.length > MAX_REVIEW_NOTE_CHARS)
      return `the note is ${answer.note!.length} characters, over the ${MAX_REVIEW_NOTE_CHARS} a request for changes may have; shorten it`;
  }
  // Last, as the kind's own checks only apply to a well-formed answer (a TDD step's edit is text).
  return kindAnswers(kind).answerProblem?.(answer);
}

/** The decision `key` names, or `invalid_review` for a string that is not a key. */
export function decisionOf(key: string): DecisionTarget & { kind: DecisionKind } {
  const parsed = parseDecisionKey(key);
  if (!parsed) throw new TreadleError(`"${key}" is not a decision key`, 'invalid_review');
  return { key, ...parsed };
}

/** Answers the decision `key` as `reviewer` (in reviewer `group`, when given). See `TreadleClient.decide`. */
export async function decide(
  ctx: DecisionContext,
  key: string,
  answer: DecisionAnswer,
  reviewer: string,
  group?: string,
): Promise<DecisionOutcome> {
  const target = decisionOf(key);
  const problem = answerProblem(target.kind, answer);
  if (problem) throw new TreadleError(`cannot answer ${key}: ${problem}`, 'invalid_review');
  const kind = kindAnswers(target.kind);
  try {
    return await kind.decide(ctx, target, answer, reviewer, group);
  } catch (error) {
    // Refused without a worker, from the history: who decided first is known already.
    if (error instanceof AlreadyDecidedError) return { status: 'already_decided', ...error.decided };
    if (!(error instanceof TreadleError) || error.code !== 'invalid_review') throw error;
    const earlier = await kind.decidedEarlier(ctx, target).catch(() => undefined);
    if (earlier) return earlier;
    throw error;
  }
}

/**
 * The problems of an edited artefact against the stage's output schema (empty: it may be sent). Items that keep
 * no schema for the stage, and kinds whose edits have none, accept any JSON.
 */
export async function checkEdit(ctx: DecisionContext, key: string, artefact: unknown): Promise<SchemaProblem[]> {
  const target = decisionOf(key);
  return (await kindAnswers(target.kind).editProblems?.(ctx, target, artefact)) ?? [];
}

/**
 * Refuses an edit of `stage` of work item `id` that breaks the stage's output schema, before anything is sent:
 * a TreadleError (`invalid_input`: what the reviewer gave) listing each problem as `<JSON Pointer>: <why>`.
 */
export async function refuseNonconformingEdit(
  ctx: DecisionContext,
  id: string,
  stage: string,
  artefact: Json,
): Promise<void> {
  const problems = await editProblems(ctx, id, stage, artefact);
  if (problems.length === 0) return;
  const lines = problems.map((p) => `${p.path === '' ? '(the whole artefact)' : p.path}: ${p.message}`);
  throw new TreadleError(
    `the edited ${stage} of ${id} does not match the stage's output schema:\n${lines.map((l) => `  - ${l}`).join('\n')}`,
    'invalid_input',
    lines,
  );
}
