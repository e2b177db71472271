/**
 * Prompt templates of the LLM stage and judge: Liquid templates (LiquidJS) rendered with the attempt as plain
 * variables (`input`, `upstream`, `attempt`, `max_attempts`, `feedback`, `previous_attempts`, `stage`,
 * `item_id`, `config`) and a `tojson` filter.
 *
 * Templates come from the pipeline spec, and anyone who can start a work item can send a spec, so a template
 * is untrusted: Liquid was designed for templates written by strangers (it has no way to call a function or
 * evaluate an expression), and the engine below is configured to keep it that way. Templates read only the
 * variables they are given, and only those variables' own properties (no `constructor`, no prototype); they
 * cannot read files (`include`, `render` and `layout` are refused when the template is parsed, and the engine
 * has no file system); unknown filters are parse errors; and parse size, render time, counted allocations
 * and the rendered length are capped, so a template cannot hang or exhaust a worker. A template that does not
 * parse, breaks a limit or fails to render is a spec error no retry can fix: it fails non-retryably as
 * `InvalidTemplate`, naming the stage.
 */
import { ApplicationFailure } from '@temporalio/common';
import { Liquid, Tag, type Context, type FS, type Template } from 'liquidjs';
import type { ImplementationContext } from '../../activities/registry';
import type { AttemptRecord, CriterionResult, Json, QualityFeedback } from '../../model/shapes';

/** Failure type of a prompt template that does not parse or render. */
export const INVALID_TEMPLATE = 'InvalidTemplate';

/** A template longer than this does not parse: prompts are instructions, the material comes in variables. */
export const MAX_TEMPLATE_CHARS = 200_000;
/**
 * Rendering stops after this long. Real prompts render in well under a millisecond; rendering is
 * synchronous, so this also bounds how long one template can hold the worker's event loop.
 */
export const TEMPLATE_RENDER_LIMIT_MS = 1_000;
/**
 * Characters (or array elements) the engine may allocate in one render through its counted operations
 * (ranges, `append`, `split`, `concat`, `join`, `tojson`, date padding, ...): five times the longest prompt.
 */
export const TEMPLATE_MEMORY_LIMIT = 20_000_000;
/** A rendered prompt longer than this is refused: about a million tokens, more than any model's context. */
export const MAX_RENDERED_CHARS = 4_000_000;

/** Tags that would read templates from files; refused, so that no template can reach the worker's disk. */
const FILE_TAGS = ['include', 'render', 'layout'] as const;

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

/** The engine's file system: there is none. Only reached if a file tag were ever registered again. */
const NO_FILES: FS = {
  exists: async () => false,
  existsSync: () => false,
  readFile: async () => Promise.reject(new Error('prompt templates cannot read files')),
  readFileSync: () => {
    throw new Error('prompt templates cannot read files');
  },
  resolve: (_dir, file) => file,
  contains: async () => false,
  containsSync: () => false,
};

function createEngine(): Liquid {
  const engine = new Liquid({
    fs: NO_FILES,
    root: [],
    partials: [],
    layouts: [],
    relativeReference: false,
    dynamicPartials: false,
    // Only the variables' own properties: `input.constructor`, `x.__proto__` and the like read as empty.
    ownPropertyOnly: true,
    // A misspelt filter is a parse error (caught when the spec is validated), not a silently empty value.
    strictFilters: true,
    // Missing variables render empty, as they did with Jinja; `''`, `0` and `null` are false in `{% if %}`.
    strictVariables: false,
    jsTruthy: true,
    // No `outputEscape`: prompts are not HTML, nothing is escaped.
    parseLimit: MAX_TEMPLATE_CHARS,
    renderLimit: TEMPLATE_RENDER_LIMIT_MS,
    memoryLimit: TEMPLATE_MEMORY_LIMIT,
  });
  for (const name of FILE_TAGS) engine.registerTag(name, refusedFileTag(name));
  engine.registerFilter('tojson', function (this: { context: Context }, value: unknown, indent?: unknown) {
    const json =
      JSON.stringify(value ?? null, null, typeof indent === 'number' ? Math.min(Math.max(indent, 0), 10) : undefined) ??
      'null';
    // Counted like the built-in `json` filter, so a loop of `tojson` over a large value meets the memory limit.
    this.context.memoryLimit.use(json.length);
    return json;
  });
  return engine;
}

/** A tag class whose parsing fails with a message that says why. */
function refusedFileTag(name: string): new (...args: ConstructorParameters<typeof Tag>) => Tag {
  return class RefusedFileTag extends Tag {
    constructor(...args: ConstructorParameters<typeof Tag>) {
      super(...args);
      throw new Error(`the ${name} tag is not available: prompt templates cannot read files`);
    }
    render(): void {
      // Never reached: construction fails.
    }
  };
}

const engine = createEngine();

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
 * Why a template does not parse (one line), or undefined when it does. Used to validate the templates of a
 * spec before anything runs.
 */
export function templateProblem(template: string): string | undefined {
  try {
    engine.parse(template);
    return undefined;
  } catch (error) {
    return engineMessage(error);
  }
}

/**
 * Renders a template. Throws `ApplicationFailure.nonRetryable(..., 'InvalidTemplate')` naming the stage,
 * which template (`what`: prompt, system, ...) and the engine's message when it does not parse, breaks a
 * limit or does not render.
 */
export function renderPrompt(template: string, vars: PromptVars, what = 'prompt'): string {
  const invalid = (reason: string): ApplicationFailure =>
    ApplicationFailure.nonRetryable(`${vars.stage}: the ${what} template is invalid: ${reason}`, INVALID_TEMPLATE);
  let parsed: Template[];
  try {
    parsed = engine.parse(template);
  } catch (error) {
    throw invalid(engineMessage(error));
  }
  let rendered: unknown;
  try {
    // Variables go through a JSON round trip: templates see plain data only, never a function or a class.
    rendered = engine.renderSync(parsed, plainData(vars));
  } catch (error) {
    throw invalid(engineMessage(error));
  }
  const text = String(rendered);
  if (text.length > MAX_RENDERED_CHARS)
    throw invalid(`it rendered ${text.length} characters, more than the ${MAX_RENDERED_CHARS} a prompt may have`);
  return text;
}

/**
 * True when a template reads a variable of that name (a global one: `feedback.summary`, `{% if feedback %}`),
 * so it handles it itself. Properties of other variables (`input.feedback`, `upstream["feedback"]`) and
 * variables the template assigns itself do not count. A template that does not parse mentions nothing.
 */
export function mentionsVariable(template: string, name: string): boolean {
  try {
    return engine.globalVariablesSync(engine.parse(template), { partials: false }).includes(name);
  } catch {
    return false;
  }
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
  if (feedback.reviewer !== undefined && typeof feedback.guidance === 'string')
    lines.push('', `The reviewer ${feedback.reviewer} asked for these changes:`, feedback.guidance);
  else if (feedback.guidance !== undefined) lines.push('', `Guidance: ${JSON.stringify(feedback.guidance)}`);
  lines.push('', 'Address every point above in this attempt.');
  return lines.join('\n');
}

/**
 * The variables as plain JSON (undefined values dropped): nothing but data reaches a template, not even a
 * function an implementation added by mistake (the engine would call an own function property).
 */
function plainData(vars: PromptVars): Record<string, unknown> {
  return JSON.parse(JSON.stringify(vars)) as Record<string, unknown>;
}

/** The engine's message on one line (it already ends with the line and column). */
function engineMessage(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.replace(/\s+/g, ' ').trim();
}
