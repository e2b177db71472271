/**
 * The review inbox at scale (issue 27): N pending decisions — mostly `review_policy: always` reviews over four
 * pipelines and three reviewer groups, 18 % one-request approvals (half escalating), 2 % failed loops — held
 * by a Treadle worker in a process of its own, its workflow cache bounded (`TREADLE_WORKFLOW_CACHE`), its
 * resident memory sampled every second; the floor: the same number of raw waiting workflows in a baseline
 * worker process with the same cache. Then, median of 9 rounds taking turns: the raw visibility scan of the
 * decisions query (the floor), `listPendingDecisions`, the inbox's `GET /api/decisions?limit=50` plain and
 * filtered (over real HTTP, bearer token), the index's full rebuild and one delta listing, the first screen in
 * Chromium; the freshness of an SDK decision in the API; and batches through `POST /api/batch` of evicted
 * (replayed) and cached items.
 *
 * Runs on a dev server of its own after the main environment has shut down (`--only=inbox` starts none), so nothing
 * else is in flight.
 */
import { Client, Connection } from '@temporalio/client';
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TreadleClient } from '../../src/client';
import { pendingDecisionsQuery } from '../../src/client/decisions';
import { loadConfig } from '../../src/config';
import type { PendingDecision } from '../../src/model/decisions';
import { freePort } from '../../src/server/dev-server';
import { FileBlobStore } from '../../src/storage/blob-store';
import { newToken, parseTokens } from '../../src/ui/auth';
import { clientBackend } from '../../src/ui/client-backend';
import type { DecisionPage } from '../../src/ui/decision-index';
import { buildInboxApp } from '../../src/ui/server';
import { reviewThenContinue } from '../baseline-workflows';
import { BENCH_ANSWER_WAIT_MS, type WorkflowBundles } from '../environment';
import { firstScreenMs, InboxApi, launchChromium, RssSampler, type RssSummary } from '../inbox-probes';
import {
  fmt,
  mapLimited,
  nowMs,
  takeTurns,
  type Row,
  type ScenarioContext,
  type ScenarioResult,
  type Timed,
  runCleanups,
} from '../scenario';
import { median, round } from '../statistics';
import {
  inboxApprovalInput,
  inboxApprovalSpec,
  inboxFailingLoopInput,
  inboxFailingLoopSpec,
  inboxReviewSpec,
} from '../treadle-pipelines';
import { forkWorker, serverOfItsOwn, stopChild } from './separate-processes';
import type { ServerKind } from '../bench-server';
import { rawListing } from './waiting-items';

/** Goals (issue 27, "Scale"). */
export const INBOX_LIST_GOAL_MS = 300;
export const FIRST_SCREEN_GOAL_MS = 1_000;
export const WORKER_RSS_GOAL_MIB = 1_024;

const QUEUES = { treadle: 'bench-inbox-treadle', baseline: 'bench-inbox-baseline' } as const;
const START_CONCURRENCY = 50;
const ROUNDS = 9;
const PAGE = 50;
const REVIEW_PIPELINES = ['bench-inbox-docs', 'bench-inbox-code', 'bench-inbox-data', 'bench-inbox-ops'];
const REVIEWER_GROUPS = [undefined, 'editors', 'leads'] as const;
/** The filtered API request: one pipeline and one group, about a twelfth of the reviews. */
const FILTER = { pipeline: 'bench-inbox-code', reviewers: 'editors' };
/** Every one of these item numbers (mod 50) is a failed loop (2 %), the next nine approvals (18 %). */
const MIX_PERIOD = 50;
const SETTLE_MS = 5_000;
/** Waiting for every item to be listed (or the baseline to wait): two minutes, plus 100 ms an item. */
const listedTimeoutMs = (n: number): number => 120_000 + n * 100;
const GONE_TIMEOUT_MS = 60_000;
/** The delta listing looks back this far: the index's 10 s overlap plus one poll period. */
const DELTA_LOOK_BACK_MS = 11_000;

/** One batch group: decisions through `POST /api/batch`, in chunks taking turns with the other group. */
export interface BatchGroup {
  decisions: number;
  /** Summed wall time of its batches ÷ decisions (the server answers 8 at once). */
  msPerDecision: number;
  wallMs: number;
  notDecided: number;
}

