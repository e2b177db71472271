/**
 * Attempt-timeout tests on a loaded 2-core machine: one attempt must time out, the next must not.
 *
 * The attempt meant to succeed runs a stage activity and a gate activity (and, in the no-cache run, every
 * workflow task replays the whole history), so its window is generous. The attempt meant to time out sleeps
 * far past it and is cancelled; it ends once its activity has stopped, which is when a heartbeat carries
 * the cancellation to the worker.
 */
import type { WorkerOptions } from '@temporalio/worker';

/** The attempt timeout of these tests: several times what a stage and its gate take on a busy machine. */
export const ATTEMPT_TIMEOUT = '8s';
/** What {@link ATTEMPT_TIMEOUT} reads as in feedback and events. */
export const ATTEMPT_TIMEOUT_TEXT = 'attempt timed out after 8s';
/** How long the attempt meant to time out would take: never reached, the cancellation stops it first. */
export const FAR_TOO_SLOW_MS = 120_000;

/**
 * Worker options for these tests. Core throttles heartbeats to 0.8 × the heartbeat timeout (24 s with the
 * default 30 s), so a cancellation could wait that long for the next heartbeat to carry it; unthrottled,
 * it reaches the activity at its next heartbeat (activities heartbeat every 5 s at most).
 */
export const PROMPT_CANCELLATION: Partial<WorkerOptions> = { maxHeartbeatThrottleInterval: '1s' };
