/**
 * kinds/loop/termination.ts against seed 004 ("Termination Types", "Change 7: Configurable Consensus Count",
 * the guardrails of "Change 6"), without Temporal. Cases:
 * - sequences of agent decisions folded through countStops + beforeIteration + afterIteration exactly as the
 *   loopStage workflow does (see `runLoop`), one `describe` per termination type;
 * - the guardrails: max_iterations for judgment and queue loops, the stage's and the pipeline's
 *   max_runtime_seconds (and which one is the reason when both ran out);
 * - remainingSeconds (context.json's `limits.remaining_seconds`) and readQueueOutput (a queue command's stdout).
 */
import {
  afterIteration,
  beforeIteration,
  countStops,
  limitsOf,
  readQueueOutput,
  remainingSeconds,
  settleAtLimit,
  type LoopCounters,
  type LoopLimits,
  type LoopVerdict,
  type QueueReading,
} from '../../src/kinds/loop/termination';
import { LOOP_DEFAULTS, type Decision, type Termination } from '../../src/kinds/loop/spec';

// ---------------------------------------------------------------------------------------------------------
// The fold

/** The loop's start: 2025-01-10T10:00:00Z (the seed's failure-state timestamp hour). */
const START = Date.UTC(2025, 0, 10, 10, 0, 0);
const SECOND = 1000;

interface RunOptions {
  maxIterations: number;
  /** Seconds the stage may run (default the seed's 7200). */
  stageSeconds?: number;
  /** Seconds the pipeline may run, from the same start; none by default. */
  pipelineSeconds?: number;
  /** The queue's reading before iteration i + 1 (queue loops). */
  queue?: QueueReading[];
  /** The clock when asked before iteration `completed + 1` (default: the start, always). */
  clock?: (completed: number) => number;
}

interface RunResult {
  /** Iterations completed when the loop stopped. */
  iterations: number;
  verdict: LoopVerdict;
  /** Which check stopped it. */
  at: 'before' | 'after';
}

/**
 * Folds the agents' decisions through the rules as the loopStage workflow does: before each iteration
 * `beforeIteration` (clock and queue), then the iteration's decision counted with `countStops`, then
 * `afterIteration`. Throws when the decisions run out while the loop would still iterate, so a test's
 * sequence is always long enough to reach the stop it asserts.
 */
function runLoop(termination: Termination, decisions: readonly Decision[], options: RunOptions): RunResult {
  const limits = limitsOf(
    termination,
    options.maxIterations,
    START + (options.stageSeconds ?? LOOP_DEFAULTS.maxRuntimeSeconds) * SECOND,
    options.pipelineSeconds === undefined ? null : START + options.pipelineSeconds * SECOND,
  );
  const counters: LoopCounters = { iteration: 0, consecutiveStops: 0 };
  for (;;) {
    const before = beforeIteration(
      termination,
      counters,
      limits,
      options.clock?.(counters.iteration) ?? START,
      options.queue?.[counters.iteration],
    );
    if (before.next === 'stop') return { iterations: counters.iteration, verdict: before, at: 'before' };
    const decision = decisions[counters.iteration];
    if (decision === undefined)
      throw new Error(
        `the loop would run iteration ${counters.iteration + 1}, but the test gave only ${decisions.length} decisions`,
      );
    counters.iteration += 1;
    counters.consecutiveStops = countStops(counters.consecutiveStops, decision);
    const after = afterIteration(termination, counters, limits);
    if (after.next === 'stop') return { iterations: counters.iteration, verdict: after, at: 'after' };
  }
}

/** `n` times the same decision. */
function times(n: number, decision: Decision): Decision[] {
  return Array.from({ length: n }, () => decision);
}

function limitsFor(termination: Termination, maxIterations: number, overrides: Partial<LoopLimits> = {}): LoopLimits {
  return { ...limitsOf(termination, maxIterations, START + 60 * SECOND, null), ...overrides };
}

const fixed: Termination = { type: 'fixed' };
const queue: Termination = { type: 'queue' };
function judgment(min_iterations?: number, consensus?: number): Termination {
  return {
    type: 'judgment',
    ...(min_iterations !== undefined ? { min_iterations } : {}),
    ...(consensus !== undefined ? { consensus } : {}),
  };
}

const iterate: LoopVerdict = { next: 'iterate' };
const pending = (count: number): QueueReading => ({ kind: 'pending', count });
const empty: QueueReading = { kind: 'empty' };

