/**
 * The built-in `scripted` stage and gate: dry runs of a pipeline's wiring without any agent.
 *
 * The work item input may carry `script: { <stage>: [step, step, ...] }`; attempt n uses step n and the
 * last step repeats. A step may hold `verdict` (accepted | rejected | uncertain, default accepted),
 * `summary`, `criteria` (the failed criteria of the feedback), `sleepMs` (the stage sleeps, honouring
 * cancellation), `error` (the stage throws a retryable error; `errorTimes` limits it to the first n
 * activity executions), `outcome` (completed | skipped | awaiting_review | fan_out, whose `output` is
 * `{items, stage, max_concurrent?, on_item_failure?}`), `output` (the artefact) and
 * `outputBytes` (an artefact of about that size, for blob-store tests). With no `output`, the artefact
 * is `{ stage, attempt, feedback, upstream }`, so the threading of feedback and upstream artefacts shows.
 */
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { z } from 'zod';
import type { Registry, GateImplementation, StageImplementation } from '../activities/registry';
import { JsonSchema, type CriterionResult, type Json, type QualityVerdict } from '../model/shapes';

const CriterionInput = z.union([
  z.string().transform((name): CriterionResult => ({ name, expected: 'pass', actual: 'fail', passed: false })),
  z.object({
    name: z.string(),
    expected: z.string().default('pass'),
    actual: z.string().default('fail'),
    passed: z.boolean().default(false),
  }),
]);

/** One scripted step. */
export const ScriptStepSchema = z
  .object({
    verdict: z.enum(['accepted', 'rejected', 'uncertain']).default('accepted'),
    summary: z.string().optional(),
    criteria: z.array(CriterionInput).default([]),
    guidance: JsonSchema.optional(),
    sleepMs: z.number().int().nonnegative().optional(),
    error: z.string().optional(),
    errorTimes: z.number().int().positive().optional(),
    outcome: z.enum(['completed', 'skipped', 'awaiting_review', 'fan_out']).default('completed'),
    output: JsonSchema.optional(),
    outputBytes: z
      .number()
      .int()
      .positive()
      .max(64 * 1024 * 1024)
      .optional(),
  })
  .strict();
export type ScriptStep = z.input<typeof ScriptStepSchema>;

const ScriptSchema = z.record(z.string(), z.array(ScriptStepSchema).min(1));

/** Picks the step for a stage's attempt; a stage without a script gets the default step. */
export function scriptStep(input: Json, stage: string, attempt: number): z.output<typeof ScriptStepSchema> {
  const script = typeof input === 'object' && input !== null && !Array.isArray(input) ? input.script : undefined;
  if (script === undefined) return ScriptStepSchema.parse({});
  const parsed = ScriptSchema.safeParse(script);
  if (!parsed.success) {
    const issues = parsed.error.issues.slice(0, 3).map((i) => `script.${i.path.join('.')}: ${i.message}`);
    throw ApplicationFailure.nonRetryable(
      `invalid script in the work item input: ${issues.join('; ')}`,
      'InvalidInput',
    );
  }
  const steps = parsed.data[stage];
  if (!steps) return ScriptStepSchema.parse({});
  return steps[Math.min(attempt, steps.length) - 1]!;
}

/** Waits, but gives up as soon as the signal aborts. */
function sleepUnlessAborted(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** The `scripted` stage. */
export const scriptedStage: StageImplementation = async (ctx) => {
  const step = scriptStep(ctx.input, ctx.stage, ctx.attempt);
  if (step.sleepMs) await sleepUnlessAborted(step.sleepMs, ctx.signal);
  if (step.error !== undefined) {
    const execution = Context.current().info.attempt;
    if (step.errorTimes === undefined || execution <= step.errorTimes) {
      throw ApplicationFailure.retryable(`${step.error} (execution ${execution})`, 'ScriptedError');
    }
  }
  let artefact: Json;
  if (step.output !== undefined) artefact = step.output;
  else if (step.outputBytes !== undefined)
    artefact = { stage: ctx.stage, attempt: ctx.attempt, text: 'x'.repeat(step.outputBytes) };
  else artefact = { stage: ctx.stage, attempt: ctx.attempt, feedback: ctx.feedback, upstream: ctx.upstream };
  return {
    outcome: step.outcome,
    artefact,
    summary: `${ctx.stage} attempt ${ctx.attempt}${step.outcome === 'completed' ? '' : ` (${step.outcome})`}`,
  };
};

/** The `scripted` gate: returns the verdict the step names. */
export const scriptedGate: GateImplementation = async (ctx): Promise<QualityVerdict> => {
  const step = scriptStep(ctx.input, ctx.stage, ctx.attempt);
  if (step.verdict === 'accepted') return { kind: 'accepted' };
  if (step.verdict === 'uncertain')
    return { kind: 'uncertain', reason: step.summary ?? `the script marks attempt ${ctx.attempt} uncertain` };
  return {
    kind: 'rejected',
    feedback: {
      summary: step.summary ?? `the script rejects attempt ${ctx.attempt}`,
      failedCriteria: step.criteria,
      ...(step.guidance !== undefined ? { guidance: step.guidance } : {}),
    },
  };
};

/** Registers the scripted stage and gate. */
export function registerScripted(registry: Registry): Registry {
  return registry.stage('scripted', scriptedStage).gate('scripted', scriptedGate);
}
