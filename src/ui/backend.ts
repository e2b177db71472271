/**
 * The seam between the review inbox server and where decisions come from: the client SDK in production (the
 * lead's `clientBackend(client)` adapter), a fake in unit tests. The server and its index see nothing else.
 */
import type { DecisionChange as ListedChange } from '../client/decisions';
import type { CancelOutcome } from '../client/cancel';
import type { ForkOptions, ForkStarted } from '../client/fork';
import type { SchemaProblem } from '../agents/output-schema-checks';
import type { DecisionAnswer, DecisionDetail, DecisionOutcome, PendingDecision } from '../model/decisions';
import type { EvalRunListing, EvalRunRecord } from '../model/evals';

/**
 * One execution's entry in a change listing, as much as the index reads: its pending decisions now (empty when
 * it has none left, decided or closed), so `closed` is not needed.
 */
export type DecisionChange = Pick<ListedChange, 'workflowId' | 'decisions'>;

/** What the inbox needs from Temporal, through the client SDK. */
export interface InboxBackend {
  /** Every pending decision (one visibility listing). */
  list(): Promise<PendingDecision[]>;
  /** The executions whose decisions changed at or after `since`, each with its pending decisions now. */
  changes(since: Date): Promise<DecisionChange[]>;
  /** What the detail view shows for one decision; `attempts` limits the outputs read (a diff needs two). */
  detail(key: string, options?: { attempts?: readonly number[] }): Promise<DecisionDetail>;
  /**
   * Answers a decision as `reviewer` (the authenticated identity, never a name from the request), in reviewer
   * `group` when the decision is addressed to groups (the one the reviewer belongs to, recorded for the audit).
   */
  decide(key: string, answer: DecisionAnswer, reviewer: string, group?: string): Promise<DecisionOutcome>;
  /** Checks an edited artefact against the stage's output schema; empty when it passes. */
  checkEdit(key: string, artefact: unknown): Promise<SchemaProblem[]>;
  /** Cancels work item `itemId` as `by` (the authenticated identity), with `reason` when given (`treadle cancel`). */
  cancel(itemId: string, by: string, reason?: string): Promise<CancelOutcome>;
  /** Forks work item `itemId` from a stage with changed settings (`treadle fork`, `ItemsClient.fork`). */
  fork(itemId: string, options: ForkOptions): Promise<ForkStarted>;
  /** The finished evaluation runs, newest first (`/evals`); a backend without evaluations lists none. */
  evalRuns?(): Promise<EvalRunListing[]>;
  /** One run's record (`/evals/<run>`); rejects `not_found` for an unknown run. */
  evalRun?(run: string): Promise<EvalRunRecord>;
}