// ---------------------------------------------------------------------------------------------------------
// The pieces

describe('countStops', () => {
  test('a stop decision adds one to the consecutive-stop count', () => {
    expect(countStops(0, 'stop')).toBe(1);
    expect(countStops(2, 'stop')).toBe(3);
  });

  test('a continue or an error decision starts the count over', () => {
    expect(countStops(3, 'continue')).toBe(0);
    expect(countStops(3, 'error')).toBe(0);
    expect(countStops(0, 'continue')).toBe(0);
  });
});

describe('limitsOf', () => {
  test("fills in the seed's defaults: checking from iteration 1, consensus of 2", () => {
    expect(limitsOf(judgment(), 100, START + 7_200_000, null)).toEqual({
      maxIterations: 100,
      minIterations: 1,
      consensus: 2,
      stageDeadlineMs: START + 7_200_000,
      pipelineDeadlineMs: null,
    });
    expect(LOOP_DEFAULTS).toMatchObject({ minIterations: 1, consensus: 2 });
  });

  test("takes min_iterations and consensus from a judgment termination, and keeps the pipeline's deadline", () => {
    expect(limitsOf(judgment(2, 3), 50, START + 1000, START + 500)).toEqual({
      maxIterations: 50,
      minIterations: 2,
      consensus: 3,
      stageDeadlineMs: START + 1000,
      pipelineDeadlineMs: START + 500,
    });
  });
});

// ---------------------------------------------------------------------------------------------------------
// Termination types

describe('fixed termination', () => {
  test('runs exactly N iterations when every agent says continue', () => {
    expect(runLoop(fixed, times(10, 'continue'), { maxIterations: 5 })).toEqual({
      iterations: 5,
      at: 'after',
      verdict: { next: 'stop', by: 'termination', reason: '5 iterations done (fixed)' },
    });
  });

  test('stop decisions do not end a fixed loop early', () => {
    expect(runLoop(fixed, times(10, 'stop'), { maxIterations: 5 })).toEqual({
      iterations: 5,
      at: 'after',
      verdict: { next: 'stop', by: 'termination', reason: '5 iterations done (fixed)' },
    });
    expect(runLoop(fixed, ['stop', 'stop', 'continue', 'error', 'stop'], { maxIterations: 5 })).toEqual({
      iterations: 5,
      at: 'after',
      verdict: { next: 'stop', by: 'termination', reason: '5 iterations done (fixed)' },
    });
  });

  test('a fixed loop of 1 iteration stops after that iteration, whatever the agent decided', () => {
    for (const decision of ['continue', 'stop', 'error'] as const) {
      expect(runLoop(fixed, [decision], { maxIterations: 1 })).toEqual({
        iterations: 1,
        at: 'after',
        verdict: { next: 'stop', by: 'termination', reason: '1 iteration done (fixed)' },
      });
    }
  });

  test('a fixed loop that already has its N iterations does not run another one', () => {
    // E.g. after a continue-as-new or a resume: the check before the next iteration stops it too.
    expect(beforeIteration(fixed, { iteration: 3, consecutiveStops: 0 }, limitsFor(fixed, 3), START)).toEqual({
      next: 'stop',
      by: 'termination',
      reason: '3 iterations done (fixed)',
    });
    expect(beforeIteration(fixed, { iteration: 2, consecutiveStops: 0 }, limitsFor(fixed, 3), START)).toEqual(iterate);
  });
});

