/**
 * The human kind's part of the work item (issue 40): its requests live in the item's state, so the item handles
 * the person's answer (the validated `respondHuman` update) and publishes the pending requests: each waiting
 * stage in `TreadlePendingReviews` (so listings find the item), the requests in the `treadleHuman` memo, and a
 * block of the Web UI's current details. The kind's row (kind.ts) hands these to the work item as its hooks.
 */
import { ApplicationFailure } from '@temporalio/workflow';
import type { HumanRequest, WorkItemState } from '../../model/state';
import type { KindItemContext, KindPublication } from '../../workflow-kit/stage-kind';
import { respondHumanUpdate } from './messages';
import { HUMAN_MEMO_KEY, checkHumanResponse, type HumanMemo } from './shapes';
import { HUMAN_OUTPUTS } from './stage';

/** Sets the work item's handler of `respondHuman`: the output (or rejection) of the waiting attempt. */
export function installHumanHandlers(item: KindItemContext): void {
  const { state, itemId, setHandler } = item;
  setHandler(
    respondHumanUpdate,
    (payload) => {
      const checked = checkHumanResponse(state.humanRequests ?? [], itemId, payload);
      if (!checked.ok) throw ApplicationFailure.nonRetryable(checked.error, 'InvalidResponse');
      const { request, response } = checked;
      request.respondedAt = new Date().toISOString();
      request.respondedBy = response.by;
      if (response.reject !== undefined) {
        request.status = 'rejected';
        request.reason = response.reject;
      } else {
        request.status = 'responded';
        HUMAN_OUTPUTS.set(request, response.outputRef ?? response.output);
      }
      item.emit(
        'HumanResponded',
        `${request.stage}: ${request.status === 'rejected' ? `rejected by ${response.by}: ${request.reason}` : `output supplied by ${response.by}`} (attempt ${request.attempt})`,
        { stage: request.stage, attempt: request.attempt, details: { by: response.by, status: request.status } },
      );
      item.touch();
      return { itemId, stage: request.stage, attempt: request.attempt, outcome: request.status, by: response.by };
    },
    {
      validator: (payload) => {
        const checked = checkHumanResponse(state.humanRequests ?? [], itemId, payload);
        if (!checked.ok) throw new Error(checked.error);
      },
      description:
        "A waiting human stage's output: {stage, attempt, output | outputRef, by}, or {stage, attempt, reject: reason, by}.",
    },
  );
}

/** The pending requests, oldest first. */
function pendingOf(state: WorkItemState): HumanRequest[] {
  return (state.humanRequests ?? []).filter((r) => r.status === 'pending');
}

/**
 * What the item publishes for its human requests, once it has had any (items without any never carry the memo
 * key): the pending stages (in `TreadlePendingReviews`, with the item's own reviews), the memo and the details.
 */
export function humanPublication(state: WorkItemState): KindPublication | undefined {
  if (state.humanRequests === undefined) return undefined;
  const pending = pendingOf(state);
  return {
    // A request handed to another group when overdue is a change the inbox's delta listing must see.
    pending: pending.map((r) => `human:${r.stage}:${r.attempt}${r.escalated ? `:${r.escalated.to}` : ''}`),
    stages: pending.map((r) => r.stage),
    memo: { [HUMAN_MEMO_KEY]: humanMemoOf(state) },
    ...(pending.length > 0
      ? {
          details: {
            heading: 'Waiting for a person (treadle respond <id> <stage> --output @file.json):',
            lines: pending.map(
              (r) =>
                `- **${r.stage}** attempt ${r.attempt}${r.reviewers ? ` (${r.reviewers})` : ''}${r.feedback ? `: the gate said ${r.feedback}` : ''}`,
            ),
          },
        }
      : {}),
  };
}

/** The pending requests for listings, or null when none waits. */
export function humanMemoOf(state: WorkItemState): HumanMemo | null {
  const pending = pendingOf(state);
  return pending.length === 0 ? null : { pipeline: state.pipeline, requests: pending };
}
