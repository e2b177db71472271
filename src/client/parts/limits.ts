/**
 * `client.limits`: the model capacity limiters running now (issue 39) and each one's use, as `treadle limits`
 * shows them (src/client/capacity.ts).
 */
import { runningLimiters, type LimiterUsage } from '../capacity';
import { ClientPart } from './context';

/** The limits part of `TreadleClient` (`client.limits`). */
export class LimitsClient extends ClientPart {
  /**
   * Every running limiter (one per provider, model and API key that a worker has called under a limits file),
   * with its use now: calls in flight, requests and tokens this minute against their limits, a provider's
   * slow-down, the calls waiting by priority and fairness key. Each limiter answers within the client's
   * `answerWaitMs` or is listed with an `error` (no worker answered). Empty when none runs.
   */
  async list(): Promise<LimiterUsage[]> {
    return runningLimiters(this.context.client, this.context.answerWaitMs).catch(this.context.rethrow);
  }
}
