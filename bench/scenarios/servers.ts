/**
 * The same work on both servers in one run (`--only=servers`, issue 41): the throughput scenario on the dev server and
 * then on a self-hosted server on PostgreSQL (src/server/cluster.ts), each in an environment of its own, warmed up
 * first; then the review inbox on a server of each kind (its mode's number of pending decisions: 10,000 in full
 * mode). Reports the PostgreSQL server's wall time ÷ the dev server's for each side, and what each server's logs say
 * failed under the load ("context deadline exceeded", failed execution updates).
 */
import type { ServerKind, ServerTrouble } from '../bench-server';
import type { BenchEnvironment, WorkflowBundles } from '../environment';
import { fmt, fmtRatio, type Row, type ScenarioContext, type ScenarioResult } from '../scenario';
import { ratio, round } from '../statistics';
import { inbox, type InboxResult } from './inbox';
import { throughput, type ThroughputResult } from './throughput';

/** The PostgreSQL-backed server's wall time for the throughput scenario, at most this many times the dev server's. */
export const SERVER_WALL_RATIO_GOAL = 1.2;

/** One server's run. */
export interface ServerRun {
  server: string;
  settings: Record<string, unknown>;
  throughput: ThroughputResult;
  /** Summed wall time of each side's rounds. */
  wallMs: { treadle: number; baseline: number };
  /** Counted in the server's logs over the throughput scenario (and its warm-up). */
  trouble: ServerTrouble;
  inbox: InboxResult | null;
}

export interface ServersResult {
  dev: ServerRun;
  postgres: ServerRun;
  /** PostgreSQL ÷ dev server wall time of the throughput scenario, per side (goal ≤ 1.2 for Treadle). */
  wallRatio: { treadle: number | null; baseline: number | null };
}

/** A ready environment on a server of `kind`, and the scenario context over it (warmed up by the caller). */
export type OpenEnvironment = (kind: ServerKind) => Promise<{ env: BenchEnvironment; ctx: ScenarioContext }>;

/** Runs the comparison; `open` starts and warms up an environment (bench/run.ts). */
export async function servers(
  ctx: Pick<ScenarioContext, 'sizes' | 'tag' | 'progress'>,
  open: OpenEnvironment,
  bundles: WorkflowBundles,
): Promise<ScenarioResult<ServersResult>> {
  const runs = {} as Record<ServerKind, ServerRun>;
  for (const kind of ['dev', 'postgres'] as const) {
    const { env, ctx: onServer } = await open(kind);
    let result: ThroughputResult;
    let trouble: ServerTrouble;
    try {
      ctx.progress(`servers: throughput on ${kind}`);
      result = (await throughput(onServer)).result;
      // Before the shutdown, which removes the logs.
      trouble = env.server.trouble();
    } finally {
      await env.shutdown();
    }
    const wall = (rounds: { wallMs: number }[]) =>
      round(
        rounds.reduce((a, r) => a + r.wallMs, 0),
        0,
      );
    runs[kind] = {
      server: env.record.server,
      settings: env.record.serverSettings,
      throughput: result,
      wallMs: { treadle: wall(result.treadle.rounds), baseline: wall(result.baseline.rounds) },
      trouble,
      inbox: null,
    };
  }
  for (const kind of ['dev', 'postgres'] as const) {
    if (ctx.sizes.inboxDecisions === 0) break;
    ctx.progress(`servers: the review inbox on ${kind}`);
    runs[kind].inbox = (await inbox(ctx, bundles, kind)).result;
  }
  const result: ServersResult = {
    dev: runs.dev,
    postgres: runs.postgres,
    wallRatio: {
      treadle: ratio(runs.postgres.wallMs.treadle, runs.dev.wallMs.treadle),
      baseline: ratio(runs.postgres.wallMs.baseline, runs.dev.wallMs.baseline),
    },
  };
  return { result, rows: serverRows(result) };
}

function serverRows(r: ServersResult): Row[] {
  const each = (metric: string, value: (run: ServerRun) => string): Row => ({
    scenario: 'servers',
    metric,
    treadle: `dev ${value(r.dev)}`,
    baseline: `postgres ${value(r.postgres)}`,
    ratio: '',
  });
  const rows: Row[] = [
    {
      scenario: 'servers',
      metric: 'throughput wall time, s: dev server / PostgreSQL (ratio PostgreSQL ÷ dev)',
      treadle: `${fmt(r.dev.wallMs.treadle / 1000)} / ${fmt(r.postgres.wallMs.treadle / 1000)}`,
      baseline: `${fmt(r.dev.wallMs.baseline / 1000)} / ${fmt(r.postgres.wallMs.baseline / 1000)}`,
      ratio: `${fmtRatio(r.wallRatio.treadle)} / ${fmtRatio(r.wallRatio.baseline)}`,
    },
    each('Treadle ÷ baseline items/s', (run) => fmtRatio(run.throughput.throughputRatio)),
    each(
      '"context deadline exceeded" / failed execution updates in the server logs',
      (run) => `${run.trouble.deadlineExceeded} / ${run.trouble.failedExecutionUpdates}`,
    ),
  ];
  if (r.dev.inbox && r.postgres.inbox)
    rows.push(
      each(`inbox: GET /api/decisions?limit=50 with ${r.dev.inbox.decisions} pending, median ms`, (run) =>
        fmt(run.inbox!.timings.apiPage.medianMs),
      ),
      each(`inbox: first screen with ${r.dev.inbox.decisions} pending, median ms`, (run) =>
        fmt(run.inbox!.timings.firstScreen.medianMs),
      ),
      each('inbox: raw visibility scan / listPendingDecisions() / delta listing, median ms', (run) =>
        [run.inbox!.timings.rawScan, run.inbox!.timings.listPendingDecisions, run.inbox!.timings.deltaListing]
          .map((t) => fmt(t.medianMs))
          .join(' / '),
      ),
    );
  return rows;
}

/** The goals of the comparison: the wall-time ratio, and no trouble in the PostgreSQL server's logs. */
export function serversGoals(r: ServersResult) {
  const trouble = r.postgres.trouble.deadlineExceeded + r.postgres.trouble.failedExecutionUpdates;
  return [
    {
      goal: 'throughput on PostgreSQL: Treadle wall time ÷ on the dev server, same run',
      measured: r.wallRatio.treadle,
      target: `≤ ${SERVER_WALL_RATIO_GOAL}`,
      met: r.wallRatio.treadle !== null && r.wallRatio.treadle <= SERVER_WALL_RATIO_GOAL,
    },
    {
      goal: 'throughput on PostgreSQL: "context deadline exceeded" and failed execution updates in its logs',
      measured: trouble,
      target: '0',
      met: trouble === 0,
    },
  ];
}
