/**
 * The `anthropic` agent provider: the Messages API through the official SDK. Structured replies use forced
 * tool use (one `respond` tool whose input schema is the stage's output schema), validated with zod; a reply
 * that does not match is returned as `invalidOutput`, not thrown. Errors are mapped once in
 * `anthropic-errors.ts`; Temporal, not the SDK, retries.
 *
 * A request that offers tools runs the tool-use loop: each `tool_use` block of a reply runs its handler on
 * the worker, the results go back as `tool_result` blocks (`is_error` for a failure, which the model reads
 * and may act on), and the loop ends when the model answers without a tool, or fails when it is still using
 * tools after `maxToolRounds` calls. Every call of the loop is a call record.
 *
 * Provider pushback (a 429 rate limit, a 529 overload) does not fail the attempt: the call reports it to the
 * agent's {@link CallThrottle} (which holds off the process's other calls to the same model and key), waits
 * the `retry-after` (else a capped exponential backoff), heartbeating and abortable, and is sent again; each
 * pushed-back try is a call record with status `throttled`. Only a wait past the attempt's end or
 * `maxThrottleWaitMs` gives up, as the retryable failure it was before.
 */
import Anthropic, { APIUserAbortError } from '@anthropic-ai/sdk';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import type { z } from 'zod';
import type { Json } from '../model/shapes';
import { MAX_THROTTLE_WAIT_MS, PushbackWaits, type PushbackPolicy } from './anthropic-pushback';
import {
  activityAttemptEnd,
  DEFAULT_BACKOFF,
  estimateCallTokens,
  keyIdOf,
  PROCESS_THROTTLE,
  type Backoff,
  type CallThrottle,
} from './call-throttle';
import { failureDetails, NO_USAGE } from './call-record';
import { compileOutputSchema, validateValue } from './output-schema';
import { promptHash } from './prompt-hash';
import {
  AgentUnavailableError,
  DEFAULT_MAX_TOOL_ROUNDS,
  TOOL_ROUNDS_EXHAUSTED,
  type Agent,
  type AgentRequest,
  type AgentResult,
  type AgentTool,
  type AgentUsage,
  type CallRecord,
  type ToolUse,
} from './types';

/** Model used when neither the request nor `TREADLE_MODEL` names one. */
export const DEFAULT_MODEL = 'claude-sonnet-4-6';
/** What a try that got no reply used, as far as a limiter is told. */
const NO_TOKENS = { inputTokens: 0, outputTokens: 0 };
/** `max_tokens` when the request sets none. */
export const DEFAULT_MAX_TOKENS = 4096;
/** How often a call in flight heartbeats; well inside any sensible activity heartbeat timeout. */
export const HEARTBEAT_INTERVAL_MS = 5_000;
/** Name of the one tool a structured call forces the model to use. */
export const RESPOND_TOOL = 'respond';
/** Longest raw reply kept in `invalidOutput.raw`: enough to quote, small enough for workflow history. */
export const MAX_RAW_REPLY = 2_000;

/** A tool result is cut to this many characters before the model reads it. */
export const MAX_TOOL_RESULT_CHARS = 100_000;
/** A `toolUses` entry's input summary and error are cut to about this many characters. */
const MAX_TOOL_USE_SUMMARY = 120;
/** What the Messages API accepts as a tool name. */
const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;
// In types.ts, so code that recognises the failure need not load the Anthropic SDK.
export { TOOL_ROUNDS_EXHAUSTED };
export { MAX_THROTTLE_WAIT_MS };

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
  /**
   * Where calls wait for capacity and report 429s and 529s; default {@link PROCESS_THROTTLE}, shared by every
   * agent of this process (a limiter shared by every worker plugs in here).
   */
  throttle?: CallThrottle;
  /** Longest one call waits out pushback in all, in ms; default {@link MAX_THROTTLE_WAIT_MS}. */
  maxThrottleWaitMs?: number;
  /** The waits after a 429 or 529 that names no retry-after; default {@link DEFAULT_BACKOFF}. */
  throttleBackoff?: Backoff;
  /**
   * When the attempt ends (epoch ms), or undefined when it has no end; default: from the Temporal activity the
   * call runs in, if any. A pushback wait that would run past it gives up instead.
   */
  attemptEnd?: () => number | undefined;
}

/**
 * An `Agent` backed by the Anthropic Messages API.
 *
 * The constructor throws a non-retryable `ApplicationFailure` (type `AgentUnavailableError`, cause an
 * `AgentUnavailableError`) when there is no API key. `run` resolves with the reply (or `invalidOutput` for a
 * reply that does not match the output schema) and the record of every model call it made. It rejects with
 * failures from `mapAnthropicError`, each carrying the failed call's record as `details[0]`; with a
 * non-retryable `InvalidAgentRequest` for unusable tools; with a non-retryable {@link TOOL_ROUNDS_EXHAUSTED};
 * or with a `CancelledFailure` when aborted between calls or while waiting out pushback. A failure after
 * earlier calls of the loop carries their records too (`callRecordsOf` reads them all), throttled tries included.
 */