export interface InboxResult {
  decisions: number;
  mix: { reviews: number; approvals: number; loops: number };
  maxCachedWorkflows: number;
  /** Wall time to start every item (concurrency {@link START_CONCURRENCY}), and the start rate. */
  startMs: { treadle: number; baseline: number };
  startsPerSecond: { treadle: number; baseline: number };
  /** All items started → `listPendingDecisions` counts N. */
  listedAfterMs: number;
  rss: { treadle: RssSummary; baseline: RssSummary };
  timings: {
    rawScan: Timed;
    listPendingDecisions: Timed;
    apiPage: Timed;
    apiFiltered: Timed & { total: number };
    indexRebuild: Timed;
    deltaListing: Timed;
    firstScreen: Timed;
  };
  /** An SDK decision's row gone from `GET /api/decisions` (ms after `decide` returned); `decide`'s own time. */
  freshness: Timed & { decideMedianMs: number };
  batch: { evicted: BatchGroup; cached: BatchGroup };
}

type ItemKind = 'review' | 'approval' | 'loop';

function kindOf(i: number): ItemKind {
  const slot = i % MIX_PERIOD;
  return slot === 0 ? 'loop' : slot <= 9 ? 'approval' : 'review';
}

/** Starts item `i` of the mix on `client`. */
async function startItem(client: TreadleClient, id: string, i: number): Promise<void> {
  const kind = kindOf(i);
  if (kind === 'loop') await client.start(inboxFailingLoopSpec, inboxFailingLoopInput, { id });
  else if (kind === 'approval') await client.start(inboxApprovalSpec(i % 2 === 0), inboxApprovalInput(id), { id });
  else {
    const spec = inboxReviewSpec(REVIEW_PIPELINES[i % 4]!, REVIEWER_GROUPS[i % 3]);
    await client.start(spec, null, { id });
  }
}

