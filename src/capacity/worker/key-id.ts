/**
 * The short id of an API key that names a capacity scope: the limiter's workflow id, the agent's throttle scope
 * and metrics never hold the key itself.
 */
import { createHash } from 'node:crypto';

/**
 * A short, stable id of an API key (the first 12 hex of its sha256): two processes with the same key share a
 * limiter, and neither the id nor the history holds the key.
 */
export function capacityKeyId(apiKey: string): string {
  return createHash('sha256').update(apiKey).digest('hex').slice(0, 12);
}
