/**
 * The contract each kind implements for the client (`src/kinds/<kind>/client.ts`, one entry of the table in
 * kind-clients.ts): its decision kinds, how they are found in a listing (decision-listing.ts), how an answer to
 * one of them is sent, how to tell that someone decided first, and what the inbox's detail view shows. Also the
 * helpers those answers share, so no kind repeats them.
 */
import type {
  DecisionAnswer,
  DecisionDetail,
  DecisionKind,
  DecisionOutcome,
  PendingDecision,
} from '../model/decisions';
import type { ReviewOutcome, Json } from '../model/shapes';
import type { PendingReview } from '../model/state';
import { TreadleError } from './errors';
import type { DecisionSource, KindListing } from './decision-listing';
import type { SchemaProblem } from '../agents/output-schema-checks';
import type { ClientContext, ClientParts } from './parts/context';

/**
 * The listing over every kind (decisions.ts), as a kind's answers read a decision back the way it is listed.
 * Handed to the answers in their context rather than imported: the listing goes through the table of kinds,
 * which lists these answers.
 */
export interface ListedDecisions {
  /** A memo review entry as the decision of the entry of the table that claims it (`reviewDecision`). */
  reviewDecision(source: DecisionSource, review: PendingReview): PendingDecision;
  /** What the listing says workflow `workflowId` waits on now, nothing when it is not running (`listedDecisionsOf`). */
  of(workflowId: string): Promise<PendingDecision[]>;
}

/** What a kind's answers reach: the client's shared context, its parts (items, approvals, loop stages…), the listing. */
export interface DecisionContext {
  readonly context: ClientContext;
  readonly parts: ClientParts;
  readonly listed: ListedDecisions;
}

/** The decision being answered, from its key: the workflow that waits and what it waits on (stage, request id). */
export interface DecisionTarget {
  readonly key: string;
  readonly workflowId: string;
  readonly subject: string;
}

/** What a detail may leave out. */
export interface DetailOptions {
  /** review/budget: read the outputs of these attempts only (a diff of two); the others come without `output`. */
  attempts?: readonly number[];
}

/** What a kind's detail reads: the decision, the client and what the caller may leave out. */
export interface DetailContext extends DecisionContext, DecisionTarget {
  readonly options: DetailOptions;
}

/** One kind's answers to its pending decisions: how they are checked, sent and shown (see the file's comment). */
export interface KindDecisions {
  /**
   * A problem of `answer` particular to this kind, beyond the actions it takes (`ANSWERS`) and the fields every
   * action needs; undefined when there is none.
   */
  answerProblem?(answer: DecisionAnswer): string | undefined;
  /**
   * Sends `answer` (already checked) as `reviewer`, in reviewer `group` when one is given (kinds whose decisions
   * name reviewers record it beside the name); rejects as the update the kind's workflow takes refuses it.
   */
  decide(
    ctx: DecisionContext,
    target: DecisionTarget,
    answer: DecisionAnswer,
    reviewer: string,
    group?: string,
  ): Promise<DecisionOutcome>;
  /**
   * How the decision was made when the workflow no longer waits on it; undefined when it still waits (a refusal
   * was about the answer, not about someone deciding first).
   */
  decidedEarlier(ctx: DecisionContext, target: DecisionTarget): Promise<DecisionOutcome | undefined>;
  /** What a reviewer needs to judge the decision; `not_found` (see {@link gone}) when it no longer waits. */
  detail(ctx: DetailContext): Promise<DecisionDetail>;
  /** An edited artefact's problems against the stage's output schema; kinds that keep no schema leave it out. */
  editProblems?(ctx: DecisionContext, target: DecisionTarget, artefact: unknown): Promise<SchemaProblem[]>;
}

/**
 * A kind as the client, the CLI and the review inbox reach it: one entry of the table in kind-clients.ts, which
 * both the listing (by its `listing`) and the answers (by the decision kind a key names) go through.
 */
export interface KindClient {
  /** The decision kinds it lists and answers; every decision kind is the entry's of exactly one. */
  readonly kinds: readonly DecisionKind[];
  /** How its pending decisions are found and read in the one visibility listing. */
  readonly listing: KindListing;
  /** How an answer to one of them is checked and sent, and what its detail shows. */
  readonly answers: KindDecisions;
}

/** The outcome of an answer sent as `reviewer` (approving an attempt is an approval). */
export function decidedBy(answer: DecisionAnswer, reviewer: string): DecisionOutcome {
  return { status: 'decided', by: reviewer, outcome: answer.action === 'approve_attempt' ? 'approve' : answer.action };
}

/** A review outcome for `resolveReview` (work items and TDD nodes take the same). */
export function reviewOutcome(answer: DecisionAnswer): ReviewOutcome {
  const note = answer.note !== undefined ? { note: answer.note } : {};
  switch (answer.action) {
    case 'reject':
      return { kind: 'reject', reason: answer.reason!, ...note };
    case 'approve_attempt':
      return { kind: 'approve', attempt: answer.attempt!, ...note };
    case 'edit':
      return { kind: 'approve_with_edits', artefact: answer.artefact as Json, ...note };
    case 'request_changes':
      return { kind: 'request_changes', note: answer.note! };
    default:
      // approve; a TDD step's guidance is an approval whose note the next step reads.
      return { kind: 'approve', ...note };
  }
}

/** The error for a key its workflow no longer waits on (the inbox answers it with 404). */
export function gone(key: string): TreadleError {
  return new TreadleError(`no pending decision ${key}: it was decided, or its workflow no longer waits`, 'not_found');
}

/**
 * The workflow's state; undefined when no worker answered within the client's `answerWaitMs` (as every command
 * falls back on what Temporal knows without one: a worker that just stopped still shows as polling for a minute,
 * and the server would hold the query half a minute). An unknown workflow is gone.
 */
export async function queried<T>(ctx: DetailContext, query: (timeoutMs: number) => Promise<T>): Promise<T | undefined> {
  try {
    return await query(ctx.context.answerWaitMs);
  } catch (error) {
    if (!(error instanceof TreadleError)) throw error;
    if (error.code === 'no_worker' || error.code === 'unreachable') return undefined;
    if (error.code === 'not_found') throw gone(ctx.key);
    throw error;
  }
}

/** No worker answered: the decision as the listing has it, nothing the state query alone knows. */
export async function listedDetail(ctx: DetailContext): Promise<DecisionDetail> {
  const decision = (await ctx.listed.of(ctx.workflowId)).find((d) => d.key === ctx.key);
  if (!decision) throw gone(ctx.key);
  return { decision, live: false };
}
