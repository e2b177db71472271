/**
 * Conversation memory: a conversation id names a message history kept in the blob store (each version
 * content-addressed, the id pointing at the latest), so stages sharing an id continue one conversation
 * across activities, workers and retries.
 */
import type { BlobStore } from './blob-store';
import type { AgentMessage } from '../agents/types';

/** One exchange, tagged with the call that made it so a retried call replaces rather than repeats it. */
export interface ConversationTurn {
  correlationId: string;
  messages: AgentMessage[];
}

/** Reads and appends conversations. */
export class ConversationStore {
  constructor(private readonly blobs: BlobStore) {}

  /** The stored turns of a conversation (empty when new). */
  async turns(conversationId: string): Promise<ConversationTurn[]> {
    const ref = await this.blobs.getName(this.key(conversationId));
    if (!ref) return [];
    return JSON.parse((await this.blobs.get(ref)).toString('utf8')) as ConversationTurn[];
  }

  /** All messages of a conversation, oldest first; `except` leaves out a call's own earlier try. */
  async messages(conversationId: string, except?: string): Promise<AgentMessage[]> {
    return (await this.turns(conversationId)).filter((t) => t.correlationId !== except).flatMap((t) => t.messages);
  }

  /** Appends an exchange; a turn with the same correlation id (a retried call) is replaced. */
  async append(conversationId: string, turn: ConversationTurn): Promise<void> {
    const turns = (await this.turns(conversationId)).filter((t) => t.correlationId !== turn.correlationId);
    turns.push(turn);
    const ref = await this.blobs.put(Buffer.from(JSON.stringify(turns)), 'application/json', `conversation ${conversationId}: ${turns.length} turns`);
    await this.blobs.setName(this.key(conversationId), ref.ref);
  }

  private key(conversationId: string): string {
    return `conversation:${conversationId}`;
  }
}
