/**
 * Large payloads: a work item whose input is a document of 1 KB, 1 MB or 10 MB; its first stage produces an
 * artefact of the same size and the second stage receives it. Treadle stores the input (`TreadleClient.start`)
 * and the artefact (the stage activity) in the blob store above the default threshold and keeps references
 * in the history; at 1 KB both stay inline. The baseline passes the document as the workflow's input and to
 * the producing activity, and the artefact through the activity result and the next activity's input, which
 * Temporal refuses above its limits (2 MB per payload, 4 MB per gRPC message on the dev server): the
 * baseline's error is recorded word for word.
 */
import { readHistory } from '../history';
import { median, ratio, round } from '../statistics';
import { fmt, fmtRatio, nowMs, type ScenarioContext, type ScenarioResult } from '../scenario';
import type { Side } from '../sides';

/** The goal: history bytes per stage attempt stay under this. */
export const HISTORY_BYTES_PER_ATTEMPT_GOAL = 10 * 1024;
/** Two stages of one attempt each. */
const ATTEMPTS = 2;
/** Above this, the baseline is expected to fail: it is tried once, not repeated. */
const INLINE_LIMIT_BYTES = 2 * 1024 * 1024;
/** A baseline attempt that neither completes nor fails within this long is reported as stuck. */
const BASELINE_FAILURE_TIMEOUT_MS = 60_000;

export interface ArtefactSide {
  ok: boolean;
  wallMs: number[];
  medianWallMs: number | null;
  historyBytes: number | null;
  historyBytesPerAttempt: number | null;
  historyEvents: number | null;
  /** What failed, word for word, when the side could not pass the payload. */
  error?: string;
}

export interface ArtefactSizeResult {
  bytes: number;
  treadle: ArtefactSide;
  baseline: ArtefactSide;
  /** Treadle's history bytes per attempt stay under 10 KiB. */
  treadleUnderGoal: boolean;
}

/** `1 KB`, `1 MB`, `10 MB` (decimal, as the sizes are chosen). */
export function sizeLabel(bytes: number): string {
  return bytes >= 1e6 ? `${bytes / 1e6} MB` : `${bytes / 1e3} KB`;
}

/** The messages of an error and its causes, outermost first. */
function describeError(error: unknown): string {
  const parts: string[] = [];
  let current: unknown = error;
  while (current instanceof Error && parts.length < 6) {
    parts.push(`${current.name}: ${current.message}`);
    current = (current as { cause?: unknown }).cause;
  }
  return parts.join(' ← ');
}

/** After a worker warning about the attempt, how long the workflow gets to fail on its own. */
const FAILURE_GRACE_MS = 3_000;

/** A warning the worker logged after `since`, as one line with its structured fields. */
function warningAfter(ctx: ScenarioContext, since: number): string | undefined {
  const warning = ctx.warnings.slice(since).find((w) => !w.message.includes('exceeded the warning limit'));
  if (!warning) return undefined;
  const detail = warning.meta?.error ?? warning.meta?.['error.message'];
  return `worker ${warning.level}: ${warning.message}${detail !== undefined ? `: ${String(detail)}` : ''}`;
}

/**
 * Runs one item. With `expectFailure`, the attempt ends at the first of: the workflow's result, a worker
 * warning plus a short grace for the workflow to fail by itself, or the timeout; a stuck workflow is
 * terminated so nothing is left running.
 */
async function runOnce(
  ctx: ScenarioContext,
  side: Side,
  id: string,
  bytes: number,
  expectFailure: boolean,
): Promise<{ wallMs: number; error?: string }> {
  const started = nowMs();
  const warningsBefore = ctx.warnings.length;
  try {
    await side.startLarge(id, bytes);
    const done = side.result(id);
    if (!expectFailure) {
      await done;
      return { wallMs: round(nowMs() - started) };
    }
    done.catch(() => undefined);
    let outcome: 'done' | 'warned' | 'timeout' | undefined;
    void done.then(
      () => (outcome ??= 'done'),
      () => (outcome ??= 'done'),
    );
    let warnedAt: number | undefined;
    while (outcome === undefined) {
      if (warnedAt === undefined && warningAfter(ctx, warningsBefore) !== undefined) warnedAt = nowMs();
      if (warnedAt !== undefined && nowMs() - warnedAt > FAILURE_GRACE_MS) outcome = 'warned';
      else if (nowMs() - started > BASELINE_FAILURE_TIMEOUT_MS) outcome = 'timeout';
      else await new Promise((r) => setTimeout(r, 50));
    }
    if (outcome === 'done') {
      await done; // throws the workflow's own failure, if it failed
      return { wallMs: round(nowMs() - started) };
    }
    const warning = warningAfter(ctx, warningsBefore);
    throw new Error(
      outcome === 'warned'
        ? `${warning}; the workflow was still running ${FAILURE_GRACE_MS / 1000}s later (the activity stays open until its start-to-close timeout), so it was terminated`
        : `no result and no worker warning within ${BASELINE_FAILURE_TIMEOUT_MS / 1000}s`,
    );
  } catch (error) {
    await side
      .handle(id)
      .terminate('benchmark: payload attempt ended')
      .catch(() => undefined);
    return { wallMs: round(nowMs() - started), error: describeError(error) };
  }
}

