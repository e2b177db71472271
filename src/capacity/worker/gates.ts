/**
 * A worker process's capacity gates, one per scope its limits file names: the model-call code asks
 * {@link CapacityGates.forCall} for the gate of a provider and model, and gets none when no limit applies.
 */
import type { Client } from '@temporalio/client';
import { fairnessWeight, limitFor, type CapacityLimits } from '../shapes';
import { CapacityGate } from './gate';

import { capacityKeyId } from './key-id';

export { capacityKeyId };

/** What the gates need: the Temporal client, the task queue the limiter runs on, the limits and the environment. */
export interface CapacityGatesOptions {
  client: Client;
  taskQueue: string;
  limits: CapacityLimits;
  /** Where API keys are read from by the names the limits give (default `process.env`). */
  env?: Readonly<Record<string, string | undefined>>;
  /** This process's name at the limiters (default: each gate's own). */
  holder?: string;
}

/** The gates of one process (see the module's comment). */
export class CapacityGates {
  private readonly gates = new Map<string, CapacityGate>();

  constructor(private readonly options: CapacityGatesOptions) {}

  /**
   * The gate for a call of `provider`'s `model` with the key in `keyEnv` (the limit's own by default): the
   * model's limit, else the provider's `*` (one limiter for every model it covers); undefined when none applies.
   */
  forCall(provider: string, model: string, keyEnv?: string): CapacityGate | undefined {
    const limit = limitFor(this.options.limits, provider, model, keyEnv);
    if (!limit) return undefined;
    const env = this.options.env ?? process.env;
    // Without the key, calls fail anyway; they still share one limiter rather than run unlimited.
    const keyId = capacityKeyId(env[limit.key] ?? `unset:${limit.key}`);
    const scope = { provider, model: limit.model, keyId };
    const id = `${scope.provider}\u0000${scope.model}\u0000${keyId}`;
    let gate = this.gates.get(id);
    if (!gate) {
      const { client, taskQueue, holder } = this.options;
      gate = new CapacityGate({ client, taskQueue, scope, limits: limit, ...(holder !== undefined && { holder }) });
      this.gates.set(id, gate);
    }
    return gate;
  }

  /** The weight of a fairness key under the limits file's `fairness`. */
  weightOf(fairnessKey: string): number {
    return fairnessWeight(this.options.limits.fairness, fairnessKey);
  }

  /** Closes every gate (releases sent, waiting calls rejected). */
  async close(): Promise<void> {
    await Promise.all([...this.gates.values()].map((gate) => gate.close()));
    this.gates.clear();
  }
}
