/**
 * The one Agent interface every LLM-backed stage, gate and (later) TDD node uses. A provider turns a
 * rendered prompt into a reply: structured (validated against a schema) or text, with usage and a call
 * record for the LLM call log (seed 003 `llm_call_log`: provider, model, prompt hash, tokens, latency,
 * status — never the raw prompt). A request may offer tools that run on the worker (the `anthropic` provider
 * runs the model's tool-use loop with them) and name the directory the agent acts in (`claude-code`).
 */
import type { AgentMessage, Json } from '../model/shapes';

// Conversations are stored below the agents (storage/conversation.ts), so the message shape lives in model/.
export type { AgentMessage } from '../model/shapes';

/** Failure type when a tool loop used all its rounds without a final answer: non-retryable. */
export const TOOL_ROUNDS_EXHAUSTED = 'AgentToolRoundsExhausted';

/** What a stage or gate asks of an agent. */
export interface AgentRequest {
  system?: string;
  messages: AgentMessage[];
  /** JSON Schema the reply must match; the reply is then parsed and validated (zod). */
  outputSchema?: Json;
  /** Model id; the provider's default when absent. */
  model?: string;
  maxTokens?: number;
  temperature?: number;
  /**
   * Continue a stored conversation: earlier messages under this id are prepended, and this exchange is
   * appended (so stages sharing an id hold one conversation across activities and retries).
   */
  conversationId?: string;
  /** A provider session that holds exactly the stored messages of `conversationId` (claude-code's `--resume`), set by the recording agent from the conversation's latest turn. */
  resumeSessionId?: string;
  /** Ties the call to its work item, stage and attempt in the call log (`<item>/<stage>/<attempt>`). */
  correlationId: string;
  /** Aborted when the attempt times out or the item is cancelled. */
  signal?: AbortSignal;
  /** Called during long calls so the activity keeps heartbeating. */
  heartbeat?: () => void;
  /**
   * Tools the model may use, run on the worker. A provider that supports them (`anthropic`) calls the model
   * again with each round's results until it answers without a tool; one that does not ignores them.
   */
  tools?: AgentTool[];
  /** Model calls one request may make with `tools` before it fails; default {@link DEFAULT_MAX_TOOL_ROUNDS}. */
  maxToolRounds?: number;
  /**
   * The directory the agent acts in, which the caller owns: `claude-code` runs the CLI there (and leaves it
   * in place) instead of in a working directory of its own.
   */
  workdir?: string;
}

/** Rounds of the tool-use loop when a request sets no `maxToolRounds`. */
export const DEFAULT_MAX_TOOL_ROUNDS = 20;

/** A JSON Schema object, as a tool's input schema. */
export type JsonSchemaObject = { [key: string]: Json };

/**
 * A tool a model may call. `run` gets the model's input (not yet validated: it checks it) and answers the
 * text the model sees; what it throws goes back to the model as an error result, never out of the call.
 */
export interface AgentTool {
  /** `^[a-zA-Z0-9_-]{1,64}$`, unique within a request. */
  name: string;
  description: string;
  /** JSON Schema of the input, `type: "object"` at the top. */
  inputSchema: JsonSchemaObject;
  run(input: unknown, context: { signal?: AbortSignal }): Promise<string>;
  /** A short description of one input for the call's `toolUses` (a path, say): never file contents or secrets. */
  summarize?(input: unknown): string;
}

/** One tool run of a request, as `AgentResult.toolUses` lists it. */
export interface ToolUse {
  name: string;
  /** The tool's own `summarize`, else the input as JSON, cut short. */
  input: string;
  ok: boolean;
  /** Why the tool failed (what the model was told), cut short. */
  error?: string;
}

export { CallRecordSchema, type CallRecord } from '../model/shapes';
import type { CallRecord } from '../model/shapes';

/** Token usage of a call. */
export interface AgentUsage {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
}

/** What an agent answers. */
export interface AgentResult {
  /** The reply's text (for structured replies, the JSON as text). */
  text: string;
  /** The parsed reply when `outputSchema` was given and the reply matched it. */
  output?: Json;
  /**
   * Set when `outputSchema` was given and the reply did not match: the first validation issues, ready to
   * quote in feedback. Not an exception: a malformed reply is a failed quality attempt, not a crash.
   */
  invalidOutput?: { issues: string[]; raw: string };
  /** Summed over every model call of the request. */
  usage: AgentUsage;
  /** The last model call of the request (the one that answered): `calls` at its end. */
  call: CallRecord;
  /** Every model call the request made, in order, one per round of a tool loop; each belongs in the call log. */
  calls: CallRecord[];
  /** The tools the model ran, in order, when the request offered tools. */
  toolUses?: ToolUse[];
  /** The provider's own session id when it has one (claude-code), for resuming. */
  sessionId?: string;
}

/** An agent provider. Mechanical failures throw (mapped to retryable or non-retryable activity failures). */
export interface Agent {
  readonly provider: string;
  run(request: AgentRequest): Promise<AgentResult>;
}

/** Thrown by a provider that is not available here (no key, CLI not installed): non-retryable. */
export class AgentUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AgentUnavailableError';
  }
}
