/**
 * LLM-backed implementations: the `llm` stage (a prompt template in, a structured or text reply out) and the
 * `llm-judge` gate (criteria judged by a model). Both call the attempt's agent (`ctx.agent`), so they run
 * offline with the scripted agent and against Claude with a key, unchanged.
 */
import type { Registry } from '../../activities/registry';
import { LLM_JUDGE_GATE, llmJudge } from './judge';
import { LLM_STAGE, llmStage } from './stage';
import { llmJudgeConfigProblems, llmStageConfigProblems } from './config';

/**
 * Registers the `llm` stage and the `llm-judge` gate as agent-backed (the token budget applies), with their
 * config checks (a template that does not parse is refused when the spec is validated); returns the registry.
 */
export function registerLlm(registry: Registry): Registry {
  return registry
    .stage(LLM_STAGE, llmStage, { usesAgent: true, checkConfig: llmStageConfigProblems })
    .gate(LLM_JUDGE_GATE, llmJudge, { usesAgent: true, checkConfig: llmJudgeConfigProblems });
}

export { LLM_STAGE, llmStage, llmRequest, schemaRejection } from './stage';
export {
  LLM_JUDGE_GATE,
  llmJudge,
  judgeRequest,
  judgeVerdict,
  JUDGE_OUTPUT_SCHEMA,
  MAX_JUDGED_OUTPUT_CHARS,
  NOT_ASSESSED,
  type JudgeReply,
} from './judge';
export {
  LlmStageConfigSchema,
  LlmJudgeConfigSchema,
  readLlmConfig,
  llmStageConfigProblems,
  llmJudgeConfigProblems,
  INVALID_CONFIG,
  type LlmStageConfig,
  type LlmJudgeConfig,
} from './config';
export {
  renderPrompt,
  promptVars,
  feedbackSection,
  mentionsVariable,
  templateProblem,
  INVALID_TEMPLATE,
  MAX_TEMPLATE_CHARS,
  MAX_RENDERED_CHARS,
  TEMPLATE_RENDER_LIMIT_MS,
  TEMPLATE_MEMORY_LIMIT,
  type PromptVars,
  type TemplateFeedback,
} from './template';
