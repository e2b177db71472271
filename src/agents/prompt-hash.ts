/** Hashing of prompts for the call log: the log carries the hash, never the prompt. */
import { createHash } from 'node:crypto';
import type { AgentRequest } from './types';

/**
 * sha256 over the system prompt, the messages and the output schema, as `sha256:<hex>`. The messages may be
 * a provider's own (a tool loop's later rounds hash the transcript they send, tool results included).
 */
export function promptHash(
  request: Pick<AgentRequest, 'system' | 'outputSchema' | 'model'> & { messages: readonly unknown[] },
): string {
  const canonical = JSON.stringify([
    request.model ?? null,
    request.system ?? null,
    request.messages,
    request.outputSchema ?? null,
  ]);
  return `sha256:${createHash('sha256').update(canonical).digest('hex')}`;
}