describe('judgment termination', () => {
  test("the seed's default: 2 consecutive stop decisions end it", () => {
    expect(runLoop(judgment(), ['continue', 'continue', 'stop', 'stop', 'continue'], { maxIterations: 10 })).toEqual({
      iterations: 4,
      at: 'after',
      verdict: { next: 'stop', by: 'termination', reason: '2 consecutive stop decisions (iteration 4)' },
    });
  });

  test('consensus 1: the first stop decision ends it', () => {
    expect(runLoop(judgment(1, 1), ['continue', 'error', 'stop', 'continue'], { maxIterations: 10 })).toEqual({
      iterations: 3,
      at: 'after',
      verdict: { next: 'stop', by: 'termination', reason: '1 consecutive stop decision (iteration 3)' },
    });
    expect(runLoop(judgment(1, 1), ['stop'], { maxIterations: 10 })).toEqual({
      iterations: 1,
      at: 'after',
      verdict: { next: 'stop', by: 'termination', reason: '1 consecutive stop decision (iteration 1)' },
    });
  });

  test('consensus 2: one stop decision alone does not end it, the second in a row does', () => {
    expect(runLoop(judgment(1, 2), ['stop', 'stop'], { maxIterations: 10 })).toEqual({
      iterations: 2,
      at: 'after',
      verdict: { next: 'stop', by: 'termination', reason: '2 consecutive stop decisions (iteration 2)' },
    });
  });

  test('consensus 3: it takes three stop decisions in a row', () => {
    expect(
      runLoop(judgment(1, 3), ['stop', 'stop', 'continue', 'stop', 'stop', 'stop', 'continue'], { maxIterations: 10 }),
    ).toEqual({
      iterations: 6,
      at: 'after',
      verdict: { next: 'stop', by: 'termination', reason: '3 consecutive stop decisions (iteration 6)' },
    });
  });

  test('a continue between stops resets the count: stop, continue, stop, stop with consensus 2 stops at iteration 4', () => {
    expect(runLoop(judgment(1, 2), ['stop', 'continue', 'stop', 'stop', 'continue'], { maxIterations: 10 })).toEqual({
      iterations: 4,
      at: 'after',
      verdict: { next: 'stop', by: 'termination', reason: '2 consecutive stop decisions (iteration 4)' },
    });
  });

  test('an error between stops resets the count too', () => {
    expect(runLoop(judgment(1, 2), ['stop', 'error', 'stop', 'error', 'stop', 'stop'], { maxIterations: 10 })).toEqual({
      iterations: 6,
      at: 'after',
      verdict: { next: 'stop', by: 'termination', reason: '2 consecutive stop decisions (iteration 6)' },
    });
  });

  test('stop decisions before min_iterations do not end it', () => {
    // min_iterations 4, consensus 1: iterations 1 to 3 say stop and the loop goes on; iteration 4 is checked.
    expect(runLoop(judgment(4, 1), ['stop', 'stop', 'stop', 'stop', 'continue'], { maxIterations: 10 })).toEqual({
      iterations: 4,
      at: 'after',
      verdict: { next: 'stop', by: 'termination', reason: '1 consecutive stop decision (iteration 4)' },
    });
    // min_iterations 3, consensus 2: two stops before the checking starts, then a continue resets the count.
    expect(
      runLoop(judgment(3, 2), ['stop', 'stop', 'continue', 'stop', 'stop', 'continue'], { maxIterations: 10 }),
    ).toEqual({
      iterations: 5,
      at: 'after',
      verdict: { next: 'stop', by: 'termination', reason: '2 consecutive stop decisions (iteration 5)' },
    });
  });

  test('it stops exactly at min_iterations when the consensus is there by then', () => {
    expect(runLoop(judgment(3, 2), ['continue', 'stop', 'stop', 'continue'], { maxIterations: 10 })).toEqual({
      iterations: 3,
      at: 'after',
      verdict: { next: 'stop', by: 'termination', reason: '2 consecutive stop decisions (iteration 3)' },
    });
    // The seed's stage.yaml (min_iterations 2, consensus 2): two stops from the start end it at iteration 2.
    expect(runLoop(judgment(2, 2), ['stop', 'stop', 'continue'], { maxIterations: 50 })).toEqual({
      iterations: 2,
      at: 'after',
      verdict: { next: 'stop', by: 'termination', reason: '2 consecutive stop decisions (iteration 2)' },
    });
  });

  test('afterIteration checks the consensus from iteration min_iterations on, not before', () => {
    const t = judgment(3, 2);
    expect(afterIteration(t, { iteration: 2, consecutiveStops: 2 }, limitsFor(t, 10))).toEqual(iterate);
    expect(afterIteration(t, { iteration: 3, consecutiveStops: 2 }, limitsFor(t, 10))).toEqual({
      next: 'stop',
      by: 'termination',
      reason: '2 consecutive stop decisions (iteration 3)',
    });
    expect(afterIteration(t, { iteration: 3, consecutiveStops: 1 }, limitsFor(t, 10))).toEqual(iterate);
  });

  test('consensus reached on the last allowed iteration is the termination, not the guardrail', () => {
    expect(runLoop(judgment(1, 2), ['continue', 'stop', 'stop'], { maxIterations: 3 })).toEqual({
      iterations: 3,
      at: 'after',
      verdict: { next: 'stop', by: 'termination', reason: '2 consecutive stop decisions (iteration 3)' },
    });
  });
});

