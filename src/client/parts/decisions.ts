/**
 * `client.decisions`: stage reviews and the pending decisions of every kind — list them, read one's detail, answer
 * one by key (`decide`), or review a work item's stage directly (`review`, `approve`, `reject`, `approveWithEdits`).
 * The flat `TreadleClient` methods of the same meaning are aliases.
 */
import { WorkflowUpdateFailedError, type WorkflowHandle } from '@temporalio/client';
import { offloadArtefact } from '../../storage/blob-store';
import type { Json, ReviewOutcome } from '../../model/shapes';
import type {
  DecisionAnswer,
  DecisionDetail,
  DecisionKind,
  DecisionOutcome,
  PendingDecision,
} from '../../model/decisions';
import { resolveReviewUpdate, type ReviewAccepted } from '../../workflow-kit/messages';
import { defaultReviewer, isNotFound, TreadleError } from '../errors';
import { listPendingReviews, type PendingReviewListing } from '../listings';
import {
  listDecisionChanges,
  listedDecisionsOf,
  listPendingDecisions,
  reviewDecision,
  type DecisionChange,
} from '../decisions';
import { checkEdit, decide, refuseNonconformingEdit } from '../decide';
import { decisionDetail } from '../decision-detail';
import type { DecisionContext, DetailOptions } from '../decision-kind';
import type { SchemaProblem } from '../../agents/output-schema-checks';
import { notSent, updatedByWorker } from '../worker-presence';
import { describeDecision, recordedReview } from '../recorded-decisions';
import { AlreadyDecidedError } from '../../config/errors';
import { ClientPart } from './context';

/** The reviews and decisions part of `TreadleClient` (`client.decisions`). */
export class DecisionsClient extends ClientPart {
  /**
   * Pending reviews across all work items, from visibility alone (one listing call reading attributes and memo:
   * no item is queried, no worker needed). Eventually consistent: a new review may take a second to appear.
   */
  async listReviews(options: { pipeline?: string } = {}): Promise<PendingReviewListing[]> {
    return listPendingReviews(this.context.client, options).catch(this.context.rethrow);
  }

  /** Every pending decision of every kind, oldest first, from one visibility listing (no worker needed). */
  list(options: { pipeline?: string; kinds?: DecisionKind[] } = {}): Promise<PendingDecision[]> {
    return listPendingDecisions(this.context.client, options).catch(this.context.rethrow);
  }

  /** The workflows whose pending decisions changed since `since` (engine 7 items), or that closed since then. */
  changes(since: Date): Promise<DecisionChange[]> {
    return listDecisionChanges(this.context.client, since).catch(this.context.rethrow);
  }

  /**
   * Answers a pending decision by key as `reviewer` (and in reviewer group `options.group`, recorded beside the
   * name); someone deciding first is `already_decided` (decide.ts).
   */
  decide(
    key: string,
    answer: DecisionAnswer,
    reviewer = defaultReviewer(),
    options: { group?: string } = {},
  ): Promise<DecisionOutcome> {
    return decide(this.decisionContext(), key, answer, reviewer, options.group);
  }

  /** What a reviewer needs to judge one pending decision (see decision-detail.ts). */
  detail(key: string, options?: DetailOptions): Promise<DecisionDetail> {
    return decisionDetail(this.decisionContext(), key, options);
  }

  /** An edited artefact's problems against the stage's output schema (none: send it); see decide.ts. */
  checkEdit(key: string, artefact: unknown): Promise<SchemaProblem[]> {
    return checkEdit(this.decisionContext(), key, artefact);
  }

  /**
   * Resolves a review; rejects with a clear message when the stage is not waiting or the input is bad. With no
   * worker answering within `answerWaitMs`, nothing is sent: a TreadleError `no_worker` says so, or, when the
   * item's history shows the stage was decided already, an {@link AlreadyDecidedError} says by whom. `group`, the
   * reviewer group answered for, goes into the update's argument beside `reviewer`, for the audit (the workflow
   * ignores it).
   */
  async review(
    id: string,
    stage: string,
    outcome: ReviewOutcome,
    reviewer = defaultReviewer(),
    group?: string,
  ): Promise<ReviewAccepted> {
    const { client, answerWaitMs, reviewTimeoutMs } = this.context;
    const arg = { stage, outcome, reviewer, ...(group ? { group } : {}) };
    return this.context.call(id, async (h) => {
      try {
        return await updatedByWorker(client, id, {
          what: `the review of ${stage} of ${id}`,
          send: (updateId) => h.executeUpdate(resolveReviewUpdate, { args: [arg], updateId }),
          answerWaitMs,
          timeoutMs: reviewTimeoutMs,
          // The same review sent again (its first answer lost to a server failure) gets the first one's answer.
          repeatOf: { name: resolveReviewUpdate.name, arg, subject: (a) => (a as { stage?: unknown }).stage },
        });
      } catch (error) {
        throw await this.refusal(error, h, id, stage);
      }
    });
  }