/** Polls until `check` holds; throws `what` after `timeoutMs`. */
async function until(check: () => Promise<boolean>, timeoutMs: number, pollMs: number, what: string): Promise<void> {
  const deadline = nowMs() + timeoutMs;
  while (!(await check())) {
    if (nowMs() > deadline) throw new Error(`${what} within ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, pollMs));
  }
}

/** A forked worker and its RSS sampler; `stop` ends both. */
interface WorkerUnderTest {
  child: ChildProcess;
  rss: RssSampler;
  stop(): Promise<RssSummary>;
}

async function startWorkerProcess(side: 'treadle' | 'baseline', args: string[], env: NodeJS.ProcessEnv) {
  const child = await forkWorker(side, args, env);
  const rss = new RssSampler(child.pid!);
  let summary: RssSummary | undefined;
  const worker: WorkerUnderTest = {
    child,
    rss,
    stop: async () => {
      summary ??= rss.stop();
      await stopChild(child);
      return summary;
    },
  };
  return worker;
}

/** N raw waiting workflows in the baseline process: the floor of the worker's memory. */
async function baselineFloor(
  temporal: Client,
  worker: WorkerUnderTest,
  n: number,
  tag: string,
): Promise<{ startMs: number; rss: RssSummary }> {
  const ids = Array.from({ length: n }, (_, i) => `${tag}-inbox-baseline-${i}`);
  const started = nowMs();
  await mapLimited(ids, START_CONCURRENCY, async (workflowId) => {
    await temporal.workflow.start(reviewThenContinue, { taskQueue: QUEUES.baseline, workflowId });
  });
  const startMs = nowMs() - started;
  // Tasks run about in start order: once the last 50 wait (activity done, 10 events), the rest do.
  await mapLimited(ids.slice(-50), 10, (id) =>
    until(
      async () => Number((await temporal.workflow.getHandle(id).describe()).historyLength) >= 10,
      listedTimeoutMs(n),
      250,
      `baseline workflow ${id} did not wait for its signal`,
    ),
  );
  await worker.rss.settle(SETTLE_MS);
  return { startMs, rss: await worker.stop() };
}

/** Freshness: an SDK decision, then polls the API until its row is gone. */
async function freshness(client: TreadleClient, api: InboxApi, decisions: PendingDecision[]) {
  const gone: number[] = [];
  const decide: number[] = [];
  for (const d of decisions) {
    const started = nowMs();
    const outcome = await client.decide(d.key, { action: 'approve' }, 'bench-sdk');
    if (outcome.status !== 'decided') throw new Error(`freshness: ${d.key} was ${outcome.status}`);
    const decided = nowMs();
    decide.push(round(decided - started));
    const query = `/api/decisions?limit=${PAGE}&text=${encodeURIComponent(d.workflowId)}`;
    await until(
      async () => !(await api.get<DecisionPage>(query)).decisions.some((x) => x.key === d.key),
      GONE_TIMEOUT_MS,
      25,
      `${d.key} still listed by the inbox`,
    );
    gone.push(round(nowMs() - decided));
  }
  return { medianMs: round(median(gone)), samplesMs: gone, decideMedianMs: round(median(decide)) };
}

/** Batches of the oldest (evicted) and newest (cached) reviews, in chunks taking turns. */
async function batches(api: InboxApi, evicted: PendingDecision[], cached: PendingDecision[]) {
  const groups = {
    evicted: { keys: evicted, wallMs: 0, notDecided: 0 },
    cached: { keys: cached, wallMs: 0, notDecided: 0 },
  };
  const chunks = 4;
  const size = Math.ceil(evicted.length / chunks);
  for (let c = 0; c < chunks; c++) {
    for (const group of c % 2 === 0 ? [groups.evicted, groups.cached] : [groups.cached, groups.evicted]) {
      const keys = group.keys.slice(c * size, (c + 1) * size).map((d) => d.key);
      if (keys.length === 0) continue;
      const started = nowMs();
      const { outcomes } = await api.post<{ outcomes: { status: string }[] }>('/api/batch', {
        keys,
        action: 'approve',
      });
      group.wallMs += nowMs() - started;
      group.notDecided += outcomes.filter((o) => o.status !== 'decided').length;
    }
  }
  const summary = (g: typeof groups.evicted): BatchGroup => ({
    decisions: g.keys.length,
    msPerDecision: round(g.wallMs / Math.max(1, g.keys.length)),
    wallMs: round(g.wallMs),
    notDecided: g.notDecided,
  });
  return { evicted: summary(groups.evicted), cached: summary(groups.cached) };
}

/** The timed probes of one running inbox, as {@link takeTurns} runs them. */
function probes(
  client: TreadleClient,
  api: InboxApi,
  index: { reconcile(): Promise<void> },
  screen: () => Promise<number>,
  n: number,
) {
  const expect = (what: string, got: number, want: number): void => {
    if (got !== want) throw new Error(`${what} counted ${got} of ${want} decisions`);
  };
  const query = pendingDecisionsQuery();
  return {
    rawScan: async () => expect('the raw visibility scan', await rawListing(client.client, query), n),
    listPendingDecisions: async () => expect('listPendingDecisions', (await client.listPendingDecisions()).length, n),
    apiPage: async () =>
      expect('GET /api/decisions', (await api.get<DecisionPage>(`/api/decisions?limit=${PAGE}`)).counts.total, n),
    apiFiltered: async () => {
      const page = await api.get<DecisionPage>(`/api/decisions?limit=${PAGE}&${new URLSearchParams(FILTER)}`);
      if (page.counts.total === 0) throw new Error('the filtered request matched nothing');
    },
    indexRebuild: () => index.reconcile(),
    deltaListing: async () => {
      await clientBackend(client).changes(new Date(Date.now() - DELTA_LOOK_BACK_MS));
    },
    firstScreen: screen,
  };
}

/** The inbox server in this process (real HTTP, a bearer token), Chromium, and a signed-in first screen. */
async function openInbox(
  client: TreadleClient,
  cleanups: (() => Promise<unknown> | void)[],
  progress: (message: string) => void,
  rows: number,
): Promise<{ api: InboxApi; index: { reconcile(): Promise<void> }; screen: () => Promise<number> }> {
  const { token, line } = newToken('bench');
  const port = await freePort();
  const { app, index } = await buildInboxApp(
    {
      backend: clientBackend(client),
      auth: { tokens: parseTokens(line) },
      index: { onError: (e) => progress(`index: ${String(e)}`) },
    },
    [`127.0.0.1:${port}`, `localhost:${port}`],
  );
  cleanups.push(() => app.close());
  await app.listen({ host: '127.0.0.1', port });
  const api = new InboxApi(`http://127.0.0.1:${port}/`, token);
  const browser = await launchChromium();
  cleanups.push(() => browser.close());
  const session = await api.session();
  return { api, index, screen: () => firstScreenMs(browser, api.url, session, rows) };
}

/**
 * Runs the scenario on a dev server of its own, with the run's bundles. It needs no environment (`--only=inbox`
 * starts none): of the context, only the sizes, the run tag and progress.
 */
export async function inbox(
  ctx: Pick<ScenarioContext, 'sizes' | 'tag' | 'progress'>,
  bundles: WorkflowBundles,
  serverKind: ServerKind = 'dev',
): Promise<ScenarioResult<InboxResult>> {
  const n = ctx.sizes.inboxDecisions;
  const maxCachedWorkflows = ctx.sizes.inboxWorkflowCache ?? loadConfig().workflowCache;
  const progress = (message: string): void => ctx.progress(`inbox: ${message}`);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'treadle-bench-inbox-'));
  const cleanups: (() => Promise<unknown> | void)[] = [() => rmSync(dir, { recursive: true, force: true })];
  try {
    const server = await serverOfItsOwn(dir, progress, serverKind);
    cleanups.push(() => server.stop());
    const blobDir = path.join(dir, 'blobs');
    mkdirSync(blobDir);
    const workerArgs = (side: 'treadle' | 'baseline', bundle: { code: string }): string[] => {
      const file = path.join(dir, `${side}-workflows.js`);
      writeFileSync(file, bundle.code);
      return [server.address, server.namespace, QUEUES[side], file, blobDir, `--max-cached=${maxCachedWorkflows}`];
    };
    // Failed loops keep their run folders under the worker's home: this run's folder, not the user's.
    const env = { ...process.env, TREADLE_HOME: path.join(dir, 'home') };
    const connection = await Connection.connect({ address: server.address });
    cleanups.push(() => connection.close());
    const temporal = new Client({ connection, namespace: server.namespace });
    const client = new TreadleClient(temporal, {
      taskQueue: QUEUES.treadle,
      blobs: new FileBlobStore(blobDir),
      answerWaitMs: BENCH_ANSWER_WAIT_MS,
    });

    progress(`${n} raw waiting workflows in a baseline worker process (cache ${maxCachedWorkflows})`);
    const baselineWorker = await startWorkerProcess('baseline', workerArgs('baseline', bundles.baseline), env);
    cleanups.push(() => baselineWorker.stop());
    const baseline = await baselineFloor(temporal, baselineWorker, n, ctx.tag);

    progress(`${n} pending decisions in a Treadle worker process (cache ${maxCachedWorkflows})`);
    const treadleWorker = await startWorkerProcess('treadle', workerArgs('treadle', bundles.treadle), env);
    cleanups.push(() => treadleWorker.stop());
    const ids = Array.from({ length: n }, (_, i) => `${ctx.tag}-inbox-${i}`);
    let started = nowMs();
    await mapLimited(ids, START_CONCURRENCY, (id, i) => startItem(client, id, i));
    const treadleStartMs = nowMs() - started;
    progress(`started in ${(treadleStartMs / 1000).toFixed(1)} s; waiting until all ${n} are listed`);
    started = nowMs();
    let all: PendingDecision[] = [];
    await until(
      async () => {
        if (treadleWorker.child.exitCode !== null) throw new Error('the Treadle worker process exited');
        // An item that failed would never be listed: say so at once rather than at the timeout.
        const failed = await temporal.workflow.count(`ExecutionStatus = 'Failed' AND TaskQueue = '${QUEUES.treadle}'`);
        if (failed.count > 0) throw new Error(`${failed.count} inbox items failed (the worker's log says why)`);
        all = await client.listPendingDecisions();
        return all.length >= n;
      },
      listedTimeoutMs(n),
      2_000,
      `fewer than ${n} decisions listed`,
    );
    const listedAfterMs = nowMs() - started;
    await treadleWorker.rss.settle(SETTLE_MS);

    const { api, index, screen } = await openInbox(client, cleanups, progress, Math.min(PAGE, n));

    progress(`timing ${ROUNDS} rounds`);
    const timed = await takeTurns(ROUNDS, probes(client, api, index, screen, n));
    const filtered = await api.get<DecisionPage>(`/api/decisions?limit=${PAGE}&${new URLSearchParams(FILTER)}`);

    const reviews = all.filter((d) => d.kind === 'review');
    const group = Math.max(1, Math.min(100, Math.floor(maxCachedWorkflows / 4), Math.floor(reviews.length / 4)));
    const middle = Math.floor(reviews.length / 2);
    progress(
      `freshness of ${ctx.sizes.inboxFreshnessSamples} SDK decisions; batches of ${group} evicted and ${group} cached`,
    );
    const fresh = await freshness(client, api, reviews.slice(middle, middle + ctx.sizes.inboxFreshnessSamples));
    const batch = await batches(api, reviews.slice(0, group), reviews.slice(-group));
    const mix = {
      reviews: reviews.length,
      approvals: all.filter((d) => d.kind === 'approval').length,
      loops: all.filter((d) => d.kind === 'loop').length,
    };
    const result: InboxResult = {
      decisions: n,
      mix,
      maxCachedWorkflows,
      startMs: { treadle: round(treadleStartMs), baseline: round(baseline.startMs) },
      startsPerSecond: { treadle: round((n / treadleStartMs) * 1000), baseline: round((n / baseline.startMs) * 1000) },
      listedAfterMs: round(listedAfterMs),
      rss: { treadle: await treadleWorker.stop(), baseline: baseline.rss },
      timings: { ...timed, apiFiltered: { ...timed.apiFiltered, total: filtered.counts.total } },
      freshness: fresh,
      batch,
    };
    return { result, rows: inboxRows(result) };
  } finally {
    await runCleanups(cleanups, (m) => progress(m));
  }
}

