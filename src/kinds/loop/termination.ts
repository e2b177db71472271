/**
 * Seed 004's termination rules and guardrails as pure functions: the `loopStage` workflow asks them before
 * and after every iteration and does what they say. Unit-tested over the sequences that matter
 * (test/unit/loop-termination.test.ts).
 *
 * - `fixed`: exactly N iterations (N = `max_iterations`); the agents' decisions do not end it early.
 * - `judgment`: stops once `consensus` consecutive iterations decided `stop`, checked from iteration
 *   `min_iterations` on (the seed's "start checking after this many"); any other decision resets the count.
 * - `queue`: stops when the external queue is empty, checked before each iteration; a provider that fails
 *   means "continue".
 * - Guardrails stop a loop that would run on: `max_iterations` for judgment and queue loops, the stage's
 *   `max_runtime_seconds` and the pipeline's. A guardrail stop completes the stage (with what it has) and
 *   says so; only errors fail it.
 */
import type { Decision, Termination } from './spec';

/** What the workflow counts. */
export interface LoopCounters {
  /** Iterations completed. */
  iteration: number;
  /** Consecutive `stop` decisions ending with the last iteration (see {@link countStops}). */
  consecutiveStops: number;
}

export interface LoopLimits {
  maxIterations: number;
  minIterations: number;
  consensus: number;
  /** Epoch ms when the stage's runtime runs out. */
  stageDeadlineMs: number;
  /** Epoch ms when the pipeline's runtime runs out, if it has a limit. */
  pipelineDeadlineMs: number | null;
}

/** What the queue provider said before an iteration. */
export type QueueReading = { kind: 'empty' } | { kind: 'pending'; count: number } | { kind: 'failed'; error: string };

export type LoopVerdict = { next: 'iterate' } | { next: 'stop'; by: 'termination' | 'guardrail'; reason: string };

/** The consecutive-stop count after an iteration's decision: `stop` adds one, anything else starts over. */
export function countStops(before: number, decision: Decision): number {
  return decision === 'stop' ? before + 1 : 0;
}

/** The limits a termination and its guardrails give, with the seed's defaults filled in. */
export function limitsOf(
  termination: Termination,
  maxIterations: number,
  stageDeadlineMs: number,
  pipelineDeadlineMs: number | null,
): LoopLimits {
  return {
    maxIterations,
    minIterations: termination.min_iterations ?? 1,
    consensus: termination.consensus ?? 2,
    stageDeadlineMs,
    pipelineDeadlineMs,
  };
}

/** Before iteration `counters.iteration + 1`: the runtime guardrails, then (queue loops) the queue. */
export function beforeIteration(
  termination: Termination,
  counters: LoopCounters,
  limits: LoopLimits,
  nowMs: number,
  queue?: QueueReading,
): LoopVerdict {
  const runtime = runtimeStop(limits, nowMs, counters);
  if (runtime) return runtime;
  if (counters.iteration >= limits.maxIterations) return maxIterationsStop(termination, counters, limits);
  if (termination.type === 'queue' && queue?.kind === 'empty') {
    return {
      next: 'stop',
      by: 'termination',
      reason: `the queue is empty after ${plural(counters.iteration, 'iteration')}`,
    };
  }
  return { next: 'iterate' };
}

/** After an iteration (its decision already counted into `counters`): the termination rule, then the iteration guardrail. */
export function afterIteration(termination: Termination, counters: LoopCounters, limits: LoopLimits): LoopVerdict {
  if (
    termination.type === 'judgment' &&
    counters.iteration >= limits.minIterations &&
    counters.consecutiveStops >= limits.consensus
  ) {
    return {
      next: 'stop',
      by: 'termination',
      reason: `${limits.consensus} consecutive stop decision${limits.consensus === 1 ? '' : 's'} (iteration ${counters.iteration})`,
    };
  }
  if (counters.iteration >= limits.maxIterations) return maxIterationsStop(termination, counters, limits);
  return { next: 'iterate' };
}

/**
 * A queue loop that reached `max_iterations`: if its last iteration emptied the queue (`reading`, taken after
 * it), the loop ended because the queue is empty, not by the guardrail. Any other verdict stands.
 */
export function settleAtLimit(
  verdict: LoopVerdict,
  termination: Termination,
  counters: LoopCounters,
  reading: QueueReading | undefined,
): LoopVerdict {
  if (
    verdict.next !== 'stop' ||
    verdict.by !== 'guardrail' ||
    termination.type !== 'queue' ||
    reading?.kind !== 'empty'
  )
    return verdict;
  return {
    next: 'stop',
    by: 'termination',
    reason: `the queue is empty after ${plural(counters.iteration, 'iteration')}`,
  };
}

function maxIterationsStop(termination: Termination, counters: LoopCounters, limits: LoopLimits): LoopVerdict {
  if (termination.type === 'fixed')
    return { next: 'stop', by: 'termination', reason: `${plural(limits.maxIterations, 'iteration')} done (fixed)` };
  const why =
    termination.type === 'judgment'
      ? `without ${limits.consensus} consecutive stop decision${limits.consensus === 1 ? '' : 's'}`
      : 'with the queue not yet empty';
  return {
    next: 'stop',
    by: 'guardrail',
    reason: `max_iterations (${limits.maxIterations}) reached ${why} after ${plural(counters.iteration, 'iteration')}`,
  };
}

function runtimeStop(limits: LoopLimits, nowMs: number, counters: LoopCounters): LoopVerdict | null {
  const pipelineOut = limits.pipelineDeadlineMs !== null && nowMs >= limits.pipelineDeadlineMs;
  const stageOut = nowMs >= limits.stageDeadlineMs;
  if (!pipelineOut && !stageOut) return null;
  // When both ran out, the one that ran out first is the reason.
  const pipelineFirst = pipelineOut && (!stageOut || limits.pipelineDeadlineMs! <= limits.stageDeadlineMs);
  return {
    next: 'stop',
    by: 'guardrail',
    reason: `${pipelineFirst ? "the pipeline's " : ''}max_runtime_seconds ran out after ${plural(counters.iteration, 'iteration')}`,
  };
}

/** Seconds left before the first deadline, for `context.json`'s `limits.remaining_seconds`. */
export function remainingSeconds(limits: LoopLimits, nowMs: number): number {
  const deadline =
    limits.pipelineDeadlineMs === null
      ? limits.stageDeadlineMs
      : Math.min(limits.stageDeadlineMs, limits.pipelineDeadlineMs);
  return Math.max(0, Math.floor((deadline - nowMs) / 1000));
}

/**
 * A queue provider's output as a reading: a number is the count of items left; otherwise each non-empty line
 * is an item. No output, or `0`, is empty.
 */
export function readQueueOutput(stdout: string): QueueReading {
  const text = stdout.trim();
  if (text === '') return { kind: 'empty' };
  if (/^\d+$/.test(text)) {
    const count = Number(text);
    return count === 0 ? { kind: 'empty' } : { kind: 'pending', count };
  }
  return { kind: 'pending', count: text.split('\n').filter((line) => line.trim() !== '').length };
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}
