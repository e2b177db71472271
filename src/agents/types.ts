/**
 * The one Agent interface every LLM-backed stage, gate and (later) TDD node uses. A provider turns a
 * rendered prompt into a reply: structured (validated against a schema) or text, with usage and a call
 * record for the LLM call log (seed 003 `llm_call_log`: provider, model, prompt hash, tokens, latency,
 * status — never the raw prompt).
 */
import type { Json } from '../model/shapes';

/** One message of a conversation. */
export interface AgentMessage {
  role: 'user' | 'assistant';
  content: string;
}

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
  usage: AgentUsage;
  call: CallRecord;
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
