/**
 * The `llm` stage: renders a prompt template, asks the attempt's agent, and returns the structured reply
 * (or `{ text }`) as the artefact. Feedback from a rejected attempt always reaches the model: templates that
 * do not use `feedback` get a standard feedback section appended. A reply that does not match
 * `output_schema` is not a crash but a rejected attempt: the stage returns it with `rejection` feedback
 * quoting the issues, and the engine retries with that feedback like a gate rejection.
 */
import { ApplicationFailure } from '@temporalio/common';
import type { StageContext, StageImplementation } from '../../activities/registry';
import type { AgentRequest, AgentResult } from '../../agents/types';
import type { CriterionResult, QualityFeedback, StageOutput } from '../../model/shapes';
import { LlmStageConfigSchema, readLlmConfig, type LlmStageConfig } from './config';
import { INVALID_TEMPLATE, feedbackSection, mentionsVariable, promptVars, renderPrompt } from './template';

/** Registered name of the stage. */
export const LLM_STAGE = 'llm';

/** The agent request an attempt makes: rendered system and prompt, feedback appended when the template ignores it. */
export function llmRequest(ctx: StageContext, config: LlmStageConfig): AgentRequest {
  const vars = promptVars(ctx, ctx.feedback);
  let prompt = renderPrompt(config.prompt, vars, 'prompt');
  const handlesFeedback =
    mentionsVariable(config.prompt, 'feedback') ||
    (config.system !== undefined && mentionsVariable(config.system, 'feedback'));
  if (ctx.feedback && !handlesFeedback) prompt = `${prompt.trimEnd()}\n\n${feedbackSection(ctx.feedback)}`;
  const request: AgentRequest = {
    messages: [{ role: 'user', content: prompt }],
    correlationId: ctx.idempotencyKey,
    signal: ctx.signal,
    heartbeat: () => ctx.heartbeat(),
  };
  if (config.system !== undefined) request.system = renderPrompt(config.system, vars, 'system');
  if (config.output_schema !== undefined) request.outputSchema = config.output_schema;
  if (config.model !== undefined) request.model = config.model;
  if (config.max_tokens !== undefined) request.maxTokens = config.max_tokens;
  if (config.temperature !== undefined) request.temperature = config.temperature;
  if (config.conversation !== undefined) {
    const conversationId = renderPrompt(config.conversation, vars, 'conversation').trim();
    if (conversationId.length === 0)
      throw ApplicationFailure.nonRetryable(
        `${ctx.stage}: the conversation template rendered an empty conversation id`,
        INVALID_TEMPLATE,
      );
    request.conversationId = conversationId;
  }
  return request;
}

/**
 * `llm`: one agent call per attempt. Artefact: the structured output when `output_schema` is given, else
 * `{ text }`; a reply that does not match the schema gives `{ raw }` with `rejection` feedback.
 */
export const llmStage: StageImplementation = async (ctx): Promise<StageOutput> => {
  const config = readLlmConfig(ctx, LlmStageConfigSchema, LLM_STAGE);
  const request = llmRequest(ctx, config);
  const result = await ctx.agent(config.agent).run(request);
  const { call } = result;
  const issues = config.output_schema === undefined ? [] : schemaIssues(result);
  ctx.log.info('llm stage replied', {
    itemId: ctx.itemId,
    stage: ctx.stage,
    attempt: ctx.attempt,
    provider: call.provider,
    model: call.model,
    promptHash: call.promptHash,
    inputTokens: result.usage.inputTokens,
    outputTokens: result.usage.outputTokens,
    matchesSchema: issues.length === 0,
  });
  const usage = `${call.model}, ${result.usage.inputTokens} tokens in, ${result.usage.outputTokens} out`;
  if (issues.length > 0) {
    return {
      outcome: 'completed',
      artefact: { raw: result.invalidOutput?.raw ?? result.text },
      summary: `llm (${usage}): the reply did not match output_schema`,
      rejection: schemaRejection(issues),
    };
  }
  if (config.output_schema === undefined || result.output === undefined) {
    return {
      outcome: 'completed',
      artefact: { text: result.text },
      summary: `llm (${usage}): ${result.text.length} characters of text`,
    };
  }
  return { outcome: 'completed', artefact: result.output, summary: `llm (${usage}): structured reply` };
};

/** The issues of a reply that should have matched the schema; empty when it did. */
function schemaIssues(result: AgentResult): string[] {
  if (result.invalidOutput)
    return result.invalidOutput.issues.length > 0
      ? result.invalidOutput.issues
      : ['the reply was rejected without a reason'];
  return result.output === undefined ? ['the agent returned no structured output'] : [];
}

/** Feedback for a reply that did not match `output_schema`: every quoted issue as a failed criterion. */
export function schemaRejection(issues: string[]): QualityFeedback {
  const failedCriteria: CriterionResult[] = issues.map((issue) => ({
    name: 'output_schema',
    expected: 'a reply matching output_schema',
    actual: issue,
    passed: false,
  }));
  return { summary: `the reply did not match the output schema: ${issues[0]}`, failedCriteria, guidance: { issues } };
}
