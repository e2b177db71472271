/**
 * The client's user-facing error and the checks that turn SDK errors into it: every error a
 * `TreadleClient` call throws is a {@link TreadleError} with one clear line.
 */
import {
  isGrpcCancelledError,
  WorkflowNotFoundError,
  WorkflowUpdateRPCTimeoutOrCancelledError,
} from '@temporalio/client';

export { TreadleError } from '../config/errors';

/** gRPC's NOT_FOUND: the server's answer for a workflow id it has no run of (in a raw service call's error). */
export const GRPC_NOT_FOUND = 5;

/** Whether an SDK error says the workflow does not exist (or no longer takes updates). */
export function isNotFound(error: unknown): boolean {
  return error instanceof WorkflowNotFoundError || (error as { name?: string }).name === 'WorkflowNotFoundError';
}

/**
 * Whether an update or query gave up waiting for a worker (the RPC timed out or the caller's abort signal fired:
 * an aborted query fails as a ServiceError whose cause is gRPC's CANCELLED).
 */
export function isUpdateUnanswered(error: unknown): boolean {
  return (
    error instanceof WorkflowUpdateRPCTimeoutOrCancelledError ||
    isGrpcCancelledError(error) ||
    (error as { name?: string }).name === 'AbortError'
  );
}

/** Who a review or decision is recorded as when the caller names no one. */
export function defaultReviewer(): string {
  return process.env.TREADLE_REVIEWER || process.env.USER || 'anonymous';
}
