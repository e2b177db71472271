/**
 * Conversation memory: a conversation id names a message history kept in the blob store (each version
 * content-addressed, the id pointing at the latest), so stages sharing an id continue one conversation
 * across activities, workers and retries. Appends are compare-and-swap on that pointer, retried on conflict,
 * so concurrent writers (two stages, two workers) all land. A provider's own session (claude-code's
 * `--resume` id) is kept on the turn it produced, so any worker can resume it, and only while it is current.
 */
import { randomInt } from 'node:crypto';
import type { BlobStore } from './blob-store';
import type { AgentMessage } from '../model/shapes';

/** A provider's session that holds the conversation up to and including the turn it is stored on. */
export interface ProviderSession {
  provider: string;
  id: string;
}

/** One exchange, tagged with the call that made it so a retried call replaces rather than repeats it. */
export interface ConversationTurn {
  correlationId: string;
  messages: AgentMessage[];
  /** The session that produced this turn; kept only when the turn was appended to the history it was based on. */
  session?: ProviderSession;
}

/** What a call continues from: the messages so far and, when one is current, a session to resume. */
export interface ConversationContext {
  messages: AgentMessage[];
  /** The asking provider's session when the latest turn carries one (it has seen exactly `messages`). */
  resumeSessionId?: string;
  /** The version this was read from (the blob the conversation pointed at); undefined for a new conversation. */
  version: string | undefined;
}

/** Appending gave up because other writers kept winning; retryable (the activity retries). */
export class ConversationConflictError extends Error {
  constructor(conversationId: string, attempts: number) {
    super(`conversation "${conversationId}" kept changing under ${attempts} attempts to append to it`);
    this.name = 'ConversationConflictError';
  }
}

/** How often an append re-reads and retries when another writer moved the conversation meanwhile. */
export const MAX_APPEND_ATTEMPTS = 50;
/** Upper bound of the random pause before a retry, times the attempt number (spreads colliding writers). */
const APPEND_BACKOFF_MS = 10;

/** Reads and appends conversations. */
export class ConversationStore {
  constructor(private readonly blobs: BlobStore) {}

  /** The stored turns of a conversation (empty when new). */
  async turns(conversationId: string): Promise<ConversationTurn[]> {
    return (await this.read(conversationId)).turns;
  }

  /** All messages of a conversation, oldest first; `except` leaves out a call's own earlier try. */
  async messages(conversationId: string, except?: string): Promise<AgentMessage[]> {
    return (await this.context(conversationId, { except })).messages;
  }

  /**
   * What a call continues from. `except` leaves out the call's own earlier try (a retry replaces it);
   * `provider` asks for that provider's session, returned only when the latest remaining turn carries one,
   * so a session that has not seen every stored turn is never resumed. Pass the result to {@link append}.
   */
  async context(
    conversationId: string,
    options: { except?: string | undefined; provider?: string | undefined } = {},
  ): Promise<ConversationContext> {
    const { version, turns } = await this.read(conversationId);
    const kept = turns.filter((t) => t.correlationId !== options.except);
    // When the call's own earlier try is left out, every later session has seen it: none is resumable.
    const current = kept.length === turns.length ? kept[kept.length - 1]?.session : undefined;
    const context: ConversationContext = { messages: kept.flatMap((t) => t.messages), version };
    if (current !== undefined && options.provider !== undefined && current.provider === options.provider)
      context.resumeSessionId = current.id;
    return context;
  }

  /**
   * Appends an exchange; a turn with the same correlation id (a retried call) is replaced. Compare-and-swap
   * on the conversation pointer, re-reading and retrying when another writer got there first, so concurrent
   * appends all land. The turn's `session` is kept only if the conversation is still the version `basedOn`
   * was read from: otherwise the session has not seen the turns that landed meanwhile.
   */
  async append(conversationId: string, turn: ConversationTurn, basedOn?: ConversationContext): Promise<void> {
    const key = this.key(conversationId);
    for (let attempt = 1; attempt <= MAX_APPEND_ATTEMPTS; attempt++) {
      const { version, turns } = await this.read(conversationId);
      const { session, ...bare } = turn;
      const sessionIsCurrent = session !== undefined && basedOn !== undefined && basedOn.version === version;
      const next = [
        ...turns.filter((t) => t.correlationId !== turn.correlationId),
        sessionIsCurrent ? { ...bare, session } : bare,
      ];
      const stored = await this.blobs.put(
        Buffer.from(JSON.stringify(next)),
        'application/json',
        `conversation ${conversationId}: ${next.length} turns`,
      );
      if (await this.blobs.compareAndSetName(key, version, stored.ref)) return;
      await new Promise((resolve) => setTimeout(resolve, randomInt(APPEND_BACKOFF_MS * attempt + 1)));
    }
    throw new ConversationConflictError(conversationId, MAX_APPEND_ATTEMPTS);
  }

  private async read(conversationId: string): Promise<{ version: string | undefined; turns: ConversationTurn[] }> {
    const version = await this.blobs.getName(this.key(conversationId));
    if (version === undefined) return { version, turns: [] };
    return { version, turns: JSON.parse((await this.blobs.get(version)).toString('utf8')) as ConversationTurn[] };
  }

  private key(conversationId: string): string {
    return `conversation:${conversationId}`;
  }
}
