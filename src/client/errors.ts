/**
 * The client's user-facing error and the checks that turn SDK errors into it: every error a
 * `TreadleClient` call throws is a {@link TreadleError} with one clear line.
 */
import { WorkflowNotFoundError, WorkflowUpdateRPCTimeoutOrCancelledError } from '@temporalio/client';

/** A Treadle error meant for users: one line that says what went wrong. */
export class TreadleError extends Error {
  constructor(
    message: string,
    readonly code:
      | 'not_found'
      | 'invalid_pipeline'
      | 'invalid_review'
      | 'unreachable'
      | 'invalid_input'
      | 'failed'
      /** A setting that cannot work as given (a Temporal connection setting, a profile): fix the setting. */
      | 'config',
    readonly problems: string[] = [],
  ) {
    super(message);
    this.name = 'TreadleError';
  }
}

/** Whether an SDK error says the workflow does not exist (or no longer takes updates). */
export function isNotFound(error: unknown): boolean {
  return error instanceof WorkflowNotFoundError || (error as { name?: string }).name === 'WorkflowNotFoundError';
}

/** Whether an update gave up waiting for a worker (the RPC timed out or the caller's abort signal fired). */
export function isUpdateUnanswered(error: unknown): boolean {
  return (
    error instanceof WorkflowUpdateRPCTimeoutOrCancelledError || (error as { name?: string }).name === 'AbortError'
  );
}

/** Who a review or decision is recorded as when the caller names no one. */
export function defaultReviewer(): string {
  return process.env.TREADLE_REVIEWER || process.env.USER || 'anonymous';
}