  /** Approves a stage (optionally a specific attempt's output). */
  approve(
    id: string,
    stage: string,
    options: { reviewer?: string; note?: string; attempt?: number } = {},
  ): Promise<ReviewAccepted> {
    const outcome: ReviewOutcome = {
      kind: 'approve',
      ...(options.note !== undefined ? { note: options.note } : {}),
      ...(options.attempt !== undefined ? { attempt: options.attempt } : {}),
    };
    return this.review(id, stage, outcome, options.reviewer);
  }

  /** Rejects a stage; the stage fails and its dependents are skipped. */
  reject(
    id: string,
    stage: string,
    reason: string,
    options: { reviewer?: string; note?: string } = {},
  ): Promise<ReviewAccepted> {
    return this.review(
      id,
      stage,
      { kind: 'reject', reason, ...(options.note !== undefined ? { note: options.note } : {}) },
      options.reviewer,
    );
  }

  /**
   * Requests changes: the stage runs one more attempt with `note` in its feedback, beside the gate's last
   * feedback (docs/concepts.md "Request changes"); a missing note or one over 4096 characters is refused.
   */
  requestChanges(
    id: string,
    stage: string,
    note: string,
    options: { reviewer?: string } = {},
  ): Promise<ReviewAccepted> {
    return this.review(id, stage, { kind: 'request_changes', note }, options.reviewer);
  }

  /**
   * Approves with an edited artefact, which downstream stages receive instead of the original; one that breaks
   * the stage's output schema is refused before anything is sent (`invalid_input`, a problem per line). Edits
   * over the blob threshold go to the blob store and only their reference enters the history, as stage
   * artefacts do (so the blob store must be one the workers read, e.g. a shared `TREADLE_BLOB_DIR`).
   */
  async approveWithEdits(
    id: string,
    stage: string,
    artefact: Json,
    options: { reviewer?: string; note?: string; group?: string } = {},
  ): Promise<ReviewAccepted> {
    await refuseNonconformingEdit(this.decisionContext(), id, stage, artefact).catch(async (error: unknown) => {
      // The check reads the item's state, so with no worker answering nothing is sent either.
      if (!(error instanceof TreadleError && error.code === 'no_worker')) throw error;
      throw await this.unsentReview(id, stage, notSent(`the review of ${stage} of ${id}`, error));
    });
    const { blobs, blobThresholdBytes } = this.context;
    const stored = (await offloadArtefact(artefact, blobs, blobThresholdBytes, `edited ${stage} of ${id}`)) ?? null;
    return this.review(
      id,
      stage,
      { kind: 'approve_with_edits', artefact: stored, ...(options.note !== undefined ? { note: options.note } : {}) },
      options.reviewer,
      options.group,
    );
  }

  /** What the kinds' answers reach (decision-kind.ts). */
  private decisionContext(): DecisionContext {
    const client = this.context.client;
    return {
      context: this.context,
      parts: this.parts,
      listed: { reviewDecision, of: (workflowId) => listedDecisionsOf(client, workflowId) },
    };
  }

  /** What a review that failed throws: the refusal's reason, or why nothing was sent. */
  private async refusal(error: unknown, h: WorkflowHandle, id: string, stage: string): Promise<unknown> {
    if (error instanceof WorkflowUpdateFailedError)
      return new TreadleError(`review rejected: ${error.cause?.message ?? error.message}`, 'invalid_review');
    if (error instanceof TreadleError && error.code === 'no_worker') return this.unsentReview(id, stage, error);
    if (isNotFound(error)) {
      // The id may name a finished item rather than no item at all; say which.
      const status = await h.describe().then(
        (d) => d.status.name,
        () => undefined,
      );
      if (status && status !== 'RUNNING') return finished(id, status);
    }
    return error;
  }

  /**
   * Why a review no worker took was not sent: someone decided the stage already (its memo no longer lists it and its
   * history records the decision), or the item has finished, else `unsent` itself (no worker).
   */
  private async unsentReview(id: string, stage: string, unsent: TreadleError): Promise<TreadleError> {
    const { client } = this.context;
    const description = await client.workflow
      .getHandle(id)
      .describe()
      .catch(() => undefined);
    if (!description) return unsent;
    const recorded = await recordedReview(client, id, stage, description).catch(() => undefined);
    if (recorded)
      return new AlreadyDecidedError(
        `review refused: stage ${stage} of ${id} was already decided (${describeDecision(recorded)}, as its history records)`,
        recorded,
      );
    const status = description.status.name;
    return status !== 'RUNNING' ? finished(id, status) : unsent;
  }
}

/** The refusal of a review of an item that has finished. */
function finished(id: string, status: string): TreadleError {
  return new TreadleError(
    `work item ${id} has finished (${status.toLowerCase()}); no stage is waiting for review`,
    'invalid_review',
  );
}
