/**
 * `treadle resume` and `TreadleClient.resumeLoop`: picks the failed loop stage of a work item (or the loop's own
 * workflow) and sends it the validated `resumeLoop` update, with who decided.
 */
import { WorkflowUpdateFailedError, type Client } from '@temporalio/client';
import type { LoopState, ResumeRequest } from '../kinds/loop/shapes';
import { resumeLoopUpdate } from '../kinds/loop/messages';
import { defaultReviewer, TreadleError } from './errors';
import { updatedByWorker } from './worker-presence';

/** What a resume says: which loop stage, resume or abandon, why, and who. */
export interface LoopResumeOptions {
  stage?: string;
  action?: 'resume' | 'abandon';
  reason?: string;
  by?: string;
  /** With a resume: a note the rerun iteration reads in its `context.json` (`resume.note`). */
  note?: string;
}

/**
 * Resumes (or abandons) the one failed loop among `started`, the loops work item `id` started; rejects with the
 * reason when none, or more than one without `stage`, is failed, and when the loop refuses.
 */
export async function resumeFailedLoop(
  client: Client,
  id: string,
  started: { workflowId: string; state: LoopState }[],
  options: LoopResumeOptions,
  timeoutMs: number,
  answerWaitMs?: number,
): Promise<{ workflowId: string; stage: string; from: number; resumed: boolean }> {
  const loops = started.filter((l) => options.stage === undefined || l.state.stage === options.stage);
  if (loops.length === 0)
    throw new TreadleError(
      options.stage
        ? `work item ${id} has no loop stage "${options.stage}" that has started`
        : `work item ${id} has no loop stage that has started`,
      'invalid_review',
    );
  const failed = loops.filter((l) => l.state.status === 'failed');
  if (failed.length === 0) {
    throw new TreadleError(
      `no loop stage of ${id} is failed, so there is nothing to resume (${loops.map((l) => `${l.state.stage}: ${l.state.status} at iteration ${l.state.iteration}`).join('; ')})`,
      'invalid_review',
    );
  }
  if (failed.length > 1)
    throw new TreadleError(
      `several loop stages of ${id} are failed (${failed.map((l) => l.state.stage).join(', ')}); name one with --stage`,
      'invalid_review',
    );
  const loop = failed[0]!;
  const request = {
    action: options.action ?? 'resume',
    ...(options.reason !== undefined ? { reason: options.reason } : {}),
    ...(options.note !== undefined ? { note: options.note } : {}),
    by: options.by ?? defaultReviewer(),
  };
  const answer = await sendResume(client, loop.workflowId, request, timeoutMs, answerWaitMs);
  return { workflowId: loop.workflowId, stage: loop.state.stage, ...answer };
}

/**
 * Sends `resumeLoop` to a loop stage's own workflow once a worker answers (see `updatedByWorker`: with none within
 * `answerWaitMs`, nothing is sent); the loop's refusal becomes a TreadleError with its reason.
 */
export async function sendResume(
  client: Client,
  loopId: string,
  request: ResumeRequest,
  timeoutMs: number,
  answerWaitMs?: number,
): Promise<{ from: number; resumed: boolean }> {
  try {
    return await updatedByWorker(client, loopId, {
      what: `the ${request.action} of loop ${loopId}`,
      send: (updateId) =>
        client.workflow.getHandle(loopId).executeUpdate(resumeLoopUpdate, { args: [request], updateId }),
      timeoutMs,
      // The same answer sent again (its first reply lost to a server failure) gets the first one's reply.
      repeatOf: { name: resumeLoopUpdate.name, arg: request, subject: () => 'resume' },
      ...(answerWaitMs !== undefined ? { answerWaitMs } : {}),
    });
  } catch (error) {
    if (error instanceof WorkflowUpdateFailedError)
      throw new TreadleError(`resume refused: ${error.cause?.message ?? error.message}`, 'invalid_review');
    throw error;
  }
}
