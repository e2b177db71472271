/**
 * Choosing and building agent providers. The provider is chosen per stage (`agent:` in the spec), else by
 * `TREADLE_AGENT`, else `anthropic` when `ANTHROPIC_API_KEY` is set and `scripted` otherwise.
 */
import type { Json } from '../model/shapes';
import type { Agent } from './types';

/** What a provider may use from the attempt it serves (the scripted agent reads canned replies from it). */
export interface AgentContext {
  itemId: string;
  stage: string;
  attempt: number;
  /** The work item's payload. */
  input: Json;
  /** The implementation's `with:` config. */
  config: Json | undefined;
}

/** Builds a provider for one attempt. */
export type AgentProviderFactory = (ctx: AgentContext) => Agent;

/** Providers by name. */
export type AgentProviders = Record<string, AgentProviderFactory>;

export const AGENT_PROVIDER_NAMES = ['anthropic', 'scripted', 'claude-code'] as const;

/** The provider used when a stage names none. */
export function defaultAgentName(env: NodeJS.ProcessEnv = process.env): string {
  if (env.TREADLE_AGENT) return env.TREADLE_AGENT;
  return env.ANTHROPIC_API_KEY ? 'anthropic' : 'scripted';
}
