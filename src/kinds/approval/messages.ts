/**
 * The approval kind's messages (seed 003), handled by the work item that holds the requests: decided by id.
 */
import { defineSignal, defineUpdate } from '@temporalio/workflow';
import type { ApprovalDecided, ApprovalDecision } from './shapes';

/**
 * Fire-and-forget decision, friendly to `temporal workflow signal --name approval --input '{"id": …,
 * "decision": "approve"}'`; an invalid one is recorded as an `ApprovalInputRejected` event and changes nothing.
 */
export const approvalSignal = defineSignal<[ApprovalDecision]>('approval');

/** Validated decision: a stale or double decision is refused to the caller and never enters history. */
export const decideApprovalUpdate = defineUpdate<ApprovalDecided, [ApprovalDecision]>('decideApproval');
