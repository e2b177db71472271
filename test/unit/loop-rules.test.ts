/**
 * Seed 004's termination rules and files without Temporal: the pure functions the loopStage workflow asks
 * before and after each iteration, folded over the decision sequences that matter, and the zod schemas of
 * stage.yaml, pipeline.yaml and status.json.
 */
import { afterIteration, beforeIteration, countStops, limitsOf, readQueueOutput, remainingSeconds, type LoopVerdict } from '../../src/engine/loop-termination';
import { checkLoopStageConfig, describeFileIssue, iterationDir, LoopPipelineFileSchema, stageDirName, StageFileSchema, StatusFileSchema, type Decision, type Termination } from '../../src/model/loop';

const NOW = 1_000_000;
const limits = (t: Termination, max: number, stageDeadline = NOW + 60_000, pipelineDeadline: number | null = null) => limitsOf(t, max, stageDeadline, pipelineDeadline);

/** Runs decisions through the rules as the workflow does; returns where it stopped and why. */
function run(t: Termination, max: number, decisions: Decision[]): { iterations: number; verdict: LoopVerdict } {
  const counters = { iteration: 0, consecutiveStops: 0 };
  const l = limits(t, max);
  for (const decision of decisions) {
    const before = beforeIteration(t, counters, l, NOW);
    if (before.next === 'stop') return { iterations: counters.iteration, verdict: before };
    counters.iteration++;
    counters.consecutiveStops = countStops(counters.consecutiveStops, decision);
    const after = afterIteration(t, counters, l);
    if (after.next === 'stop') return { iterations: counters.iteration, verdict: after };
  }
  return { iterations: counters.iteration, verdict: { next: 'iterate' } };
}

describe('fixed', () => {
  test('exactly N iterations; stop decisions do not end it early', () => {
    expect(run({ type: 'fixed' }, 3, ['stop', 'stop', 'stop', 'stop'])).toEqual({ iterations: 3, verdict: { next: 'stop', by: 'termination', reason: '3 iterations done (fixed)' } });
    expect(run({ type: 'fixed' }, 1, ['continue'])).toEqual({ iterations: 1, verdict: { next: 'stop', by: 'termination', reason: '1 iteration done (fixed)' } });
  });
});

describe('judgment', () => {
  const judged = (min: number, consensus: number): Termination => ({ type: 'judgment', min_iterations: min, consensus });
  test('consensus consecutive stops end it', () => {
    expect(run(judged(1, 2), 10, ['continue', 'stop', 'stop', 'continue'])).toEqual({ iterations: 3, verdict: { next: 'stop', by: 'termination', reason: '2 consecutive stop decisions (iteration 3)' } });
    expect(run(judged(1, 1), 10, ['continue', 'stop'])).toMatchObject({ iterations: 2, verdict: { reason: '1 consecutive stop decision (iteration 2)' } });
    expect(run(judged(1, 3), 10, ['stop', 'stop', 'continue', 'stop', 'stop', 'stop'])).toMatchObject({ iterations: 6 });
  });
  test('any other decision resets the count', () => {
    expect(run(judged(1, 2), 10, ['stop', 'continue', 'stop', 'stop'])).toMatchObject({ iterations: 4 });
    expect(run(judged(1, 2), 10, ['stop', 'error', 'stop', 'stop'])).toMatchObject({ iterations: 4 });
  });
  test('stops before min_iterations do not end it; the count reached by then does', () => {
    expect(run(judged(3, 2), 10, ['stop', 'stop', 'stop'])).toMatchObject({ iterations: 3, verdict: { by: 'termination' } });
    expect(run(judged(4, 2), 10, ['stop', 'stop', 'continue', 'stop', 'stop'])).toMatchObject({ iterations: 5 });
  });
  test('the defaults: consensus 2 from iteration 1', () => {
    expect(limitsOf({ type: 'judgment' }, 5, 0, null)).toMatchObject({ minIterations: 1, consensus: 2 });
    expect(run({ type: 'judgment' }, 10, ['stop', 'stop'])).toMatchObject({ iterations: 2 });
  });
  test('max_iterations without consensus is a guardrail stop that says so', () => {
    expect(run(judged(1, 2), 3, ['continue', 'stop', 'continue', 'stop'])).toEqual({
      iterations: 3,
      verdict: { next: 'stop', by: 'guardrail', reason: 'max_iterations (3) reached without 2 consecutive stop decisions after 3 iterations' },
    });
  });
});

