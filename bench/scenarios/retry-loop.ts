/**
 * Retry loop: a stage whose judge rejects it twice and accepts the third attempt. Treadle: the `noop`
 * stage with the built-in `scripted` gate; baseline: a for-loop calling `noop` then `judge`. Reports history
 * events and bytes per attempt, and the time per item.
 */
import { eventCounts, payloadBytesByType, readHistory, runDurationMs, schedulingLatencies } from '../history';
import { distribution, median, ratio, round, type Distribution } from '../statistics';
import { fmt, fmtRatio, sidesInOrder, type ScenarioContext, type ScenarioResult } from '../scenario';
import type { SideName } from '../sides';

/** Rejections before the judge accepts. */
const REJECTIONS = 2;
const ATTEMPTS = REJECTIONS + 1;

export interface RetryLoopSide {
  attempts: number;
  historyEventsPerItem: number;
  historyBytesPerItem: number;
  historyEventsPerAttempt: number;
  historyBytesPerAttempt: number;
  itemDurationMs: Distribution;
  /** Work → judge → next attempt's work: every activity start after a completion. */
  schedulingLatencyMs: Distribution;
  eventsByType: Record<string, number>;
  payloadBytesByType: Record<string, number>;
}

export interface RetryLoopResult {
  items: number;
  treadle: RetryLoopSide;
  baseline: RetryLoopSide;
  bytesPerAttemptRatio: number | null;
  eventsPerAttemptRatio: number | null;
  durationP50Ratio: number | null;
}

/** Runs the retry-loop scenario. */
export async function retryLoop(ctx: ScenarioContext): Promise<ScenarioResult<RetryLoopResult>> {
  const items = ctx.sizes.retryItems;
  const reads: Record<SideName, Awaited<ReturnType<typeof readHistory>>[]> = { treadle: [], baseline: [] };
  ctx.progress(`retry loop: ${items} items per side, rejected ${REJECTIONS}× then accepted`);
  for (let i = 0; i < items; i++) {
    for (const side of sidesInOrder(ctx, i)) {
      const id = `${ctx.tag}-retry-${side.name}-${i}`;
      await side.startRetry(id, REJECTIONS);
      await side.result(id);
      reads[side.name].push(await readHistory(side.handle(id)));
    }
  }
  const summarize = (name: SideName): RetryLoopSide => {
    const read = reads[name];
    const events = median(read.map((r) => r.size.events));
    const bytes = median(read.map((r) => r.size.bytes));
    return {
      attempts: ATTEMPTS,
      historyEventsPerItem: events,
      historyBytesPerItem: bytes,
      historyEventsPerAttempt: round(events / ATTEMPTS, 1),
      historyBytesPerAttempt: round(bytes / ATTEMPTS, 0),
      itemDurationMs: distribution(read.map((r) => runDurationMs(r.history))),
      schedulingLatencyMs: distribution(read.flatMap((r) => schedulingLatencies(r.history))),
      eventsByType: eventCounts(read[0]!.history),
      payloadBytesByType: payloadBytesByType(read[0]!.history),
    };
  };
  const treadle = summarize('treadle');
  const baseline = summarize('baseline');
  const result: RetryLoopResult = {
    items,
    treadle,
    baseline,
    bytesPerAttemptRatio: ratio(treadle.historyBytesPerAttempt, baseline.historyBytesPerAttempt),
    eventsPerAttemptRatio: ratio(treadle.historyEventsPerAttempt, baseline.historyEventsPerAttempt),
    durationP50Ratio: ratio(treadle.itemDurationMs.p50, baseline.itemDurationMs.p50),
  };
  const name = `retry loop (rejected ${REJECTIONS}×, accepted on ${ATTEMPTS})`;
  return {
    result,
    rows: [
      {
        scenario: name,
        metric: 'history events per attempt',
        treadle: fmt(treadle.historyEventsPerAttempt),
        baseline: fmt(baseline.historyEventsPerAttempt),
        ratio: fmtRatio(result.eventsPerAttemptRatio),
      },
      {
        scenario: name,
        metric: 'history bytes per attempt',
        treadle: fmt(treadle.historyBytesPerAttempt / 1024, ' KiB'),
        baseline: fmt(baseline.historyBytesPerAttempt / 1024, ' KiB'),
        ratio: fmtRatio(result.bytesPerAttemptRatio),
      },
      {
        scenario: name,
        metric: 'item duration p50',
        treadle: fmt(treadle.itemDurationMs.p50, ' ms'),
        baseline: fmt(baseline.itemDurationMs.p50, ' ms'),
        ratio: fmtRatio(result.durationP50Ratio),
      },
    ],
  };
}