async function measure(ctx: ScenarioContext, side: Side, bytes: number, runs: number): Promise<ArtefactSide> {
  const walls: number[] = [];
  const sizes: { bytes: number; events: number }[] = [];
  for (let run = 0; run < runs; run++) {
    const id = `${ctx.tag}-artefact-${bytes}-${side.name}-${run}`;
    const inlineTooBig = side.name === 'baseline' && bytes > INLINE_LIMIT_BYTES;
    const outcome = await runOnce(ctx, side, id, bytes, inlineTooBig);
    if (outcome.error !== undefined) {
      const size = await readHistory(side.handle(id)).then(
        (r) => r.size,
        () => undefined,
      );
      return {
        ok: false,
        wallMs: [outcome.wallMs],
        medianWallMs: null,
        historyBytes: size?.bytes ?? null,
        historyBytesPerAttempt: null,
        historyEvents: size?.events ?? null,
        error: outcome.error,
      };
    }
    walls.push(outcome.wallMs);
    sizes.push((await readHistory(side.handle(id))).size);
  }
  const historyBytes = median(sizes.map((s) => s.bytes));
  return {
    ok: true,
    wallMs: walls,
    medianWallMs: median(walls),
    historyBytes,
    historyBytesPerAttempt: round(historyBytes / ATTEMPTS, 0),
    historyEvents: median(sizes.map((s) => s.events)),
  };
}

/** Runs the large-artefact scenario at every configured size. */
export async function largeArtefacts(ctx: ScenarioContext): Promise<ScenarioResult<ArtefactSizeResult[]>> {
  const results: ArtefactSizeResult[] = [];
  for (const bytes of ctx.sizes.artefactBytes) {
    const inlinePossible = bytes <= INLINE_LIMIT_BYTES;
    ctx.progress(
      `large payloads: ${sizeLabel(bytes)}, ${ctx.sizes.artefactRuns} run(s) treadle, ${inlinePossible ? ctx.sizes.artefactRuns : 1} baseline`,
    );
    const treadle = await measure(ctx, ctx.treadle, bytes, ctx.sizes.artefactRuns);
    const baseline = await measure(ctx, ctx.baseline, bytes, inlinePossible ? ctx.sizes.artefactRuns : 1);
    results.push({
      bytes,
      treadle,
      baseline,
      treadleUnderGoal: treadle.ok && (treadle.historyBytesPerAttempt ?? Infinity) < HISTORY_BYTES_PER_ATTEMPT_GOAL,
    });
  }
  return {
    result: results,
    rows: results.flatMap((r) => {
      const name = `payloads (${sizeLabel(r.bytes)} input and artefact, 2 stages)`;
      const baselineWall = r.baseline.ok ? fmt(r.baseline.medianWallMs, ' ms') : 'not possible inline';
      return [
        {
          scenario: name,
          metric: 'wall time',
          treadle: r.treadle.ok ? fmt(r.treadle.medianWallMs, ' ms') : 'failed',
          baseline: baselineWall,
          ratio: fmtRatio(
            r.baseline.ok && r.treadle.ok ? ratio(r.treadle.medianWallMs!, r.baseline.medianWallMs!) : null,
          ),
        },
        {
          scenario: name,
          metric: 'history bytes per attempt',
          treadle: fmt((r.treadle.historyBytesPerAttempt ?? Number.NaN) / 1024, ' KiB'),
          baseline: r.baseline.ok
            ? fmt((r.baseline.historyBytesPerAttempt ?? Number.NaN) / 1024, ' KiB')
            : 'not possible inline',
          ratio: fmtRatio(
            r.baseline.ok ? ratio(r.treadle.historyBytesPerAttempt ?? 0, r.baseline.historyBytesPerAttempt ?? 0) : null,
          ),
        },
      ];
    }),
  };
}