describe('queue and runtime, before an iteration', () => {
  const queue: Termination = { type: 'queue' };
  const start = { iteration: 0, consecutiveStops: 0 };
  test('an empty queue stops, even before the first iteration; pending and a failed provider go on', () => {
    expect(beforeIteration(queue, start, limits(queue, 10), NOW, { kind: 'empty' })).toEqual({ next: 'stop', by: 'termination', reason: 'the queue is empty after 0 iterations' });
    expect(beforeIteration(queue, start, limits(queue, 10), NOW, { kind: 'pending', count: 3 })).toEqual({ next: 'iterate' });
    expect(beforeIteration(queue, start, limits(queue, 10), NOW, { kind: 'failed', error: 'bd: not found' })).toEqual({ next: 'iterate' });
  });
  test('a queue loop never stops on decisions, only on max_iterations', () => {
    expect(afterIteration(queue, { iteration: 2, consecutiveStops: 2 }, limits(queue, 10))).toEqual({ next: 'iterate' });
    expect(afterIteration(queue, { iteration: 10, consecutiveStops: 0 }, limits(queue, 10))).toMatchObject({ by: 'guardrail', reason: expect.stringContaining('with the queue not yet empty') });
  });
  test('the stage runtime and the pipeline runtime; the first to run out is the reason', () => {
    const fixed: Termination = { type: 'fixed' };
    const at = { iteration: 4, consecutiveStops: 0 };
    expect(beforeIteration(fixed, at, limits(fixed, 10, NOW), NOW)).toEqual({ next: 'stop', by: 'guardrail', reason: 'max_runtime_seconds ran out after 4 iterations' });
    expect(beforeIteration(fixed, at, limits(fixed, 10, NOW + 5_000, NOW - 1), NOW)).toEqual({ next: 'stop', by: 'guardrail', reason: "the pipeline's max_runtime_seconds ran out after 4 iterations" });
    expect(beforeIteration(fixed, at, limits(fixed, 10, NOW - 10, NOW - 5), NOW)).toMatchObject({ reason: 'max_runtime_seconds ran out after 4 iterations' });
    expect(beforeIteration(fixed, at, limits(fixed, 10, NOW - 5, NOW - 10), NOW)).toMatchObject({ reason: "the pipeline's max_runtime_seconds ran out after 4 iterations" });
    expect(beforeIteration(fixed, at, limits(fixed, 10, NOW + 1, NOW + 1), NOW)).toEqual({ next: 'iterate' });
  });
  test('remaining seconds: the nearer deadline, never below zero', () => {
    expect(remainingSeconds(limits({ type: 'fixed' }, 1, NOW + 90_500, NOW + 30_000), NOW)).toBe(30);
    expect(remainingSeconds(limits({ type: 'fixed' }, 1, NOW + 90_500), NOW)).toBe(90);
    expect(remainingSeconds(limits({ type: 'fixed' }, 1, NOW - 5_000), NOW)).toBe(0);
  });
  test('a queue command’s output: a count, or one line per item', () => {
    expect(readQueueOutput('')).toEqual({ kind: 'empty' });
    expect(readQueueOutput('0\n')).toEqual({ kind: 'empty' });
    expect(readQueueOutput('  3\n')).toEqual({ kind: 'pending', count: 3 });
    expect(readQueueOutput('bd-1 fix login\n\nbd-2 add search\n')).toEqual({ kind: 'pending', count: 2 });
  });
});

