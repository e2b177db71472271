/**
 * A loop stage's messages (seed 004), handled by its `loopStage` workflow.
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import { LOOP_QUEUE_SIGNAL, RESUME_LOOP_UPDATE, type LoopState, type ResumeRequest } from './shapes';

/** A loop stage's state (seed 004): iterations, decisions, the failure waiting for a resume. */
export const loopStateQuery = defineQuery<LoopState>('loopState');
/**
 * Resumes a failed loop stage from the iteration that failed (`action: "resume"`), or gives it up
 * (`abandon`: the stage fails for good). Refused, with the reason, when the loop is not failed.
 */
export const resumeLoopUpdate = defineUpdate<{ resumed: boolean; from: number }, [ResumeRequest]>(RESUME_LOOP_UPDATE);
/** A signal-fed queue's owner reports how many items are left (seed 004's queue termination). */
export const loopQueueSignal = defineSignal<[{ pending: number }]>(LOOP_QUEUE_SIGNAL);
