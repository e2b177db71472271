/**
 * The `with:` configurations of the `llm` stage and the `llm-judge` gate. A configuration that does not fit
 * is a spec error no retry can fix: it fails non-retryably as `InvalidConfig`, listing every problem.
 */
import { ApplicationFailure } from '@temporalio/common';
import { z } from 'zod';
import type { ImplementationContext } from '../../activities/registry';
import { compileOutputSchema } from '../../agents/output-schema';
import { JsonSchema, type Json } from '../../model/shapes';

/** Failure type of a `with:` configuration that does not fit the implementation. */
export const INVALID_CONFIG = 'InvalidConfig';

const template = (what: string) => z.string({ error: `${what} must be a template string` }).min(1, `${what} must not be empty`);

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
    prompt: z.string({ error: 'prompt is required: the template of the user message' }).min(1, 'prompt must not be empty'),
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
        z.object({ name: z.string().min(1, 'a criterion needs a name'), description: z.string().min(1, 'a criterion needs a description') }).strict(),
        { error: 'criteria is required: a list of { name, description }' },
      )
      .min(1, 'criteria needs at least one criterion')
      .refine((list) => new Set(list.map((c) => c.name)).size === list.length, 'criterion names must be unique'),
    prompt: template('prompt').optional(),
    ...AgentSettings,
  })
  .strict();
export type LlmJudgeConfig = z.output<typeof LlmJudgeConfigSchema>;

/** Parses an implementation's `with:` config; throws `InvalidConfig` listing every problem. */
export function readLlmConfig<T extends z.ZodType>(ctx: Pick<ImplementationContext, 'config' | 'stage'>, schema: T, implementation: string): z.output<T> {
  const parsed = schema.safeParse(ctx.config ?? ({} as Json));
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`);
  throw ApplicationFailure.nonRetryable(`${ctx.stage}: the with: configuration of ${implementation} is invalid (${problems.length} problem${problems.length === 1 ? '' : 's'}): ${problems.join('; ')}`, INVALID_CONFIG);
}
