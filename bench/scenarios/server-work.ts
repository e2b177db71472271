/**
 * Server work per item, counted rather than timed: the dev server's own metrics (`--metrics-port`) give the
 * persistence operations it made, by operation. Timing the server is noisy on a shared 2-core machine (its
 * CPU per item moves by ±20% from round to round, whichever side runs); the operation counts do not move.
 *
 * Each side runs `serverWorkItems` 10-stage items at once, alone. Before the first reading and after the
 * items complete, the server is left to finish its queued work (visibility records are written
 * asynchronously). Timers that fire later (activity heartbeat timeouts, 30 s for Treadle's stages) are not
 * counted; they read and delete a timer task each.
 */
import { readOperationCounts, operationsPerItem, type OperationsPerItem } from '../server-metrics';
import { ratio, round } from '../statistics';
import { fmtRatio, type Row, type ScenarioContext, type ScenarioResult } from '../scenario';
import type { Side, SideName } from '../sides';

/** How long the server gets to write what it queued (visibility, task acks), before and after each side's items. */
const SETTLE_MS = 3_000;

export interface ServerWorkResult {
  items: number;
  treadle: OperationsPerItem;
  baseline: OperationsPerItem;
  /** Treadle ÷ baseline persistence writes per item (the operations that change stored state). */
  writesRatio: number | null;
  /** Operations whose count per item differs between the sides by at least 0.5, Treadle's minus the baseline's. */
  differences: Record<string, number>;
}

export async function serverWork(ctx: ScenarioContext): Promise<ScenarioResult<ServerWorkResult | null>> {
  const items = ctx.sizes.serverWorkItems;
  const url = ctx.serverMetricsUrl;
  if (items <= 0 || url === undefined) return { result: null, rows: [] };
  const settle = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
  const measure = async (side: Side): Promise<OperationsPerItem> => {
    // What earlier items queued (the scenario before this one) is written before the first reading.
    await settle();
    const before = await readOperationCounts(url);
    await Promise.all(
      Array.from({ length: items }, async (_, i) => {
        const id = `${ctx.tag}-server-work-${side.name}-${i}`;
        await side.startLinear(id, ctx.sizes.stages);
        await side.result(id);
      }),
    );
    await settle();
    return operationsPerItem(before, await readOperationCounts(url), items);
  };
  const measured = {} as Record<SideName, OperationsPerItem>;
  for (const side of [ctx.baseline, ctx.treadle]) {
    ctx.progress(`server work: ${side.name}, ${items} items`);
    measured[side.name] = await measure(side);
  }
  const { treadle, baseline } = measured;
  const differences: Record<string, number> = {};
  for (const operation of new Set([...Object.keys(treadle.byOperation), ...Object.keys(baseline.byOperation)])) {
    const difference = (treadle.byOperation[operation] ?? 0) - (baseline.byOperation[operation] ?? 0);
    if (Math.abs(difference) >= 0.5) differences[operation] = round(difference);
  }
  const result: ServerWorkResult = {
    items,
    treadle,
    baseline,
    writesRatio: ratio(treadle.writes, baseline.writes),
    differences,
  };
  const scenario = `server work (${items} items × ${ctx.sizes.stages} stages, one side at a time)`;
  const differenceText = Object.entries(differences)
    .sort((a, b) => Math.abs(b[1]) - Math.abs(a[1]))
    .map(([operation, d]) => `${operation} ${d > 0 ? '+' : ''}${d.toFixed(1)}`)
    .join(', ');
  const rows: Row[] = [
    {
      scenario,
      metric: 'persistence operations per item: writes / reads (server metrics)',
      treadle: `${treadle.writes.toFixed(1)} / ${treadle.reads.toFixed(1)}`,
      baseline: `${baseline.writes.toFixed(1)} / ${baseline.reads.toFixed(1)}`,
      ratio: fmtRatio(result.writesRatio),
    },
    {
      scenario,
      metric: 'operations per item that differ (treadle − baseline)',
      treadle: differenceText || 'none',
      baseline: '',
      ratio: '',
    },
  ];
  return { result, rows };
}
