/**
 * The dev server's persistence operations, read from its Prometheus metrics (`startDevServer({ metricsPort })`).
 * Counts of `persistence_requests` and `visibility_persistence_requests` by `operation`, summed over every
 * other label (service, namespace).
 */

import { round } from './statistics';

/** Persistence operations per item between two readings. */
export interface OperationsPerItem {
  /** Operations that change stored state: executions, tasks, history, visibility records. */
  writes: number;
  /** The rest: reads of executions, history, tasks, namespaces and cluster metadata. */
  reads: number;
  /** Every operation's count per item (visibility operations prefixed `visibility:`). */
  byOperation: Record<string, number>;
}

/** Operations that change stored state; every other persistence operation reads. */
const WRITE_OPERATION =
  /^(visibility:)?(Create|Update|Upsert|Delete|Record|Append|Complete|RangeComplete|Put|Set|Conflict)/;

const COUNTER = /^(visibility_persistence_requests|persistence_requests)(?:_total)?\{([^}]*)\} ([0-9.eE+-]+)$/;

/** Reads the counters now, by operation. */
export async function readOperationCounts(url: string): Promise<Map<string, number>> {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`the dev server's metrics at ${url} answered ${response.status}`);
  const counts = new Map<string, number>();
  for (const line of (await response.text()).split('\n')) {
    const match = COUNTER.exec(line);
    if (!match) continue;
    const operation = /(?:^|,)operation="([^"]+)"/.exec(match[2]!)?.[1];
    if (operation === undefined) continue;
    const key = match[1] === 'visibility_persistence_requests' ? `visibility:${operation}` : operation;
    counts.set(key, (counts.get(key) ?? 0) + Number(match[3]));
  }
  if (counts.size === 0) throw new Error(`the dev server's metrics at ${url} hold no persistence_requests counters`);
  return counts;
}

/** The operations made between two readings, per item, rounded to hundredths. */
export function operationsPerItem(
  before: Map<string, number>,
  after: Map<string, number>,
  items: number,
): OperationsPerItem {
  const byOperation: Record<string, number> = {};
  let writes = 0;
  let reads = 0;
  for (const [operation, count] of after) {
    const perItem = (count - (before.get(operation) ?? 0)) / items;
    if (perItem <= 0) continue;
    byOperation[operation] = round(perItem);
    if (WRITE_OPERATION.test(operation)) writes += perItem;
    else reads += perItem;
  }
  return { writes: round(writes), reads: round(reads), byOperation };
}
