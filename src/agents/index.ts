/**
 * Agents: one interface, several providers. `defaultAgentProviders()` is what a worker offers unless it
 * is given its own map.
 */
import { claudeCodeAgentFactory } from './claude-code';
import { load } from './lazy-modules';
import type { AgentProviders } from './providers';
import { scriptedAgentFactory } from './scripted';

export * from './types';
export { defaultAgentName, type AgentContext, type AgentProviderFactory, type AgentProviders } from './providers';
export { recordingAgent, callRecordOf, callRecordsOf } from './recording';
export { ConversationStore } from '../storage/conversation';

/** anthropic (needs ANTHROPIC_API_KEY), scripted (offline), claude-code (needs the `claude` CLI). */
export function defaultAgentProviders(): AgentProviders {
  return {
    // Loaded on first use: the Anthropic SDK is a third of a worker's module load time, and offline workers never use it.
    anthropic: () => new (load.anthropic().AnthropicAgent)(),
    scripted: scriptedAgentFactory,
    'claude-code': claudeCodeAgentFactory,
  };
}