export class AnthropicAgent implements Agent {
  readonly provider = 'anthropic';
  private readonly client: Anthropic;
  private readonly defaultModel: string;
  private readonly heartbeatIntervalMs: number;
  private readonly keyId: string;
  private readonly pushback: PushbackPolicy;

  constructor(options: AnthropicAgentOptions = {}, env: NodeJS.ProcessEnv = process.env) {
    const apiKey = options.apiKey || env.ANTHROPIC_API_KEY;
    if (!apiKey) {
      const unavailable = new AgentUnavailableError(
        `the anthropic agent needs an API key: set ANTHROPIC_API_KEY on the worker, or ${offlineHint(env)}`,
      );
      throw ApplicationFailure.create({
        message: unavailable.message,
        type: AGENT_UNAVAILABLE,
        nonRetryable: true,
        cause: unavailable,
      });
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
    this.keyId = keyIdOf(apiKey);
    this.pushback = {
      throttle: options.throttle ?? PROCESS_THROTTLE,
      maxWaitMs: options.maxThrottleWaitMs ?? MAX_THROTTLE_WAIT_MS,
      backoff: options.throttleBackoff ?? DEFAULT_BACKOFF,
      attemptEnd: options.attemptEnd ?? activityAttemptEnd,
    };
  }

  /** Sends one request (a tool loop when it offers tools); see the class comment for what resolves and what rejects. */
  async run(request: AgentRequest): Promise<AgentResult> {
    const model = request.model ?? this.defaultModel;
    const outputSchema = request.outputSchema;
    const schema = outputSchema === undefined ? undefined : compileSchema(outputSchema);
    const tools = request.tools ?? [];
    const maxRounds = request.maxToolRounds ?? DEFAULT_MAX_TOOL_ROUNDS;
    checkTools(tools, maxRounds);
    const offered = offeredTools(tools, outputSchema);
    const messages: Anthropic.MessageParam[] = request.messages.map((m) => ({ role: m.role, content: m.content }));
    const calls: CallRecord[] = [];
    const toolUses: ToolUse[] = [];

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
    try {
      for (let round = 1; ; round++) {
        const message = await this.send(request, model, messages, offered, calls);
        const uses = message.content.filter((block): block is Anthropic.ToolUseBlock => block.type === 'tool_use');
        const answered = uses.some((use) => use.name === RESPOND_TOOL);
        if (tools.length === 0 || answered || message.stop_reason !== 'tool_use' || uses.length === 0) {
          return answer(message, {
            request,
            outputSchema,
            schema,
            calls,
            toolUses: tools.length > 0 ? toolUses : undefined,
          });
        }
        if (round >= maxRounds) {
          const text = `the model was still using tools after ${maxRounds} model calls (maxToolRounds) and gave no final answer`;
          throw ApplicationFailure.create({
            message: text,
            type: TOOL_ROUNDS_EXHAUSTED,
            nonRetryable: true,
            details: failureDetails(undefined, calls),
          });
        }
        messages.push({ role: 'assistant', content: message.content.flatMap(toParam) });
        const results: Anthropic.ToolResultBlockParam[] = [];
        for (const use of uses) {
          const ran = await runTool(tools, use, request.signal);
          toolUses.push(ran.use);
          results.push(ran.result);
          if (request.signal?.aborted) {
            const text = 'anthropic tool loop aborted: the attempt timed out or the work item was cancelled';
            throw new CancelledFailure(text, failureDetails(undefined, calls));
          }
        }
        messages.push({ role: 'user', content: results });
      }
    } finally {
      clearInterval(heartbeating);
    }
  }

  /**
   * One model call of a request: its record is added to `calls`, or carried (with the earlier ones) by the
   * failure. Pushback (429, 529) is waited out and the call sent again (see `PushbackWaits`).
   */
  private async send(
    request: AgentRequest,
    model: string,
    messages: Anthropic.MessageParam[],
    offered: Offered,
    calls: CallRecord[],
  ): Promise<Anthropic.Message> {
    const scope = { provider: this.provider, model, keyId: this.keyId };
    const waits = new PushbackWaits(this.pushback, scope, request.signal, calls);
    // The first round hashes the prompt as given; later ones the transcript they send, tool results included.
    const hash = promptHash({ ...request, messages: calls.length === 0 ? request.messages : messages });
    const body: Anthropic.MessageCreateParamsNonStreaming = {
      model,
      max_tokens: request.maxTokens ?? DEFAULT_MAX_TOKENS,
      // A copy: the loop goes on adding to its transcript after this call.
      messages: [...messages],
      ...(request.system !== undefined && { system: request.system }),
      ...(request.temperature !== undefined && { temperature: request.temperature }),
      ...offered,
    };
    // Charged to a shared limiter (when there is one) until the reply's usage replaces it.
    const estimate = estimateCallTokens(body, body.max_tokens);
    for (;;) {
      const lease = await waits.beforeTry(estimate);
      const started = Date.now();
      const call: CallRecord = {
        correlationId: request.correlationId,
        provider: this.provider,
        model,
        promptHash: hash,
        inputTokens: 0,
        outputTokens: 0,
        cacheReadTokens: 0,
        latencyMs: 0,
        status: 'success',
        at: new Date(started).toISOString(),
      };
      let message: Anthropic.Message;
      try {
        message = await this.client.messages.create(body, { signal: request.signal });
      } catch (error) {
        lease?.release(NO_TOKENS);
        // An abort can surface as a body-read error rather than APIUserAbortError; it is still our abort.
        const cause =
          request.signal?.aborted && !(error instanceof APIUserAbortError) ? new APIUserAbortError() : error;
        // Returns once the pushback is waited out (the try recorded as throttled); else throws the mapped failure.
        await waits.afterError(cause, { ...call, latencyMs: Date.now() - started });
        continue;
      }
      lease?.release({ inputTokens: message.usage.input_tokens, outputTokens: message.usage.output_tokens });
      calls.push({ ...call, ...usageOf(message), model: message.model || model, latencyMs: Date.now() - started });
      return message;
    }
  }
}

/** The reply of the request's last model call: text, or the `respond` tool's input checked against the schema. */
function answer(
  message: Anthropic.Message,
  run: {
    request: AgentRequest;
    outputSchema: Json | undefined;
    schema: z.ZodType | undefined;
    calls: CallRecord[];
    toolUses: ToolUse[] | undefined;
  },
): AgentResult {
  const { request, outputSchema, schema, calls } = run;
  const call = calls[calls.length - 1]!;
  const usage = calls.reduce(
    (sum, c) => ({
      inputTokens: sum.inputTokens + c.inputTokens,
      outputTokens: sum.outputTokens + c.outputTokens,
      cacheReadTokens: sum.cacheReadTokens + c.cacheReadTokens,
    }),
    { ...NO_USAGE },
  );
  const base = { usage, call, calls, ...(run.toolUses ? { toolUses: run.toolUses } : {}) };
  const text = message.content.flatMap((block) => (block.type === 'text' ? [block.text] : [])).join('');
  if (outputSchema === undefined || !schema) return { text, ...base };

  const toolUse = message.content.find((block) => block.type === 'tool_use' && block.name === RESPOND_TOOL);
  if (!toolUse || toolUse.type !== 'tool_use') {
    const issues = [
      `the reply did not use the ${RESPOND_TOOL} tool (stop_reason ${message.stop_reason ?? 'none'}); it answered with text only`,
    ];
    return { text, ...base, invalidOutput: { issues, raw: truncate(text) } };
  }
  const input = unwrapToolInput(outputSchema, toolUse.input);
  const raw = JSON.stringify(input) ?? '';
  const checked = validateValue(input, schema);
  if (checked.ok) return { text: raw, output: checked.value, ...base };
  // Name the truncation first: the schema issues alone would blame the reply's shape, not the token budget.
  const issues =
    message.stop_reason === 'max_tokens'
      ? [`the reply was cut off at max_tokens (${request.maxTokens ?? DEFAULT_MAX_TOKENS})`, ...checked.issues]
      : checked.issues;
  return { text: raw, ...base, invalidOutput: { issues, raw: truncate(raw) } };
}

function usageOf(message: Anthropic.Message): AgentUsage {
  return {
    inputTokens: message.usage.input_tokens,
    outputTokens: message.usage.output_tokens,
    cacheReadTokens: message.usage.cache_read_input_tokens ?? 0,
  };
}

/** The `tools` and `tool_choice` of every call of a request. */
type Offered = { tools?: Anthropic.Tool[]; tool_choice?: Anthropic.ToolChoice };

/**
 * Without tools, a structured request forces the `respond` tool. With tools the model chooses; `respond`
 * (offered too when there is a schema) ends the loop with the answer.
 */
function offeredTools(tools: AgentTool[], outputSchema: Json | undefined): Offered {
  const respond: Anthropic.Tool[] =
    outputSchema === undefined
      ? []
      : [{ name: RESPOND_TOOL, description: RESPOND_DESCRIPTION, input_schema: toolInputSchema(outputSchema) }];
  if (tools.length === 0)
    return respond.length > 0 ? { tools: respond, tool_choice: { type: 'tool', name: RESPOND_TOOL } } : {};
  return {
    tools: [
      ...tools.map((t) => ({
        name: t.name,
        description: t.description,
        input_schema: t.inputSchema as Anthropic.Tool['input_schema'],
      })),
      ...respond,
    ],
  };
}

/** Tools the API would refuse, or that clash, are the caller's bug: fail for good before spending tokens. */
function checkTools(tools: AgentTool[], maxRounds: number): void {
  const problems: string[] = [];
  const seen = new Set<string>();
  for (const tool of tools) {
    if (!TOOL_NAME.test(tool.name))
      problems.push(`tool name ${JSON.stringify(tool.name)} must match ${TOOL_NAME.source}`);
    else if (tool.name === RESPOND_TOOL)
      problems.push(`tool name "${RESPOND_TOOL}" is reserved for structured replies`);
    else if (seen.has(tool.name)) problems.push(`tool name "${tool.name}" is offered twice`);
    seen.add(tool.name);
    if (tool.inputSchema.type !== 'object')
      problems.push(`tool "${tool.name}": the input schema must have type "object"`);
  }
  if (!Number.isInteger(maxRounds) || maxRounds < 1)
    problems.push(`maxToolRounds must be a whole number of at least 1, not ${maxRounds}`);
  if (problems.length > 0)
    throw ApplicationFailure.nonRetryable(`invalid agent request: ${problems.join('; ')}`, 'InvalidAgentRequest');
}

/**
 * Runs one `tool_use` block. Whatever goes wrong (no such tool, bad input, the handler throws) becomes an
 * error result for the model to read and act on; only the abort signal stops the loop (the caller checks it).
 */
async function runTool(
  tools: AgentTool[],
  use: Anthropic.ToolUseBlock,
  signal: AbortSignal | undefined,
): Promise<{ use: ToolUse; result: Anthropic.ToolResultBlockParam }> {
  const tool = tools.find((t) => t.name === use.name);
  const summary = summarizeInput(tool, use.input);
  const failed = (message: string): { use: ToolUse; result: Anthropic.ToolResultBlockParam } => ({
    use: { name: use.name, input: summary, ok: false, error: cut(message, MAX_TOOL_USE_SUMMARY * 2) },
    result: {
      type: 'tool_result',
      tool_use_id: use.id,
      content: cut(message, MAX_TOOL_RESULT_CHARS) || 'failed',
      is_error: true,
    },
  });
  if (!tool)
    return failed(
      `there is no tool named ${JSON.stringify(use.name)}; the tools are: ${tools.map((t) => t.name).join(', ')}`,
    );
  try {
    const output = await tool.run(use.input, { signal });
    // An empty tool_result reads as "nothing happened"; say that it succeeded.
    return {
      use: { name: use.name, input: summary, ok: true },
      result: {
        type: 'tool_result',
        tool_use_id: use.id,
        content: cut(output, MAX_TOOL_RESULT_CHARS) || '(done; no output)',
      },
    };
  } catch (error) {
    return failed(error instanceof Error ? error.message : String(error));
  }
}

function summarizeInput(tool: AgentTool | undefined, input: unknown): string {
  try {
    const summary = tool?.summarize ? tool.summarize(input) : JSON.stringify(input);
    return cut(summary ?? '', MAX_TOOL_USE_SUMMARY);
  } catch {
    return '(input not summarized)';
  }
}

/** The blocks of an assistant reply as they are sent back in the next round's transcript. */
function toParam(block: Anthropic.ContentBlock): Anthropic.ContentBlockParam[] {
  if (block.type === 'text') return [{ type: 'text', text: block.text }];
  if (block.type === 'tool_use') return [{ type: 'tool_use', id: block.id, name: block.name, input: block.input }];
  // No server tools or extended thinking are enabled, so no other blocks arrive; none is sent back.
  return [];
}

function cut(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
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

/**
 * How to run offline instead. Without a key the default agent is already `scripted`, so anthropic was chosen
 * either by TREADLE_AGENT or by the step's own `agent:`, which TREADLE_AGENT does not override.
 */
function offlineHint(env: NodeJS.ProcessEnv): string {
  if (env.TREADLE_AGENT === 'anthropic') {
    return 'unset TREADLE_AGENT (or set it to scripted) to run offline with canned replies';
  }
  return (
    "to run offline with canned replies change the step's `agent: anthropic` to `agent: scripted` " +
    '(TREADLE_AGENT only picks the agent of steps that name none)'
  );
}
