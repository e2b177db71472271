/**
 * A TDD node's humans: `ClarificationNeeded`, `Stuck` and a reviewer's `Reject` wait in the same review queue
 * as stage reviews (`treadle reviews`, the `resolveReview` update or the `review` signal), checked as a work
 * item's reviews are (`engine/review.ts`); an approval's note or edit is the answer, a rejection aborts.
 */
import { ApplicationFailure, condition, setHandler } from '@temporalio/workflow';
import { checkReview } from '../../engine/review';
import { truncateText } from '../../model/limits';
import { decisionAnnouncer, type Announcer } from '../../notify/announce';
import { now } from '../../workflow-kit/common';
import { resolveReviewUpdate, reviewSignal } from '../../workflow-kit/messages';
import type { HumanAnswer } from './routes';
import type { EventType, TreadleEvent } from '../../model/shapes';
import type { HumanReason, TddNodeInput, TddNodeState } from './shapes';
import { reviewTarget } from './node-view';

/**
 * What the review queue needs of its node (`TddNodeRun` is one): declared here so that this file does not
 * import the run that imports it.
 */
export interface ReviewingNode {
  readonly info: { workflowId: string };
  readonly state: TddNodeState;
  readonly settings: TddNodeInput['settings'];
  readonly input: Pick<TddNodeInput, 'itemId' | 'announce'>;
  emit(type: EventType, message: string, fields?: Partial<TreadleEvent>): void;
  publish(): void;
}

/** The node's review queue: the handlers that answer it and the wait for an answer. */
export class HumanReviews {
  private answer: HumanAnswer | undefined;
  /** Who gave the answer, for the `ReviewResolved` event. */
  private reviewer: string | undefined;

  constructor(private readonly node: ReviewingNode) {}

  /**
   * The `review` signal (bad input becomes an event) and the `resolveReview` update (bad input is rejected
   * to the caller by its validator), as a work item has them.
   */
  registerHandlers(): void {
    const { node } = this;
    setHandler(reviewSignal, (payload) => {
      const answered = this.answerReview(payload);
      if (!answered.ok) node.emit('ReviewInputRejected', answered.error);
    });
    setHandler(
      resolveReviewUpdate,
      (payload) => {
        const answered = this.answerReview(payload);
        if (!answered.ok) throw ApplicationFailure.nonRetryable(answered.error, 'InvalidReview');
        return {
          itemId: node.info.workflowId,
          stage: answered.stage,
          outcome: answered.outcome as 'approve' | 'reject' | 'approve_with_edits',
          reviewer: answered.reviewer,
        };
      },
      {
        validator: (payload) => {
          const checked = checkReview(reviewTarget(node.state, node.info.workflowId), payload);
          if (!checked.ok) throw new Error(checked.error);
        },
      },
    );
  }

  /** A human's review: a rejection aborts; an approval's note or edit is the answer. */
  private answerReview(
    payload: unknown,
  ): { ok: true; stage: string; outcome: string; reviewer: string } | { ok: false; error: string } {
    const { node } = this;
    const checked = checkReview(reviewTarget(node.state, node.info.workflowId), payload);
    if (!checked.ok) return checked;
    const outcome = checked.review.outcome;
    this.answer =
      outcome.kind === 'reject'
        ? { kind: 'abort', reason: outcome.reason }
        : {
            kind: 'answer',
            text:
              outcome.kind === 'approve_with_edits'
                ? typeof outcome.artefact === 'string'
                  ? outcome.artefact
                  : JSON.stringify(outcome.artefact)
                : (outcome.note ?? 'approved'),
          };
    this.reviewer = checked.review.reviewer;
    node.state.pendingReviews = [];
    return { ok: true, stage: checked.review.stage, outcome: outcome.kind, reviewer: checked.review.reviewer };
  }

  /** Puts the node in the review queue and waits for a human's answer, an abort, or the wait's expiry. */
  async wait(reason: HumanReason, message: string, stage: string): Promise<HumanAnswer> {
    const { node } = this;
    const { state, settings } = node;
    state.phase = 'human';
    state.status = 'waiting_review';
    state.human = { reason, message: truncateText(message, 1_000) };
    const expiresAt = settings.humanTtlSeconds
      ? new Date(Date.now() + settings.humanTtlSeconds * 1000).toISOString()
      : undefined;
    state.pendingReviews = [
      {
        stage,
        reason: 'escalated',
        message: truncateText(`${reason}: ${message}`, 500),
        requestedAt: now(),
        attempt: state.counters.implAttempt,
        ...(expiresAt ? { expiresAt } : {}),
        human: reason,
        ...(node.input.itemId !== undefined ? { itemId: node.input.itemId } : {}),
      },
    ];
    this.answer = undefined;
    this.reviewer = undefined;
    node.emit('ReviewRequested', `${stage} waits for a human (${reason}): ${message}`, { stage });
    node.publish();
    const said = this.announcer(stage, state.pendingReviews[0]!.requestedAt);
    if (said) await said('decision_owed', `${stage} waits for a human (${reason}): ${truncateText(message, 300)}`);
    const answered = settings.humanTtlSeconds
      ? await condition(() => this.answer !== undefined, settings.humanTtlSeconds * 1000)
      : await condition(() => this.answer !== undefined).then(() => true);
    const given = this.answer as HumanAnswer | undefined; // set by the handlers while we waited
    const answer: HumanAnswer = answered && given ? given : { kind: 'expired' };
    state.pendingReviews = [];
    state.human = undefined;
    state.status = 'running';
    node.emit(
      answer.kind === 'expired' ? 'ReviewExpired' : 'ReviewResolved',
      answer.kind === 'expired'
        ? `${stage}: nobody answered in time`
        : answer.kind === 'abort'
          ? `${stage}: aborted: ${answer.reason}`
          : `${stage}: answered`,
      answer.kind === 'expired' || this.reviewer === undefined
        ? { stage }
        : { stage, details: { reviewer: this.reviewer } },
    );
    if (said) {
      const by = this.reviewer !== undefined ? { decidedBy: this.reviewer } : {};
      await said('decided', `${stage}: ${answer.kind}`, { ...by, outcome: answer.kind });
    }
    return answer;
  }

  /** The announcer of this node's human step when its work item announces (see TddNodeInput.announce). */
  private announcer(stage: string, requestedAt: string): Announcer | undefined {
    const { input, info } = this.node;
    if (input.announce === undefined) return undefined;
    return decisionAnnouncer(
      {
        kind: 'tdd',
        subject: stage,
        itemId: input.itemId ?? info.workflowId,
        pipeline: input.announce.pipeline,
        stage,
        requestedAt,
      },
      () => undefined,
    );
  }
}
