/**
 * Agents: one interface, several providers. `defaultAgentProviders()` is what a worker offers unless it
 * is given its own map.
 */
import { claudeCodeAgentFactory } from './claude-code';
import { load } from './lazy-modules';
import type { CallThrottle } from './call-throttle';
import type { AgentProviders } from './providers';
import { scriptedAgentFactory } from './scripted';

export * from './types';
export { defaultAgentName, type AgentContext, type AgentProviderFactory, type AgentProviders } from './providers';
export { recordingAgent, callRecordOf, callRecordsOf } from './recording';
export { ConversationStore } from '../storage/conversation';

/**
 * anthropic (needs ANTHROPIC_API_KEY), scripted (offline), claude-code (needs the `claude` CLI). `throttle` is
 * where the anthropic agent's calls wait for capacity (default the process's own, `PROCESS_THROTTLE`; the
 * worker passes its limiter-backed one when a limits file is configured).
 */
export function defaultAgentProviders(options: { throttle?: CallThrottle } = {}): AgentProviders {
  const agentOptions = options.throttle ? { throttle: options.throttle } : {};
  return {
    // Loaded on first use: the Anthropic SDK is a third of a worker's module load time, and offline workers never use it.
    anthropic: () => new (load.anthropic().AnthropicAgent)(agentOptions),
    scripted: scriptedAgentFactory,
    'claude-code': claudeCodeAgentFactory,
  };
}
