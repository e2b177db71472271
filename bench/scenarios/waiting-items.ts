/**
 * Many waiting items: N work items waiting for review at once. Reports this process's RSS (it runs both
 * workers) before and after, and how long `TreadleClient.listPendingReviews()` takes to list them all.
 * `listPendingReviews` is one visibility listing that reads each item's `treadleReviews` memo (no query to
 * any item, no worker needed). Timed alongside, as the floor: the raw listing call; and the SDK's `list()`.
 * The same number of baseline workflows waiting for a signal gives the memory cost of a plain waiting workflow.
 */
import type { Client } from '@temporalio/client';
import { PENDING_REVIEWS_QUERY } from '../../src/model/search-attributes';
import { reviewPipelineSpec } from '../treadle-pipelines';
import { ratio, round } from '../statistics';
import { fmt, fmtRatio, mapLimited, nowMs, takeTurns, type ScenarioContext, type ScenarioResult } from '../scenario';
import type { Side } from '../sides';

/** The goal (issue 7): listing 1,000 waiting reviews takes less than this. */
export const LISTING_GOAL_MS = 300;
/** Starts in flight at once. */
const START_CONCURRENCY = 20;
const LISTING_POLL_MS = 250;
/** Listing calls timed once everything is listed; the median is reported. */
const STEADY_CALLS = 9;
const LISTING_TIMEOUT_MS = 300_000;

export interface MemorySample {
  rssMiB: number;
  heapUsedMiB: number;
}

export interface WaitingItemsResult {
  items: number;
  memory: { before: MemorySample; afterBaseline: MemorySample; afterTreadle: MemorySample };
  /** RSS growth per waiting item (KiB). */
  rssPerItemKiB: { treadle: number; baseline: number };
  /** Wall time to start all items and see each waiting. */
  startMs: { treadle: number; baseline: number };
  listing: {
    /** All items started → first `listPendingReviews` call that returned all of them (polled). */
    firstCompleteAfterMs: number;
    /** Duration of that complete call. */
    firstCompleteCallMs: number;
    /** Median of a few more calls once everything is listed. */
    steadyCallMs: number;
    /**
     * The floor: the same visibility query as raw service calls (every page), decoding nothing but the
     * protobuf response.
     */
    visibilityOnlyMs: number;
    /** The SDK's `client.workflow.list()` over the same query, which decodes every field of every execution. */
    sdkListMs: number;
    calls: number;
    listed: number;
  };
}

/** The raw visibility listing, page by page: the server's answer with nothing decoded beyond protobuf. */
export async function rawListing(client: Client, query: string): Promise<number> {
  let count = 0;
  let nextPageToken: Uint8Array | undefined;
  do {
    const page = await client.workflowService.listWorkflowExecutions({
      namespace: client.options.namespace,
      query,
      ...(nextPageToken ? { nextPageToken } : {}),
    });
    count += page.executions.length;
    nextPageToken = page.nextPageToken && page.nextPageToken.length > 0 ? page.nextPageToken : undefined;
  } while (nextPageToken);
  return count;
}

function memory(): MemorySample {
  const m = process.memoryUsage();
  return { rssMiB: round(m.rss / 2 ** 20, 1), heapUsedMiB: round(m.heapUsed / 2 ** 20, 1) };
}

async function startWaiting(side: Side, ids: string[], confirm: boolean): Promise<number> {
  const started = nowMs();
  await mapLimited(ids, START_CONCURRENCY, async (id) => {
    await side.startReview(id);
    if (confirm) await side.untilWaiting(id);
  });
  return nowMs() - started;
}

