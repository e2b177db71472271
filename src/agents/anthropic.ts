/**
 * The `anthropic` agent provider: the Messages API through the official SDK. Structured replies use forced
 * tool use (one `respond` tool whose input schema is the stage's output schema), validated with zod; a reply
 * that does not match is returned as `invalidOutput`, not thrown. Errors are mapped once in
 * `anthropic-errors.ts`; Temporal, not the SDK, retries.
 */
import Anthropic, { APIUserAbortError } from '@anthropic-ai/sdk';
import { ApplicationFailure } from '@temporalio/common';
import type { z } from 'zod';
import type { Json } from '../model/shapes';
import { mapAnthropicError } from './anthropic-errors';
import { compileOutputSchema, validateValue } from './output-schema';
import { promptHash } from './prompt-hash';
import { AgentUnavailableError, type Agent, type AgentRequest, type AgentResult, type CallRecord } from './types';

/** Model used when neither the request nor `TREADLE_MODEL` names one. */
export const DEFAULT_MODEL = 'claude-sonnet-4-6';
/** `max_tokens` when the request sets none. */
export const DEFAULT_MAX_TOKENS = 4096;
/** How often a call in flight heartbeats; well inside any sensible activity heartbeat timeout. */
export const HEARTBEAT_INTERVAL_MS = 5_000;
/** Name of the one tool a structured call forces the model to use. */
export const RESPOND_TOOL = 'respond';
/** Longest raw reply kept in `invalidOutput.raw`: enough to quote, small enough for workflow history. */
export const MAX_RAW_REPLY = 2_000;

/** Failure type thrown when the provider cannot run here (no API key). */
export const AGENT_UNAVAILABLE = 'AgentUnavailableError';

/** Options of the Anthropic agent; each falls back to the environment, then to a built-in default. */
export interface AnthropicAgentOptions {
  /** Default: `ANTHROPIC_API_KEY`. */
  apiKey?: string;
  /** Default: `ANTHROPIC_BASE_URL`, else the SDK's `https://api.anthropic.com`. */
  baseURL?: string;
  /** Default: `TREADLE_MODEL`, else `DEFAULT_MODEL`. */
  defaultModel?: string;
  /** Transport override (tests, proxies). */
  fetch?: typeof fetch;
  /** Per-request timeout; default the SDK's (10 minutes for non-streaming calls). */
  timeoutMs?: number;
  /** Heartbeat interval while a call is in flight; default `HEARTBEAT_INTERVAL_MS` (tests shorten it). */
  heartbeatIntervalMs?: number;
}

/**
 * An `Agent` backed by the Anthropic Messages API.
 *
 * The constructor throws a non-retryable `ApplicationFailure` (type `AgentUnavailableError`, cause an
 * `AgentUnavailableError`) when there is no API key. `run` resolves with the reply (or `invalidOutput` for a
 * reply that does not match the output schema) and rejects only with failures from `mapAnthropicError`,
 * each carrying the call record as `details[0]` (`callRecordOf` reads it).
 */
export class AnthropicAgent implements Agent {
  readonly provider = 'anthropic';
  private readonly client: Anthropic;
  private readonly defaultModel: string;
  private readonly heartbeatIntervalMs: number;

  constructor(options: AnthropicAgentOptions = {}, env: NodeJS.ProcessEnv = process.env) {
    const apiKey = options.apiKey || env.ANTHROPIC_API_KEY;
    if (!apiKey) {
      const unavailable = new AgentUnavailableError(
        'the anthropic agent needs an API key: set ANTHROPIC_API_KEY, or set TREADLE_AGENT=scripted to run offline with canned replies',
      );
      throw ApplicationFailure.create({ message: unavailable.message, type: AGENT_UNAVAILABLE, nonRetryable: true, cause: unavailable });
    }
    this.client = new Anthropic({
      apiKey,
      // null, not undefined: the SDK would read ANTHROPIC_BASE_URL itself, bypassing the `env` given here.
      baseURL: options.baseURL || env.ANTHROPIC_BASE_URL || null,
      fetch: options.fetch,
      timeout: options.timeoutMs,
      // Temporal retries the activity; SDK retries inside it would multiply attempts and hide them.
      maxRetries: 0,
    });
    this.defaultModel = options.defaultModel || env.TREADLE_MODEL || DEFAULT_MODEL;
    this.heartbeatIntervalMs = options.heartbeatIntervalMs ?? HEARTBEAT_INTERVAL_MS;
  }

