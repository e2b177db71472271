/**
 * Wraps a provider so that every model call (each round of a tool loop too) lands in the attempt's call log
 * and conversations continue: stored messages of `conversationId` are prepended, and the exchange is
 * appended after the call.
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
 * Every call record a failure carries, in the order the calls were made: the request's earlier calls
 * (`{ earlierCalls }` among the details, see `failureDetails`), then the failed call (`details[0]`).
 */
export function callRecordsOf(error: unknown): CallRecord[] {
  if (typeof error !== 'object' || error === null) return [];
  const details = (error as { details?: unknown }).details;
  if (!Array.isArray(details)) return [];
  const earlier = details.flatMap((detail: unknown) => {
    const listed =
      typeof detail === 'object' && detail !== null ? (detail as { earlierCalls?: unknown }).earlierCalls : undefined;
    if (!Array.isArray(listed)) return [];
    return listed.flatMap((call: unknown) => {
      const parsed = CallRecordSchema.safeParse(call);
      return parsed.success ? [parsed.data] : [];
    });
  });
  const failed = callRecordOf(error);
  return failed ? [...earlier, failed] : earlier;
}

/**
 * The recording wrapper; `calls` is the attempt's call log, each record stamped with the work item's
 * correlation id. Each call is a span (`treadle.model_call`) in the activity's trace when tracing is on.
 */
export function recordingAgent(
  inner: Agent,
  deps: { calls: CallRecord[]; conversations: ConversationStore; runCorrelationId?: string },
): Agent {
  const stamp = (call: CallRecord): CallRecord =>
    deps.runCorrelationId !== undefined ? { ...call, runCorrelationId: deps.runCorrelationId } : call;
  const attributes = {
    'treadle.provider': inner.provider,
    ...(deps.runCorrelationId !== undefined ? { [CORRELATION_ATTRIBUTE]: deps.runCorrelationId } : {}),
  };
  return {
    provider: inner.provider,
    run: (request: AgentRequest): Promise<AgentResult> =>
      inSpan(
        'treadle.model_call',
        attributes,
        () => run(request),
        (result) => ({
          'treadle.model': result.call.model,
          'treadle.model_calls': result.calls.length,
          'treadle.input_tokens': result.usage.inputTokens,
          'treadle.output_tokens': result.usage.outputTokens,
        }),
      ),
  };

  async function run(request: AgentRequest): Promise<AgentResult> {
    const context = request.conversationId
      ? await deps.conversations.context(request.conversationId, {
          except: request.correlationId,
          provider: inner.provider,
        })
      : undefined;
    let result: AgentResult;
    try {
      result = await inner.run({
        ...request,
        messages: [...(context?.messages ?? []), ...request.messages],
        ...(context?.resumeSessionId !== undefined ? { resumeSessionId: context.resumeSessionId } : {}),
      });
    } catch (error) {
      for (const call of callRecordsOf(error)) deps.calls.push(stamp(call));
      throw error instanceof Error ? error : ApplicationFailure.retryable(String(error), 'AgentError');
    }
    // Every model call of the request (one per round of a tool loop), not just the one that answered.
    for (const call of result.calls) deps.calls.push(stamp(call));
    if (request.conversationId) {
      const reply = result.output !== undefined ? JSON.stringify(result.output) : result.text;
      const session =
        result.sessionId !== undefined ? { session: { provider: inner.provider, id: result.sessionId } } : {};
      await deps.conversations.append(
        request.conversationId,
        {
          correlationId: request.correlationId,
          messages: [...request.messages, { role: 'assistant', content: reply }],
          ...session,
        },
        context,
      );
    }
    return result;
  }
}