describe('queue termination', () => {
  test('a queue empty before the first iteration stops the loop with zero iterations', () => {
    expect(runLoop(queue, [], { maxIterations: 10, queue: [empty] })).toEqual({
      iterations: 0,
      at: 'before',
      verdict: { next: 'stop', by: 'termination', reason: 'the queue is empty after 0 iterations' },
    });
  });

  test('a pending queue lets the next iteration run', () => {
    expect(
      beforeIteration(queue, { iteration: 0, consecutiveStops: 0 }, limitsFor(queue, 10), START, pending(3)),
    ).toEqual(iterate);
    expect(
      beforeIteration(queue, { iteration: 4, consecutiveStops: 0 }, limitsFor(queue, 10), START, pending(1)),
    ).toEqual(iterate);
  });

  test('a queue provider that failed means continue', () => {
    expect(
      beforeIteration(queue, { iteration: 0, consecutiveStops: 0 }, limitsFor(queue, 10), START, {
        kind: 'failed',
        error: 'bd: command not found',
      }),
    ).toEqual(iterate);
    expect(
      runLoop(queue, times(3, 'continue'), {
        maxIterations: 10,
        queue: [{ kind: 'failed', error: 'exit 1' }, pending(2), { kind: 'failed', error: 'exit 1' }, empty],
      }),
    ).toEqual({
      iterations: 3,
      at: 'before',
      verdict: { next: 'stop', by: 'termination', reason: 'the queue is empty after 3 iterations' },
    });
  });

  test('the loop runs until the queue is empty, checked before each iteration', () => {
    expect(
      runLoop(queue, times(3, 'continue'), { maxIterations: 10, queue: [pending(3), pending(2), pending(1), empty] }),
    ).toEqual({
      iterations: 3,
      at: 'before',
      verdict: { next: 'stop', by: 'termination', reason: 'the queue is empty after 3 iterations' },
    });
    expect(runLoop(queue, ['continue'], { maxIterations: 10, queue: [pending(1), empty] })).toEqual({
      iterations: 1,
      at: 'before',
      verdict: { next: 'stop', by: 'termination', reason: 'the queue is empty after 1 iteration' },
    });
  });

  test('stop decisions do not end a queue loop while the queue has items', () => {
    expect(
      runLoop(queue, times(4, 'stop'), {
        maxIterations: 10,
        queue: [pending(4), pending(3), pending(2), pending(1), empty],
      }),
    ).toEqual({
      iterations: 4,
      at: 'before',
      verdict: { next: 'stop', by: 'termination', reason: 'the queue is empty after 4 iterations' },
    });
  });

  test('only queue loops read the queue: an empty reading does not stop a judgment or a fixed loop', () => {
    expect(
      beforeIteration(judgment(), { iteration: 1, consecutiveStops: 0 }, limitsFor(judgment(), 10), START, empty),
    ).toEqual(iterate);
    expect(beforeIteration(fixed, { iteration: 1, consecutiveStops: 0 }, limitsFor(fixed, 10), START, empty)).toEqual(
      iterate,
    );
  });
});

// ---------------------------------------------------------------------------------------------------------
// Guardrails

