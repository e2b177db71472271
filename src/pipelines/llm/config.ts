/**
 * The `with:` configurations of the `llm` stage and the `llm-judge` gate. A configuration that does not fit
 * (a template that does not parse included) is a spec error no retry can fix: it fails non-retryably as
 * `InvalidConfig`, listing every problem. {@link llmStageConfigProblems} and {@link llmJudgeConfigProblems}
 * run the same checks when a spec is validated, before anything runs.
 */
import { ApplicationFailure } from '@temporalio/common';
import { z } from 'zod';
import type { ImplementationContext } from '../../activities/registry';
import { compileOutputSchema } from '../../agents/output-schema';
import { JsonSchema, type Json } from '../../model/shapes';
import { templateProblem } from './template';

/** Failure type of a `with:` configuration that does not fit the implementation. */
export const INVALID_CONFIG = 'InvalidConfig';

/** A Liquid template that parses; `message` is the error when the value is missing or not a string. */
const template = (what: string, message = `${what} must be a template string`) =>
  z
    .string({ error: message })
    .min(1, `${what} must not be empty`)
    .superRefine((text, ctx) => {
      const problem = text.length === 0 ? undefined : templateProblem(text);
      if (problem !== undefined)
        ctx.addIssue({ code: 'custom', message: `the ${what} template does not parse: ${problem}` });
    });

/** Settings both implementations share: how to reach the model. */
const AgentSettings = {
  system: template('system').optional(),
  model: z.string().min(1, 'model must not be empty').optional(),
  /** The agent provider (`anthropic`, `scripted`, ...); the stage's `agent:` or the worker default otherwise. */
  agent: z.string().min(1, 'agent must name a provider').optional(),
  /** Read by the scripted agent: a JSON file of canned replies. */
  replies_file: z.string().min(1).optional(),
};

/** `with:` of the `llm` stage. */
export const LlmStageConfigSchema = z
  .object({
    prompt: template('prompt', 'prompt is required: the template of the user message'),
    ...AgentSettings,
    /** JSON Schema of the structured reply; the artefact is the reply when given, `{ text }` otherwise. */
    output_schema: z.record(z.string(), JsonSchema, { error: 'output_schema must be a JSON Schema object' }).optional(),
    max_tokens: z.number().int('max_tokens must be a whole number').positive('max_tokens must be positive').optional(),
    temperature: z.number().min(0, 'temperature must be at least 0').max(2, 'temperature must be at most 2').optional(),
    /** Template of a conversation id, e.g. `{{ item_id }}-design`: stages sharing it continue one conversation. */
    conversation: template('conversation').optional(),
  })
  .strict()
  .superRefine((config, ctx) => {
    if (config.output_schema === undefined) return;
    try {
      compileOutputSchema(config.output_schema);
    } catch (error) {
      ctx.addIssue({ code: 'custom', path: ['output_schema'], message: (error as Error).message });
    }
  });
export type LlmStageConfig = z.output<typeof LlmStageConfigSchema>;

/** `with:` of the `llm-judge` gate. */
export const LlmJudgeConfigSchema = z
  .object({
    criteria: z
      .array(
        z
          .object({
            name: z.string().min(1, 'a criterion needs a name'),
            description: z.string().min(1, 'a criterion needs a description'),
          })
          .strict(),
        { error: 'criteria is required: a list of { name, description }' },
      )
      .min(1, 'criteria needs at least one criterion')
      .refine((list) => new Set(list.map((c) => c.name)).size === list.length, 'criterion names must be unique'),
    prompt: template('prompt').optional(),
    ...AgentSettings,
  })
  .strict();
export type LlmJudgeConfig = z.output<typeof LlmJudgeConfigSchema>;

/** Every problem of an `llm` stage's `with:` config (`path: message`); empty when it is valid. */
export function llmStageConfigProblems(config: Json | undefined): string[] {
  return configProblems(LlmStageConfigSchema, config);
}

/** Every problem of an `llm-judge` gate's `with:` config (`path: message`); empty when it is valid. */
export function llmJudgeConfigProblems(config: Json | undefined): string[] {
  return configProblems(LlmJudgeConfigSchema, config);
}

function configProblems(schema: z.ZodType, config: Json | undefined): string[] {
  const parsed = schema.safeParse(config ?? {});
  return parsed.success
    ? []
    : parsed.error.issues.map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`);
}

/** Parses an implementation's `with:` config; throws `InvalidConfig` listing every problem. */
export function readLlmConfig<T extends z.ZodType>(
  ctx: Pick<ImplementationContext, 'config' | 'stage'>,
  schema: T,
  implementation: string,
): z.output<T> {
  const parsed = schema.safeParse(ctx.config ?? ({} as Json));
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`);
  throw ApplicationFailure.nonRetryable(
    `${ctx.stage}: the with: configuration of ${implementation} is invalid (${problems.length} problem${problems.length === 1 ? '' : 's'}): ${problems.join('; ')}`,
    INVALID_CONFIG,
  );
}
