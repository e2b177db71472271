/**
 * A call as the Claude Code CLI takes it: which stored session it can resume here, and its arguments (the
 * prompt in argv or on stdin).
 */
import type { AgentMessage, AgentRequest } from './types';

/**
 * Prompts longer than this go to the CLI's stdin instead of argv: Linux caps one argument at 128 KiB
 * (MAX_ARG_STRLEN), and a long transcript preamble would otherwise fail to spawn (E2BIG).
 */
const MAX_ARGV_PROMPT_BYTES = 100_000;

/** One invocation of the CLI: its arguments, and the prompt on stdin when it is not in argv. */
export interface Invocation {
  args: string[];
  stdin?: string;
}

/**
 * Where the sessions this process made live (session id → working directory). The CLI keeps a session on the
 * machine and under the directory that made it, so a stored session can be resumed only there; elsewhere the
 * call sends the transcript at once rather than a `--resume` bound to fail. This says where, never which: the
 * session to continue always comes from the stored conversation. Oldest entries go first past the cap.
 */
const sessionsMadeHere = new Map<string, string>();
const MAX_SESSIONS_REMEMBERED = 10_000;

/** Records that this process made `sessionId` in `cwd` (the newest last, past the cap the oldest go). */
export function rememberSessionHere(sessionId: string, cwd: string): void {
  sessionsMadeHere.delete(sessionId);
  sessionsMadeHere.set(sessionId, cwd);
  if (sessionsMadeHere.size > MAX_SESSIONS_REMEMBERED) sessionsMadeHere.delete(sessionsMadeHere.keys().next().value!);
}

/** The stored session when the CLI can resume it from `cwd` in this process, else undefined. */
export function resumableHere(sessionId: string | undefined, cwd: string): string | undefined {
  return sessionId !== undefined && sessionsMadeHere.get(sessionId) === cwd ? sessionId : undefined;
}

/** The last user message and everything before it; undefined when the conversation does not end with the user. */
export function splitConversation(messages: AgentMessage[]): { earlier: AgentMessage[]; last: string } | undefined {
  const last = messages[messages.length - 1];
  if (last?.role !== 'user') return undefined;
  return { earlier: messages.slice(0, -1), last: last.content };
}

/**
 * The CLI arguments for a call. A resumed session already holds the earlier messages, so only the last
 * one is sent; otherwise they lead the prompt as a transcript.
 */
export function buildInvocation(
  request: AgentRequest,
  conversation: { earlier: AgentMessage[]; last: string },
  resumeSessionId: string | undefined,
  extraArgs: string[],
): Invocation {
  const parts: string[] = [];
  if (resumeSessionId === undefined && conversation.earlier.length > 0) {
    parts.push(`Previous conversation:\n${conversation.earlier.map((m) => `${m.role}: ${m.content}`).join('\n\n')}`);
  }
  parts.push(conversation.last);
  if (request.outputSchema !== undefined) {
    parts.push(
      `Answer with only a JSON value matching this JSON Schema, with no other text and no code fence:\n${JSON.stringify(request.outputSchema)}`,
    );
  }
  const prompt = parts.join('\n\n');

  // The prompt is a positional argument: one starting with "-" would be read as an option, so it goes to
  // stdin instead (as does an over-long one), which `claude -p` reads when no prompt is given.
  const viaStdin = prompt.startsWith('-') || Buffer.byteLength(prompt) > MAX_ARGV_PROMPT_BYTES;
  const args = viaStdin ? ['-p', '--output-format', 'json'] : ['-p', prompt, '--output-format', 'json'];
  if (request.model !== undefined) args.push('--model', request.model);
  if (resumeSessionId !== undefined) args.push('--resume', resumeSessionId);
  if (request.system !== undefined) args.push('--append-system-prompt', request.system);
  args.push(...extraArgs);
  return viaStdin ? { args, stdin: prompt } : { args };
}
