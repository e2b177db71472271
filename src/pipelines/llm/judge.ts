/**
 * The `llm-judge` gate: asks the attempt's agent to judge the stage output against named criteria and maps
 * the structured answer onto a verdict. Accepted when every listed criterion passed; rejected with each
 * failed (or unassessed) criterion as feedback; uncertain when the judge says so — or cannot answer in the
 * expected shape, since a judge that cannot answer is not sure.
 */
import { z } from 'zod';
import type { GateContext, GateImplementation } from '../../activities/registry';
import { GATE_CORRELATION_SUFFIX } from '../../agents/scripted';
import type { AgentRequest } from '../../agents/types';
import type { CriterionResult, Json, QualityFeedback, QualityVerdict } from '../../model/shapes';
import { LlmJudgeConfigSchema, readLlmConfig, type LlmJudgeConfig } from './config';
import { mentionsVariable, promptVars, renderPrompt, type PromptVars } from './template';

/** Registered name of the gate. */
export const LLM_JUDGE_GATE = 'llm-judge';

/** The judge sees at most this many characters of the stage output's JSON. */
export const MAX_JUDGED_OUTPUT_CHARS = 20_000;

/** Actual value of a criterion the judge's reply left out. */
export const NOT_ASSESSED = 'not assessed';

/** JSON Schema of the judge's reply, sent as the request's `outputSchema`. */
export const JUDGE_OUTPUT_SCHEMA: Json = {
  type: 'object',
  required: ['criteria'],
  properties: {
    criteria: {
      type: 'array',
      items: {
        type: 'object',
        required: ['name', 'passed', 'actual'],
        properties: {
          name: { type: 'string', description: 'the criterion name, exactly as given' },
          passed: { type: 'boolean', description: 'true when the output meets the criterion' },
          actual: { type: 'string', description: 'what you observed in the output' },
        },
      },
    },
    uncertain: { type: 'boolean', description: 'true when the output does not let you decide' },
    reason: { type: 'string', description: 'why you are uncertain, or a one-line overall assessment' },
  },
};

const JudgeReplySchema = z.object({
  criteria: z.array(z.object({ name: z.string(), passed: z.boolean(), actual: z.string() })),
  uncertain: z.boolean().optional(),
  reason: z.string().optional(),
});
/** The judge's parsed reply. */
export type JudgeReply = z.infer<typeof JudgeReplySchema>;

const DEFAULT_SYSTEM =
  'You are a strict, fair reviewer. You judge work against the criteria you are given, one by one, and report what you observed. You never add criteria of your own.';

const DEFAULT_PROMPT = `Judge the output of the stage "{{ stage }}" (attempt {{ attempt }} of {{ max_attempts }}).
{% if output_summary %}
Summary of the output: {{ output_summary }}
{% endif %}
The output as JSON{% if output_truncated %} (truncated to its first ${MAX_JUDGED_OUTPUT_CHARS} characters){% endif %}:
<output>
{{ output_json }}
</output>

{{ criteria_list }}

For every criterion, answer with its exact name, whether the output meets it (passed) and what you observed (actual: one sentence, quoting the output where it helps). If the output does not let you decide, set uncertain to true and give the reason.`;

/** The agent request of a judgement: rendered system and prompt, the criteria always listed. */
export function judgeRequest(ctx: GateContext, config: LlmJudgeConfig): AgentRequest {
  const vars = judgeVars(ctx, config);
  const template = config.prompt ?? DEFAULT_PROMPT;
  let prompt = renderPrompt(template, vars, 'judge prompt');
  if (!mentionsVariable(template, 'criteria') && !mentionsVariable(template, 'criteria_list'))
    prompt = `${prompt.trimEnd()}\n\n${vars.criteria_list}`;
  const request: AgentRequest = {
    system: renderPrompt(config.system ?? DEFAULT_SYSTEM, vars, 'judge system'),
    messages: [{ role: 'user', content: prompt }],
    outputSchema: JUDGE_OUTPUT_SCHEMA,
    correlationId: `${ctx.idempotencyKey}${GATE_CORRELATION_SUFFIX}`,
    signal: ctx.signal,
    heartbeat: () => ctx.heartbeat(),
  };
  if (config.model !== undefined) request.model = config.model;
  return request;
}

