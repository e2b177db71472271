/**
 * Review round trip: from just before the client sends a review (client clock) to the moment the next
 * stage's activity starts (server's history timestamp; same machine, same clock). Treadle's review is the
 * `resolveReview` update that `TreadleClient.approve` sends; the baseline is a plain signal to a workflow
 * waiting on `condition`. Treadle's own `review` signal is measured too, for a like-for-like comparison.
 */
import { activitySpans, readHistory } from '../history';
import { distribution, ratio, round, type Distribution } from '../statistics';
import { fmt, fmtRatio, mapLimited, type ScenarioContext, type ScenarioResult } from '../scenario';
import type { Side } from '../sides';

type Variant = 'treadleUpdate' | 'treadleSignal' | 'baselineSignal';

export interface ReviewVariantResult {
  /** Review sent → next stage's activity started. */
  roundTripMs: Distribution;
  /** How long the client call itself took (an update returns once accepted and applied; a signal once stored). */
  clientCallMs: Distribution;
}

export interface ReviewRoundTripResult {
  items: number;
  treadleUpdate: ReviewVariantResult;
  treadleSignal: ReviewVariantResult;
  baselineSignal: ReviewVariantResult;
  /** Treadle update ÷ baseline signal. */
  p50Ratio: number | null;
  p99Ratio: number | null;
  /** Treadle signal ÷ baseline signal. */
  signalP50Ratio: number | null;
}

/** Runs the review round-trip scenario. */
export async function reviewRoundTrip(ctx: ScenarioContext): Promise<ScenarioResult<ReviewRoundTripResult>> {
  const items = ctx.sizes.reviewItems;
  const variants: { key: Variant; side: Side; via: 'update' | 'signal' }[] = [
    { key: 'baselineSignal', side: ctx.baseline, via: 'signal' },
    { key: 'treadleUpdate', side: ctx.treadle, via: 'update' },
    { key: 'treadleSignal', side: ctx.treadle, via: 'signal' },
  ];
  const idOf = (key: Variant, i: number) => `${ctx.tag}-review-${key}-${i}`;
  ctx.progress(`review round trip: ${items} items per variant (treadle update, treadle signal, baseline signal)`);
  for (const { key, side } of variants) {
    await mapLimited(
      Array.from({ length: items }, (_, i) => i),
      10,
      async (i) => {
        await side.startReview(idOf(key, i));
        await side.untilWaiting(idOf(key, i));
      },
    );
  }

  const roundTrips: Record<Variant, number[]> = { treadleUpdate: [], treadleSignal: [], baselineSignal: [] };
  const calls: Record<Variant, number[]> = { treadleUpdate: [], treadleSignal: [], baselineSignal: [] };
  for (let i = 0; i < items; i++) {
    // Rotate which variant goes first so none always follows the others' leftovers.
    const order = variants.map((_, k) => variants[(i + k) % variants.length]!);
    for (const { key, side, via } of order) {
      const id = idOf(key, i);
      const sentAt = Date.now();
      const callStarted = performance.now();
      await side.approve(id, via);
      calls[key].push(performance.now() - callStarted);
      await side.result(id);
      const spans = activitySpans((await readHistory(side.handle(id))).history);
      const next = spans[spans.length - 1];
      if (next?.startedAt === undefined || spans.length < 2)
        throw new Error(`${id}: no activity after the review in the history`);
      roundTrips[key].push(next.startedAt - sentAt);
    }
  }
  const summarize = (key: Variant): ReviewVariantResult => ({
    roundTripMs: distribution(roundTrips[key]),
    clientCallMs: distribution(calls[key].map((ms) => round(ms))),
  });
  const result: ReviewRoundTripResult = {
    items,
    treadleUpdate: summarize('treadleUpdate'),
    treadleSignal: summarize('treadleSignal'),
    baselineSignal: summarize('baselineSignal'),
    p50Ratio: null,
    p99Ratio: null,
    signalP50Ratio: null,
  };
  result.p50Ratio = ratio(result.treadleUpdate.roundTripMs.p50, result.baselineSignal.roundTripMs.p50);
  result.p99Ratio = ratio(result.treadleUpdate.roundTripMs.p99, result.baselineSignal.roundTripMs.p99);
  result.signalP50Ratio = ratio(result.treadleSignal.roundTripMs.p50, result.baselineSignal.roundTripMs.p50);
  const name = `review round trip (${items} items)`;
  const b = result.baselineSignal.roundTripMs;
  return {
    result,
    rows: [
      {
        scenario: name,
        metric: 'update (treadle) vs signal (baseline) p50 / p99',
        treadle: `${fmt(result.treadleUpdate.roundTripMs.p50, ' ms')} / ${fmt(result.treadleUpdate.roundTripMs.p99, ' ms')}`,
        baseline: `${fmt(b.p50, ' ms')} / ${fmt(b.p99, ' ms')}`,
        ratio: fmtRatio(result.p50Ratio),
      },
      {
        scenario: name,
        metric: 'signal vs signal p50 / p99',
        treadle: `${fmt(result.treadleSignal.roundTripMs.p50, ' ms')} / ${fmt(result.treadleSignal.roundTripMs.p99, ' ms')}`,
        baseline: `${fmt(b.p50, ' ms')} / ${fmt(b.p99, ' ms')}`,
        ratio: fmtRatio(result.signalP50Ratio),
      },
    ],
  };
}