describe('the seed’s files', () => {
  test('stage.yaml as the seed writes it', () => {
    const stage = { name: 'improve-plan', description: 'Iteratively improve a plan document', tags: ['refinement', 'planning'], prompt: 'prompt.md', termination: { type: 'judgment', min_iterations: 2, consensus: 2 }, output: 'docs/plan-${SESSION}.md', guardrails: { max_iterations: 50, max_runtime_seconds: 7200 }, verify: [], delay: 3, model: 'opus' };
    expect(StageFileSchema.safeParse(stage).success).toBe(true);
  });
  test('stage.yaml problems at their path, with did-you-mean', () => {
    const bad = StageFileSchema.safeParse({ name: 'x', prompt: 'p.md', termination: { type: 'judgement' } });
    expect(bad.success).toBe(false);
    if (!bad.success) expect(describeFileIssue('stage.yaml', bad.error.issues[0]!, [], 'judgement')).toBe('stage.yaml: termination.type: must be one of judgment, queue, fixed (got "judgement"; did you mean "judgment"?)');
    const unknown = StageFileSchema.safeParse({ name: 'x', prompt: 'p.md', termination: { type: 'fixed' }, guardrail: {} });
    if (!unknown.success) expect(describeFileIssue('stage.yaml', unknown.error.issues[0]!, Object.keys(StageFileSchema.shape), undefined)).toMatch(/^stage.yaml: guardrail: unknown field \(did you mean "guardrails"\?\)/);
    expect(StageFileSchema.safeParse({ name: 'x', prompt: 'p.md', termination: { type: 'fixed', consensus: 2 } }).error?.issues[0]?.path).toEqual(['termination', 'consensus']);
    expect(StageFileSchema.safeParse({ name: 'x', prompt: 'p.md', termination: { type: 'judgment', queue: { provider: 'signal' } } }).error?.issues[0]?.path).toEqual(['termination', 'queue']);
    expect(StageFileSchema.safeParse({ name: 'x', prompt: 'p.md', termination: { type: 'fixed' }, guardrails: { max_iterations: 0 } }).error?.issues[0]?.path).toEqual(['guardrails', 'max_iterations']);
  });
  test('the seed’s full-ideation pipeline.yaml; select defaults to latest', () => {
    const parsed = LoopPipelineFileSchema.parse({
      name: 'full-ideation',
      description: 'Generate ideas, synthesize, refine',
      guardrails: { max_runtime_seconds: 14400 },
      stages: [
        { id: 'ideas', template: 'idea-generator', max_iterations: 5 },
        { id: 'synthesize', template: 'synthesizer', max_iterations: 1, inputs: { from: 'ideas', select: 'all' }, output: 'docs/plan-${SESSION}.md' },
        { id: 'refine', template: 'refiner', max_iterations: 10, inputs: { from: 'synthesize' }, output: 'docs/plan-${SESSION}.md', verify: ['markdownlint ${OUTPUT}'] },
      ],
    });
    expect(parsed.stages[2]!.inputs).toEqual({ from: 'synthesize', select: 'latest' });
  });
  test('status.json: the seed’s example, a wrong decision, a missing reason; extra fields kept', () => {
    const example = { decision: 'continue', reason: 'Improved clarity', summary: 'Rewrote the section.', work: { items_completed: [], files_touched: ['docs/plan-auth.md'] }, verify: { ran: true, passed: true }, errors: [], mood: 'fine' };
    expect(StatusFileSchema.parse(example)).toMatchObject({ decision: 'continue', mood: 'fine' });
    expect(StatusFileSchema.safeParse({ ...example, decision: 'done' }).success).toBe(false);
    const { reason: _reason, ...noReason } = example;
    expect(StatusFileSchema.safeParse(noReason).error?.issues[0]?.path).toEqual(['reason']);
    expect(StatusFileSchema.parse({ decision: 'stop', reason: 'r', summary: 's' }).errors).toEqual([]);
  });
  test('a loop stage’s output must stay in the workspace; the folder names', () => {
    const stage = { name: 'x', prompt: 'go', termination: { type: 'fixed' } };
    expect(checkLoopStageConfig({ stage, output: '.claude' })).toEqual([]);
    expect(checkLoopStageConfig({ stage, output: '/etc/x' })).toEqual(['output: "/etc/x" is absolute; give a path relative to the workspace']);
    expect(checkLoopStageConfig({ stage: { ...stage, output: 'a/../../b' } })).toEqual(['stage.output: "a/../../b" leads out of the workspace ("..")']);
    expect(checkLoopStageConfig({})).toContain('stage: Invalid input: expected object, received undefined');
    expect(iterationDir(3)).toBe('iterations/003');
    expect(stageDirName(2, 'refine')).toBe('stage-02-refine');
  });
});