/** `llm-judge`: one agent call per judgement; see the module comment for the verdicts. */
export const llmJudge: GateImplementation = async (ctx) => {
  const config = readLlmConfig(ctx, LlmJudgeConfigSchema, LLM_JUDGE_GATE);
  const result = await ctx.agent(config.agent).run(judgeRequest(ctx, config));
  ctx.log.info('llm judge replied', {
    itemId: ctx.itemId,
    stage: ctx.stage,
    attempt: ctx.attempt,
    provider: result.call.provider,
    model: result.call.model,
    promptHash: result.call.promptHash,
    inputTokens: result.usage.inputTokens,
    outputTokens: result.usage.outputTokens,
  });
  if (result.invalidOutput) return malformed(result.invalidOutput.issues[0] ?? 'no reason given');
  const reply = JudgeReplySchema.safeParse(result.output);
  if (!reply.success) {
    const issue = reply.error.issues[0];
    return malformed(issue ? `${issue.path.join('.') || '(root)'}: ${issue.message}` : 'no structured reply');
  }
  return judgeVerdict(config.criteria, reply.data);
};

/**
 * Maps a judge's reply onto a verdict: uncertain when it says so; accepted when every listed criterion
 * passed; else rejected, criteria it did not assess counting as failed with actual {@link NOT_ASSESSED}.
 */
export function judgeVerdict(criteria: LlmJudgeConfig['criteria'], reply: JudgeReply): QualityVerdict {
  if (reply.uncertain)
    return { kind: 'uncertain', reason: reply.reason?.trim() || 'the judge was not sure and gave no reason' };
  const answers = new Map<string, JudgeReply['criteria'][number]>();
  for (const answer of reply.criteria) if (!answers.has(answer.name)) answers.set(answer.name, answer);
  const failedCriteria: CriterionResult[] = [];
  for (const criterion of criteria) {
    const answer = answers.get(criterion.name);
    if (answer?.passed) continue;
    failedCriteria.push({
      name: criterion.name,
      expected: criterion.description,
      actual: answer?.actual ?? NOT_ASSESSED,
      passed: false,
    });
  }
  if (failedCriteria.length === 0) return { kind: 'accepted' };
  const feedback: QualityFeedback = {
    summary: `${failedCriteria.length} of ${criteria.length} criteria not met: ${failedCriteria.map((c) => c.name).join(', ')}`,
    failedCriteria,
  };
  if (reply.reason?.trim()) feedback.guidance = { judge: reply.reason.trim() };
  return { kind: 'rejected', feedback };
}

function malformed(issue: string): QualityVerdict {
  return { kind: 'uncertain', reason: `the judge's reply did not match the verdict schema: ${issue}` };
}

/** Template variables of a judgement: the attempt's, plus the output under judgement and the criteria. */
function judgeVars(ctx: GateContext, config: LlmJudgeConfig): PromptVars {
  // The feedback this attempt was given is the previous attempt's; a judge can check it was acted on.
  const previous = ctx.previousAttempts[ctx.previousAttempts.length - 1];
  const json = JSON.stringify(ctx.output.artefact ?? null, null, 2);
  return {
    ...promptVars(ctx, previous?.feedback ?? null),
    output: ctx.output.artefact ?? null,
    output_summary: ctx.output.summary ?? '',
    output_json:
      json.length > MAX_JUDGED_OUTPUT_CHARS
        ? `${json.slice(0, MAX_JUDGED_OUTPUT_CHARS)}\n… (${json.length - MAX_JUDGED_OUTPUT_CHARS} more characters)`
        : json,
    output_truncated: json.length > MAX_JUDGED_OUTPUT_CHARS,
    criteria: config.criteria,
    criteria_list: ['Criteria:', ...config.criteria.map((c) => `- ${c.name}: ${c.description}`)].join('\n'),
  };
}