  /** Sends one request; see the class comment for what resolves and what rejects. */
  async run(request: AgentRequest): Promise<AgentResult> {
    const model = request.model ?? this.defaultModel;
    const outputSchema = request.outputSchema;
    const schema = outputSchema === undefined ? undefined : compileSchema(outputSchema);
    const started = Date.now();
    const call: CallRecord = {
      correlationId: request.correlationId,
      provider: this.provider,
      model,
      promptHash: promptHash(request),
      inputTokens: 0,
      outputTokens: 0,
      cacheReadTokens: 0,
      latencyMs: 0,
      status: 'success',
      at: new Date(started).toISOString(),
    };

    const heartbeat = request.heartbeat;
    const heartbeating = heartbeat
      ? setInterval(() => {
          try {
            heartbeat();
          } catch {
            // A failed heartbeat must not crash the worker from a timer; the attempt's timeouts still apply.
          }
        }, this.heartbeatIntervalMs)
      : undefined;
    let message: Anthropic.Message;
    try {
      message = await this.client.messages.create(
        {
          model,
          max_tokens: request.maxTokens ?? DEFAULT_MAX_TOKENS,
          messages: request.messages.map((m) => ({ role: m.role, content: m.content })),
          ...(request.system !== undefined && { system: request.system }),
          ...(request.temperature !== undefined && { temperature: request.temperature }),
          ...(outputSchema !== undefined && {
            tools: [{ name: RESPOND_TOOL, description: RESPOND_DESCRIPTION, input_schema: toolInputSchema(outputSchema) }],
            tool_choice: { type: 'tool', name: RESPOND_TOOL },
          }),
        },
        { signal: request.signal },
      );
    } catch (error) {
      // An abort can surface as a body-read error rather than APIUserAbortError; it is still our abort.
      const cause = request.signal?.aborted && !(error instanceof APIUserAbortError) ? new APIUserAbortError() : error;
      throw mapAnthropicError(cause, { ...call, latencyMs: Date.now() - started });
    } finally {
      clearInterval(heartbeating);
    }

    const usage = {
      inputTokens: message.usage.input_tokens,
      outputTokens: message.usage.output_tokens,
      cacheReadTokens: message.usage.cache_read_input_tokens ?? 0,
    };
    const done: CallRecord = { ...call, ...usage, model: message.model || model, latencyMs: Date.now() - started };
    const text = message.content.flatMap((block) => (block.type === 'text' ? [block.text] : [])).join('');
    if (outputSchema === undefined || !schema) return { text, usage, call: done };

    const toolUse = message.content.find((block) => block.type === 'tool_use' && block.name === RESPOND_TOOL);
    if (!toolUse || toolUse.type !== 'tool_use') {
      const issues = [`the reply did not use the ${RESPOND_TOOL} tool (stop_reason ${message.stop_reason ?? 'none'}); it answered with text only`];
      return { text, usage, call: done, invalidOutput: { issues, raw: truncate(text) } };
    }
    const input = unwrapToolInput(outputSchema, toolUse.input);
    const raw = JSON.stringify(input) ?? '';
    const checked = validateValue(input, schema);
    if (checked.ok) return { text: raw, output: checked.value, usage, call: done };
    // Name the truncation first: the schema issues alone would blame the reply's shape, not the token budget.
    const issues = message.stop_reason === 'max_tokens' ? [`the reply was cut off at max_tokens (${request.maxTokens ?? DEFAULT_MAX_TOKENS})`, ...checked.issues] : checked.issues;
    return { text: raw, usage, call: done, invalidOutput: { issues, raw: truncate(raw) } };
  }
}

const RESPOND_DESCRIPTION = 'Give your answer by calling this tool; its input is your whole answer.';

/** A bad output schema is the spec's fault, not the API's: fail for good before spending tokens. */
function compileSchema(schema: Json): z.ZodType {
  try {
    return compileOutputSchema(schema);
  } catch (error) {
    throw ApplicationFailure.nonRetryable((error as Error).message, 'InvalidOutputSchema');
  }
}

/**
 * Tool input must be a JSON object, so a schema for anything else (an array, a string) is wrapped as the
 * `value` property of an object and unwrapped from the reply.
 */
function toolInputSchema(schema: Json): Anthropic.Tool['input_schema'] {
  if (isObjectSchema(schema)) return schema as Anthropic.Tool['input_schema'];
  return { type: 'object', properties: { value: schema }, required: ['value'] };
}

function unwrapToolInput(schema: Json, input: unknown): unknown {
  if (isObjectSchema(schema)) return input;
  return typeof input === 'object' && input !== null ? (input as { value?: unknown }).value : input;
}

function isObjectSchema(schema: Json): boolean {
  return typeof schema === 'object' && schema !== null && !Array.isArray(schema) && schema.type === 'object';
}

function truncate(raw: string): string {
  return raw.length > MAX_RAW_REPLY ? raw.slice(0, MAX_RAW_REPLY) : raw;
}