/** Runs the many-waiting-items scenario; run it last, as it leaves the items waiting. */
export async function waitingItems(ctx: ScenarioContext): Promise<ScenarioResult<WaitingItemsResult>> {
  const n = ctx.sizes.waitingItems;
  const before = memory();
  ctx.progress(`waiting items: ${n} baseline workflows waiting for a signal`);
  const baselineStart = await startWaiting(
    ctx.baseline,
    Array.from({ length: n }, (_, i) => `${ctx.tag}-waiting-baseline-${i}`),
    true,
  );
  const afterBaseline = memory();

  ctx.progress(`waiting items: ${n} treadle items waiting for review`);
  const treadleIds = Array.from({ length: n }, (_, i) => `${ctx.tag}-waiting-treadle-${i}`);
  const treadleStart = await startWaiting(ctx.treadle, treadleIds, false);
  const client = ctx.treadleClient;
  const listedFrom = nowMs();
  let calls = 0;
  let firstCompleteCallMs = Number.NaN;
  let listed = 0;
  for (;;) {
    const callStarted = nowMs();
    const listing = await client.listPendingReviews({ pipeline: reviewPipelineSpec.name });
    const callMs = nowMs() - callStarted;
    calls++;
    listed = listing.length;
    if (listed >= n) {
      firstCompleteCallMs = callMs;
      break;
    }
    if (nowMs() - listedFrom > LISTING_TIMEOUT_MS)
      throw new Error(`only ${listed} of ${n} pending reviews listed after ${LISTING_TIMEOUT_MS / 1000}s`);
    await new Promise((r) => setTimeout(r, LISTING_POLL_MS));
  }
  const firstCompleteAfterMs = nowMs() - listedFrom;
  const afterTreadle = memory();

  // Median of several calls each. The three take turns going first (a fixed order gave the first call of
  // each round ~80 ms more in one full run): one call is at the mercy of whatever else the machine does.
  const query = `${PENDING_REVIEWS_QUERY} AND TreadlePipeline = '${reviewPipelineSpec.name}'`;
  const expect = (what: string, count: number): void => {
    if (count !== n) throw new Error(`${what} returned ${count} of ${n} items`);
  };
  const timed = await takeTurns(STEADY_CALLS, {
    steadyCall: async () =>
      expect('listPendingReviews', (await client.listPendingReviews({ pipeline: reviewPipelineSpec.name })).length),
    visibilityOnly: async () => expect('the raw listing call', await rawListing(client.client, query)),
    sdkList: async () => {
      let count = 0;
      for await (const _ of client.client.workflow.list({ query })) count++;
      expect("the SDK's list()", count);
    },
  });
  const steadyCallMs = timed.steadyCall.medianMs;
  const visibilityOnlyMs = timed.visibilityOnly.medianMs;
  const sdkListMs = timed.sdkList.medianMs;

  const result: WaitingItemsResult = {
    items: n,
    memory: { before, afterBaseline, afterTreadle },
    rssPerItemKiB: {
      baseline: round(((afterBaseline.rssMiB - before.rssMiB) * 1024) / n, 1),
      treadle: round(((afterTreadle.rssMiB - afterBaseline.rssMiB) * 1024) / n, 1),
    },
    startMs: { treadle: round(treadleStart), baseline: round(baselineStart) },
    listing: {
      firstCompleteAfterMs: round(firstCompleteAfterMs),
      firstCompleteCallMs: round(firstCompleteCallMs),
      steadyCallMs: round(steadyCallMs),
      visibilityOnlyMs: round(visibilityOnlyMs),
      sdkListMs: round(sdkListMs),
      calls,
      listed,
    },
  };
  const name = `many waiting items (${n})`;
  return {
    result,
    rows: [
      {
        scenario: name,
        metric: 'worker RSS growth per waiting item',
        treadle: fmt(result.rssPerItemKiB.treadle, ' KiB'),
        baseline: fmt(result.rssPerItemKiB.baseline, ' KiB'),
        ratio: fmtRatio(ratio(result.rssPerItemKiB.treadle, result.rssPerItemKiB.baseline)),
      },
      {
        scenario: name,
        metric: 'process RSS after starting them (cumulative)',
        treadle: fmt(afterTreadle.rssMiB, ' MiB'),
        baseline: fmt(afterBaseline.rssMiB, ' MiB'),
        ratio: '',
      },
      {
        scenario: name,
        metric: 'listPendingReviews: median call / first complete',
        treadle: `${fmt(result.listing.steadyCallMs, ' ms')} / ${fmt(result.listing.firstCompleteAfterMs, ' ms')}`,
        baseline: `raw listing call: ${fmt(result.listing.visibilityOnlyMs, ' ms')}; SDK list(): ${fmt(result.listing.sdkListMs, ' ms')}`,
        ratio: '',
      },
    ],
  };
}