describe('max_iterations guardrail', () => {
  test('a judgment loop that reaches max_iterations without consensus stops by guardrail', () => {
    expect(
      runLoop(judgment(1, 2), ['stop', 'continue', 'stop', 'continue', 'stop', 'continue'], { maxIterations: 5 }),
    ).toEqual({
      iterations: 5,
      at: 'after',
      verdict: {
        next: 'stop',
        by: 'guardrail',
        reason: 'max_iterations (5) reached without 2 consecutive stop decisions after 5 iterations',
      },
    });
    expect(runLoop(judgment(1, 3), times(4, 'continue'), { maxIterations: 4 })).toEqual({
      iterations: 4,
      at: 'after',
      verdict: {
        next: 'stop',
        by: 'guardrail',
        reason: 'max_iterations (4) reached without 3 consecutive stop decisions after 4 iterations',
      },
    });
  });

  test('a judgment loop whose min_iterations is beyond max_iterations stops by guardrail, stops or not', () => {
    const result = runLoop(judgment(5, 1), times(5, 'stop'), { maxIterations: 3 });
    expect(result).toMatchObject({ iterations: 3, at: 'after', verdict: { next: 'stop', by: 'guardrail' } });
    expect(result.verdict.next === 'stop' && result.verdict.reason).toMatch(
      /^max_iterations \(3\) reached .* after 3 iterations$/,
    );
  });

  test('a queue that never empties stops by guardrail at max_iterations', () => {
    expect(
      runLoop(queue, times(3, 'continue'), { maxIterations: 3, queue: Array.from({ length: 4 }, () => pending(9)) }),
    ).toEqual({
      iterations: 3,
      at: 'after',
      verdict: {
        next: 'stop',
        by: 'guardrail',
        reason: 'max_iterations (3) reached with the queue not yet empty after 3 iterations',
      },
    });
  });

  test('a guardrail reason names max_iterations and its value', () => {
    const verdict = afterIteration(judgment(), { iteration: 50, consecutiveStops: 1 }, limitsFor(judgment(), 50));
    expect(verdict).toMatchObject({ next: 'stop', by: 'guardrail' });
    expect(verdict.next === 'stop' && verdict.reason).toMatch(/^max_iterations \(50\) reached/);
  });

  test('beforeIteration stops a loop that already has max_iterations iterations', () => {
    expect(
      beforeIteration(judgment(), { iteration: 10, consecutiveStops: 0 }, limitsFor(judgment(), 10), START),
    ).toEqual({
      next: 'stop',
      by: 'guardrail',
      reason: 'max_iterations (10) reached without 2 consecutive stop decisions after 10 iterations',
    });
    expect(
      beforeIteration(queue, { iteration: 10, consecutiveStops: 0 }, limitsFor(queue, 10), START, pending(1)),
    ).toEqual({
      next: 'stop',
      by: 'guardrail',
      reason: 'max_iterations (10) reached with the queue not yet empty after 10 iterations',
    });
  });
});

