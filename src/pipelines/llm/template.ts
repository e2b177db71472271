/**
 * Prompt templates of the LLM stage and judge: Jinja-style templates rendered with nunjucks. Templates see
 * the attempt as plain variables (`input`, `upstream`, `attempt`, `max_attempts`, `feedback`,
 * `previous_attempts`, `stage`, `item_id`, `config`) and a `tojson` filter. A template that does not
 * compile or render is a spec error no retry can fix, so it fails non-retryably as `InvalidTemplate`.
 */
import { ApplicationFailure } from '@temporalio/common';
import { Environment, Template } from 'nunjucks';
import type { ImplementationContext } from '../../activities/registry';
import type { AttemptRecord, CriterionResult, Json, QualityFeedback } from '../../model/shapes';

/** Failure type of a prompt template that does not compile or render. */
export const INVALID_TEMPLATE = 'InvalidTemplate';

/** Feedback as templates see it: the shared shape plus the snake_case alias `failed_criteria`. */
export type TemplateFeedback = QualityFeedback & { failed_criteria: CriterionResult[] };

/** The variables every prompt template is rendered with; implementations may add their own. */
export interface PromptVars {
  /** The work item's payload. */
  input: Json;
  /** Dependencies' artefacts by stage name. */
  upstream: Record<string, Json>;
  attempt: number;
  max_attempts: number;
  /** The previous attempt's feedback; null on a first attempt. */
  feedback: TemplateFeedback | null;
  previous_attempts: AttemptRecord[];
  stage: string;
  item_id: string;
  /** The implementation's `with:` config. */
  config: Json | null;
  [extra: string]: unknown;
}

// Prompts are not HTML: no escaping. Undefined variables render empty, as in Jinja's default mode.
const environment = new Environment(null, { autoescape: false, throwOnUndefined: false });
environment.addFilter('tojson', (value: unknown, indent?: number) => JSON.stringify(value ?? null, null, indent) ?? 'null');

/** The template variables of an attempt. */
export function promptVars(ctx: ImplementationContext, feedback: QualityFeedback | null): PromptVars {
  return {
    input: ctx.input,
    upstream: ctx.upstream,
    attempt: ctx.attempt,
    max_attempts: ctx.maxAttempts,
    feedback: feedback ? { ...feedback, failed_criteria: feedback.failedCriteria } : null,
    previous_attempts: ctx.previousAttempts,
    stage: ctx.stage,
    item_id: ctx.itemId,
    config: ctx.config ?? null,
  };
}

/**
 * Renders a template. Throws `ApplicationFailure.nonRetryable(..., 'InvalidTemplate')` naming the stage,
 * which template (`what`: prompt, system, ...) and nunjucks' own message when it does not compile or render.
 */
export function renderPrompt(template: string, vars: PromptVars, what = 'prompt'): string {
  try {
    return new Template(template, environment, undefined, true).render(vars);
  } catch (error) {
    const message = (error as Error).message
      .replace(/\(unknown path\)\s*/g, '')
      .replace(/\b(Template render error|Error): /g, '')
      .replace(/\s+/g, ' ')
      .trim();
    throw ApplicationFailure.nonRetryable(`${vars.stage}: the ${what} template is invalid: ${message}`, INVALID_TEMPLATE);
  }
}

/** True when a template refers to a variable inside a `{{ }}` or `{% %}` tag (so it handles it itself). */
export function mentionsVariable(template: string, name: string): boolean {
  // A bare variable, not a property of another (`input.feedback`, `x["feedback"]` are someone else's).
  return new RegExp(`\\{[{%](?:(?![}%]\\})[\\s\\S])*?(?<![\\w.$\\["'])${name}\\b`).test(template);
}

/**
 * The standard feedback section appended to a prompt whose template does not use `feedback`, so a
 * rejection always reaches the model (seed 000: feedback is injected into the next attempt's prompt).
 */
export function feedbackSection(feedback: QualityFeedback): string {
  const lines = ['## Feedback on your previous attempt', '', `Your previous attempt was rejected: ${feedback.summary}`];
  const failed = feedback.failedCriteria.filter((c) => !c.passed);
  if (failed.length > 0) {
    lines.push('', 'Failed criteria:', ...failed.map((c) => `- ${c.name}: expected ${c.expected}; actual ${c.actual}`));
  }
  if (feedback.guidance !== undefined) lines.push('', `Guidance: ${JSON.stringify(feedback.guidance)}`);
  lines.push('', 'Address every point above in this attempt.');
  return lines.join('\n');
}
