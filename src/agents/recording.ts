/**
 * Wraps a provider so that every call lands in the attempt's call log and conversations continue: stored
 * messages of `conversationId` are prepended, and the exchange is appended after the call.
 */
import { ApplicationFailure } from '@temporalio/common';
import { CallRecordSchema, type CallRecord } from '../model/shapes';
import type { ConversationStore } from '../storage/conversation';
import type { Agent, AgentRequest, AgentResult } from './types';
import { CORRELATION_ATTRIBUTE, inSpan } from '../observability';

/** The call record a provider attached to a failure (`details[0]`), or undefined when it carries none. */
export function callRecordOf(error: unknown): CallRecord | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const details = (error as { details?: unknown }).details;
  if (!Array.isArray(details)) return undefined;
  const parsed = CallRecordSchema.safeParse(details[0]);
  return parsed.success ? parsed.data : undefined;
}

/**
 * The recording wrapper; `calls` is the attempt's call log, each record stamped with the work item's
 * correlation id. Each call is a span (`treadle.model_call`) in the activity's trace when tracing is on.
 */
export function recordingAgent(inner: Agent, deps: { calls: CallRecord[]; conversations: ConversationStore; runCorrelationId?: string }): Agent {
  const stamp = (call: CallRecord): CallRecord => (deps.runCorrelationId !== undefined ? { ...call, runCorrelationId: deps.runCorrelationId } : call);
  const attributes = { 'treadle.provider': inner.provider, ...(deps.runCorrelationId !== undefined ? { [CORRELATION_ATTRIBUTE]: deps.runCorrelationId } : {}) };
  return {
    provider: inner.provider,
    run: (request: AgentRequest): Promise<AgentResult> =>
      inSpan('treadle.model_call', attributes, () => run(request), (result) => ({ 'treadle.model': result.call.model, 'treadle.input_tokens': result.call.inputTokens, 'treadle.output_tokens': result.call.outputTokens })),
  };

  async function run(request: AgentRequest): Promise<AgentResult> {
    const context = request.conversationId ? await deps.conversations.context(request.conversationId, { except: request.correlationId, provider: inner.provider }) : undefined;
    let result: AgentResult;
    try {
      result = await inner.run({ ...request, messages: [...(context?.messages ?? []), ...request.messages], ...(context?.resumeSessionId !== undefined ? { resumeSessionId: context.resumeSessionId } : {}) });
    } catch (error) {
      const call = callRecordOf(error);
      if (call) deps.calls.push(stamp(call));
      throw error instanceof Error ? error : ApplicationFailure.retryable(String(error), 'AgentError');
    }
    deps.calls.push(stamp(result.call));
    if (request.conversationId) {
      const reply = result.output !== undefined ? JSON.stringify(result.output) : result.text;
      const session = result.sessionId !== undefined ? { session: { provider: inner.provider, id: result.sessionId } } : {};
      await deps.conversations.append(request.conversationId, { correlationId: request.correlationId, messages: [...request.messages, { role: 'assistant', content: reply }], ...session }, context);
    }
    return result;
  }
}