describe('runtime guardrails', () => {
  test("the stage's max_runtime_seconds stops the loop before the next iteration", () => {
    // 30 s per iteration against a 60 s stage: iterations 1 and 2 run, the check before iteration 3 stops it.
    expect(
      runLoop(judgment(), times(5, 'continue'), {
        maxIterations: 10,
        stageSeconds: 60,
        clock: (done) => START + done * 30 * SECOND,
      }),
    ).toEqual({
      iterations: 2,
      at: 'before',
      verdict: { next: 'stop', by: 'guardrail', reason: 'max_runtime_seconds ran out after 2 iterations' },
    });
  });

  test("the pipeline's max_runtime_seconds stops the loop with a reason naming the pipeline", () => {
    expect(
      runLoop(fixed, times(5, 'continue'), {
        maxIterations: 5,
        stageSeconds: 7200,
        pipelineSeconds: 90,
        clock: (done) => START + done * 30 * SECOND,
      }),
    ).toEqual({
      iterations: 3,
      at: 'before',
      verdict: {
        next: 'stop',
        by: 'guardrail',
        reason: "the pipeline's max_runtime_seconds ran out after 3 iterations",
      },
    });
  });

  test('a runtime that ran out before the first iteration stops with zero iterations', () => {
    expect(
      runLoop(queue, [], { maxIterations: 10, stageSeconds: 1, queue: [pending(5)], clock: () => START + 2 * SECOND }),
    ).toEqual({
      iterations: 0,
      at: 'before',
      verdict: { next: 'stop', by: 'guardrail', reason: 'max_runtime_seconds ran out after 0 iterations' },
    });
  });

  test('the deadline itself counts as ran out; a millisecond before it does not', () => {
    const limits = limitsFor(judgment(), 10, { stageDeadlineMs: START + 60 * SECOND });
    const counters = { iteration: 1, consecutiveStops: 0 };
    expect(beforeIteration(judgment(), counters, limits, START + 60 * SECOND - 1)).toEqual(iterate);
    expect(beforeIteration(judgment(), counters, limits, START + 60 * SECOND)).toEqual({
      next: 'stop',
      by: 'guardrail',
      reason: 'max_runtime_seconds ran out after 1 iteration',
    });
  });

  test('when both ran out, the one that ran out first is the reason', () => {
    const counters = { iteration: 4, consecutiveStops: 0 };
    const now = START + 120 * SECOND;
    // The stage's ran out first.
    expect(
      beforeIteration(
        judgment(),
        counters,
        limitsFor(judgment(), 10, { stageDeadlineMs: START + 60 * SECOND, pipelineDeadlineMs: START + 90 * SECOND }),
        now,
      ),
    ).toEqual({
      next: 'stop',
      by: 'guardrail',
      reason: 'max_runtime_seconds ran out after 4 iterations',
    });
    // The pipeline's ran out first.
    expect(
      beforeIteration(
        judgment(),
        counters,
        limitsFor(judgment(), 10, { stageDeadlineMs: START + 90 * SECOND, pipelineDeadlineMs: START + 60 * SECOND }),
        now,
      ),
    ).toEqual({
      next: 'stop',
      by: 'guardrail',
      reason: "the pipeline's max_runtime_seconds ran out after 4 iterations",
    });
    // Both at once: the pipeline's.
    expect(
      beforeIteration(
        judgment(),
        counters,
        limitsFor(judgment(), 10, { stageDeadlineMs: START + 60 * SECOND, pipelineDeadlineMs: START + 60 * SECOND }),
        now,
      ),
    ).toEqual({
      next: 'stop',
      by: 'guardrail',
      reason: "the pipeline's max_runtime_seconds ran out after 4 iterations",
    });
  });

  test('only the deadline that ran out is the reason when the other has time left', () => {
    const counters = { iteration: 2, consecutiveStops: 0 };
    const now = START + 75 * SECOND;
    expect(
      beforeIteration(
        judgment(),
        counters,
        limitsFor(judgment(), 10, { stageDeadlineMs: START + 90 * SECOND, pipelineDeadlineMs: START + 60 * SECOND }),
        now,
      ),
    ).toEqual({
      next: 'stop',
      by: 'guardrail',
      reason: "the pipeline's max_runtime_seconds ran out after 2 iterations",
    });
    expect(
      beforeIteration(
        judgment(),
        counters,
        limitsFor(judgment(), 10, { stageDeadlineMs: START + 60 * SECOND, pipelineDeadlineMs: START + 90 * SECOND }),
        now,
      ),
    ).toEqual({
      next: 'stop',
      by: 'guardrail',
      reason: 'max_runtime_seconds ran out after 2 iterations',
    });
  });

  test('a pipeline without a runtime limit never stops the loop by the pipeline', () => {
    const limits = limitsFor(judgment(), 10, { stageDeadlineMs: START + 60 * SECOND, pipelineDeadlineMs: null });
    expect(beforeIteration(judgment(), { iteration: 1, consecutiveStops: 0 }, limits, START + 59 * SECOND)).toEqual(
      iterate,
    );
  });

  test('the runtime guardrails come before max_iterations and the queue in beforeIteration', () => {
    const ranOut = limitsFor(queue, 3, { stageDeadlineMs: START });
    expect(beforeIteration(queue, { iteration: 3, consecutiveStops: 0 }, ranOut, START, empty)).toEqual({
      next: 'stop',
      by: 'guardrail',
      reason: 'max_runtime_seconds ran out after 3 iterations',
    });
    expect(beforeIteration(queue, { iteration: 1, consecutiveStops: 0 }, ranOut, START, empty)).toEqual({
      next: 'stop',
      by: 'guardrail',
      reason: 'max_runtime_seconds ran out after 1 iteration',
    });
  });
});

// ---------------------------------------------------------------------------------------------------------
// context.json's remaining_seconds, the queue command's output

describe('remainingSeconds', () => {
  test("is the stage's time left when the pipeline has no limit", () => {
    expect(remainingSeconds(limitsFor(fixed, 5, { stageDeadlineMs: START + 7200 * SECOND }), START)).toBe(7200);
    expect(
      remainingSeconds(limitsFor(fixed, 5, { stageDeadlineMs: START + 7200 * SECOND }), START + 4000 * SECOND),
    ).toBe(3200);
  });

  test('is the smaller of the two deadlines', () => {
    expect(
      remainingSeconds(
        limitsFor(fixed, 5, { stageDeadlineMs: START + 7200 * SECOND, pipelineDeadlineMs: START + 3200 * SECOND }),
        START,
      ),
    ).toBe(3200);
    expect(
      remainingSeconds(
        limitsFor(fixed, 5, { stageDeadlineMs: START + 600 * SECOND, pipelineDeadlineMs: START + 14_400 * SECOND }),
        START,
      ),
    ).toBe(600);
  });

  test('counts whole seconds, rounding down', () => {
    expect(remainingSeconds(limitsFor(fixed, 5, { stageDeadlineMs: START + 10 * SECOND }), START + 1)).toBe(9);
    expect(remainingSeconds(limitsFor(fixed, 5, { stageDeadlineMs: START + 10 * SECOND }), START + 9_999)).toBe(0);
  });

  test('is never negative: 0 at and after the first deadline', () => {
    expect(remainingSeconds(limitsFor(fixed, 5, { stageDeadlineMs: START }), START)).toBe(0);
    expect(remainingSeconds(limitsFor(fixed, 5, { stageDeadlineMs: START }), START + 3600 * SECOND)).toBe(0);
    expect(
      remainingSeconds(
        limitsFor(fixed, 5, { stageDeadlineMs: START + 3600 * SECOND, pipelineDeadlineMs: START - 60 * SECOND }),
        START,
      ),
    ).toBe(0);
  });
});