/** The table rows of a result. */
function inboxRows(r: InboxResult): Row[] {
  const scenario = `review inbox (${r.decisions} decisions, worker cache ${r.maxCachedWorkflows})`;
  const row = (metric: string, treadle: string, baseline = '', ratio = ''): Row => ({
    scenario,
    metric,
    treadle,
    baseline,
    ratio,
  });
  const t = r.timings;
  const rss = (s: RssSummary): string => `${fmt(s.peakMiB, ' MiB')} / ${fmt(s.settledMiB, ' MiB')}`;
  return [
    row('worker process RSS: peak / settled', rss(r.rss.treadle), rss(r.rss.baseline)),
    row('items started per second (50 at once)', fmt(r.startsPerSecond.treadle), fmt(r.startsPerSecond.baseline)),
    row(
      'GET /api/decisions?limit=50, median',
      fmt(t.apiPage.medianMs, ' ms'),
      `raw visibility scan: ${fmt(t.rawScan.medianMs, ' ms')}`,
    ),
    row(`the same, filtered (pipeline and group: ${t.apiFiltered.total})`, fmt(t.apiFiltered.medianMs, ' ms')),
    row(
      'listPendingDecisions (every decision), median',
      fmt(t.listPendingDecisions.medianMs, ' ms'),
      `raw visibility scan: ${fmt(t.rawScan.medianMs, ' ms')}`,
    ),
    row(
      'index: full rebuild / one delta listing, median',
      `${fmt(t.indexRebuild.medianMs, ' ms')} / ${fmt(t.deltaListing.medianMs, ' ms')}`,
    ),
    row('first screen (Chromium, 50th row in the DOM), median', fmt(t.firstScreen.medianMs, ' ms')),
    row(
      'SDK decision → row gone from the API, median',
      fmt(r.freshness.medianMs, ' ms'),
      `decide(): ${fmt(r.freshness.decideMedianMs, ' ms')}`,
    ),
    row(
      'POST /api/batch: ms per decision, evicted (replayed) / cached',
      `${fmt(r.batch.evicted.msPerDecision, ' ms')} / ${fmt(r.batch.cached.msPerDecision, ' ms')}`,
    ),
  ];
}

/** The goals lines of a result; the memory goal is the full run's (10,000 decisions). */
export function inboxGoals(r: InboxResult, mode: 'quick' | 'medium' | 'full') {
  return [
    {
      goal: `review inbox: GET /api/decisions?limit=50 with ${r.decisions} pending, median ms`,
      measured: r.timings.apiPage.medianMs,
      target: `< ${INBOX_LIST_GOAL_MS}`,
      met: r.timings.apiPage.medianMs < INBOX_LIST_GOAL_MS,
    },
    {
      goal: `review inbox: first screen with ${r.decisions} pending, median ms`,
      measured: r.timings.firstScreen.medianMs,
      target: `< ${FIRST_SCREEN_GOAL_MS}`,
      met: r.timings.firstScreen.medianMs < FIRST_SCREEN_GOAL_MS,
    },
    ...(mode === 'full'
      ? [
          {
            goal: `review inbox: Treadle worker process peak RSS with ${r.decisions} pending (MiB)`,
            measured: r.rss.treadle.peakMiB,
            target: `< ${WORKER_RSS_GOAL_MIB}`,
            met: r.rss.treadle.peakMiB < WORKER_RSS_GOAL_MIB,
          },
        ]
      : []),
  ];
}