describe('readQueueOutput', () => {
  test('no output is an empty queue', () => {
    expect(readQueueOutput('')).toEqual({ kind: 'empty' });
    expect(readQueueOutput('  \n\n')).toEqual({ kind: 'empty' });
  });

  test('0 is an empty queue', () => {
    expect(readQueueOutput('0')).toEqual({ kind: 'empty' });
    expect(readQueueOutput('0\n')).toEqual({ kind: 'empty' });
  });

  test('a number is the count of items left, whitespace around it ignored', () => {
    expect(readQueueOutput('  3\n')).toEqual({ kind: 'pending', count: 3 });
    expect(readQueueOutput('12')).toEqual({ kind: 'pending', count: 12 });
  });

  test('otherwise each non-empty line is an item; blank lines are not', () => {
    expect(readQueueOutput('bd-1 fix login\nbd-2 add tests\n')).toEqual({ kind: 'pending', count: 2 });
    expect(readQueueOutput('\nbd-1 fix login\n\n   \nbd-2 add tests\nbd-3 docs\n\n')).toEqual({
      kind: 'pending',
      count: 3,
    });
    expect(readQueueOutput('bd-1 fix login\r\n\r\nbd-2 add tests\r\n')).toEqual({ kind: 'pending', count: 2 });
  });

  test('a single line that is not a number is one item', () => {
    expect(readQueueOutput('bd-7 refactor the session store')).toEqual({ kind: 'pending', count: 1 });
  });
});

describe('a queue loop at its last allowed iteration', () => {
  const queue: Termination = { type: 'queue' };
  const atLimit = afterIteration(
    queue,
    { iteration: 3, consecutiveStops: 0 },
    limitsOf(queue, 3, Number.MAX_SAFE_INTEGER, null),
  );

  test('if that iteration emptied the queue, the queue is why it ends, not the guardrail', () => {
    expect(atLimit).toMatchObject({ next: 'stop', by: 'guardrail' });
    expect(settleAtLimit(atLimit, queue, { iteration: 3, consecutiveStops: 0 }, { kind: 'empty' })).toEqual({
      next: 'stop',
      by: 'termination',
      reason: 'the queue is empty after 3 iterations',
    });
  });

  test('items left, a failed provider, or another kind of loop: the verdict stands', () => {
    expect(settleAtLimit(atLimit, queue, { iteration: 3, consecutiveStops: 0 }, { kind: 'pending', count: 1 })).toBe(
      atLimit,
    );
    expect(settleAtLimit(atLimit, queue, { iteration: 3, consecutiveStops: 0 }, { kind: 'failed', error: 'x' })).toBe(
      atLimit,
    );
    const judged = afterIteration(
      { type: 'judgment' },
      { iteration: 3, consecutiveStops: 0 },
      limitsOf({ type: 'judgment' }, 3, Number.MAX_SAFE_INTEGER, null),
    );
    expect(settleAtLimit(judged, { type: 'judgment' }, { iteration: 3, consecutiveStops: 0 }, { kind: 'empty' })).toBe(
      judged,
    );
  });

  test('the guardrail reason counts one stop decision in the singular', () => {
    const one: Termination = { type: 'judgment', consensus: 1 };
    expect(
      afterIteration(one, { iteration: 2, consecutiveStops: 0 }, limitsOf(one, 2, Number.MAX_SAFE_INTEGER, null)),
    ).toMatchObject({ reason: 'max_iterations (2) reached without 1 consecutive stop decision after 2 iterations' });
  });
});
