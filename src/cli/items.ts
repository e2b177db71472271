/**
 * Commands that read one work item: `status` and `watch` (where it is), `usage`, `result` and `artefact`
 * (what it spent and made), `audit` (what happened, from its history).
 */
import type { Command } from 'commander';
import type { TreadleClient } from '../client';
import type { VisibleItem } from '../client/worker-presence';
import type { UsageTotals } from '../engine/usage';
import type { TddNodeState } from '../kinds/tdd/shapes';
import { withStages } from '../client/capacity-waits';
import { renderEvent, renderLoopStatus, renderStatus, renderTddStatus, table } from './render';
import { EXIT, exitCodeOf, exitWithItem } from './exit-codes';
import { withClient } from './with-client';
import { describePriority, hasPriority } from '../model/priority';

/** Registers `treadle status` and `watch`. */
export function registerProgressCommands(program: Command): void {
  program
    .command('status <id>')
    .description("a work item's stages, attempts and pending reviews")
    .option('--json', 'the full state as JSON')
    .action(
      withClient(async (client, id: string, opts: { json?: boolean }) => {
        try {
          await printStatus(client, id, opts);
        } catch (error) {
          // No worker to ask: what Temporal itself knows, and why that is all (exit 0: status answered).
          await printVisibleItem(client, id, error, opts.json);
        }
      }),
    );

  program
    .command('watch <id>')
    .description(
      'print events as they happen until the item finishes or waits for a person (a review, an approval, a failed loop to resume); exit 0 completed, 1 failed, 3 waiting, 4 cancelled',
    )
    .action(
      withClient(async (client, id: string) => {
        let state;
        try {
          state = await client.watch(id, (e) => process.stdout.write(`${renderEvent(e)}\n`), {
            untilReview: true,
            untilLoopFails: true,
          });
        } catch (error) {
          // No worker to follow the item with: what Temporal knows; its exit code when it has ended, else 1.
          const item = await printVisibleItem(client, id, error);
          process.exitCode = item.result
            ? exitCodeOf(item.result.status)
            : item.execution === 'CANCELLED'
              ? EXIT.cancelled
              : EXIT.failed;
          return;
        }
        process.stdout.write(`${state.id} is ${state.status}\n`);
        // Still running, the watch stopped at a loop stage that failed and waits for `treadle resume`.
        exitWithItem(id, state, state.status === 'running' ? await client.loops(id) : []);
      }),
    );
}

/** Registers `treadle usage`, `result` and `artefact`. */
export function registerOutputCommands(program: Command): void {
  program
    .command('usage <id>')
    .description('model calls, tokens and estimated cost of a work item, per stage and in total')
    .option('--json', 'as JSON: { total: {...}, stages: { <name>: {...} } }')
    .action(
      withClient(async (client, id: string, opts: { json?: boolean }) => {
        const usage = await client.usage(id);
        if (opts.json) {
          process.stdout.write(`${JSON.stringify(usage, null, 2)}\n`);
          return;
        }
        const cost = (usd: number | null) => (usd === null ? 'unknown' : `$${usd.toFixed(4)}`);
        const row = (name: string, t: UsageTotals) => [
          name,
          String(t.calls),
          String(t.errors),
          String(t.inputTokens),
          String(t.outputTokens),
          String(t.cacheReadTokens),
          `${Math.round(t.latencyMs)}ms`,
          cost(t.estimatedCostUsd),
        ];
        const rows = [...Object.entries(usage.stages).map(([name, t]) => row(name, t)), row('TOTAL', usage.total)];
        process.stdout.write(
          `${table(['STAGE', 'CALLS', 'ERRORS', 'INPUT', 'OUTPUT', 'CACHE READ', 'LATENCY', 'EST. COST'], rows)}\n`,
        );
      }),
    );

  program
    .command('result <id>')
    .description('wait for a work item to finish and print its result as JSON; exit 0 completed, 1 failed, 4 cancelled')
    .action(
      withClient(async (client, id: string) => {
        const result = await client.result(id).catch(async (error: unknown) => {
          // A cancelled item returns no result: say who cancelled it and why, and exit 4.
          if ((await client.visibleItem(id).catch(() => undefined))?.execution !== 'CANCELLED') throw error;
          const state = await client.getState(id).catch(() => undefined);
          process.stderr.write(`treadle: ${state?.error ?? `work item ${id} was cancelled`}\n`);
          process.exitCode = EXIT.cancelled;
          return undefined;
        });
        if (result === undefined) return;
        process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
        process.exitCode = exitCodeOf(result.status);
      }),
    );

  program
    .command('artefact <id> <stage>')
    .description("print a stage's final artefact as JSON, read from the blob store when it was offloaded")
    .action(
      withClient(async (client, id: string, stage: string) => {
        const state = await client.getState(id);
        const st = state.stages[stage];
        if (!st)
          throw new Error(`work item ${id} has no stage "${stage}" (stages: ${Object.keys(state.stages).join(', ')})`);
        if (st.artefact === undefined) throw new Error(`stage ${stage} of ${id} has no artefact (it is ${st.status})`);
        process.stdout.write(`${JSON.stringify(await client.readArtefact(st.artefact), null, 2)}\n`);
      }),
    );
}

/** Registers `treadle audit`. */
export function registerAuditCommand(program: Command): void {
  program
    .command('audit <id>')
    .description(
      "a run's steps, attempts, reviews, approvals and model calls in order, from its history (a work item id, or a correlation id for the run and its fan-out elements)",
    )
    .option('--json', 'as JSON lines: {at, workflowId, kind, step?, attempt?, message, stored?}')
    .action(
      withClient(async (client, id: string, opts: { json?: boolean }) => {
        const entries = await client.audit(id);
        if (opts.json) {
          for (const entry of entries) process.stdout.write(`${JSON.stringify(entry)}\n`);
          return;
        }
        const several = new Set(entries.map((e) => e.workflowId)).size > 1;
        const rows = entries.map((e) => [
          e.at.slice(0, 23).replace('T', ' '),
          ...(several ? [e.workflowId] : []),
          e.kind,
          e.step ? `${e.step}${e.attempt ? `#${e.attempt}` : ''}` : '',
          e.message,
        ]);
        process.stdout.write(`${table(['TIME', ...(several ? ['RUN'] : []), 'KIND', 'STEP', 'WHAT'], rows)}\n`);
      }),
    );
}

/** `status` with a worker: the item's, TDD node's or loop's state, and an item's loops. */
async function printStatus(client: TreadleClient, id: string, opts: { json?: boolean }): Promise<void> {
  const execution = await client.items.execution(id);
  if (execution.type === 'loopStage') {
    const loop = await client.getLoopState(id);
    process.stdout.write(opts.json ? `${JSON.stringify(loop, null, 2)}\n` : `${renderLoopStatus(id, loop)}\n`);
    return;
  }
  const state = await client.getState(id);
  const tdd = (state as unknown as { kind?: string }).kind === 'tdd';
  // The same describe as the type: the activities Temporal retries and the calls waiting for model capacity.
  const waits = tdd ? [] : withStages(execution.capacityWaits, state);
  const text = tdd
    ? renderTddStatus(state as unknown as TddNodeState)
    : renderStatus(state, execution.retries, execution.priority, waits);
  // The priority and the waits are Temporal's (the execution's), not the workflow's state: they ride beside it.
  const json = { ...state, ...execution.priority, ...(waits.length ? { capacityWaits: waits } : {}) };
  process.stdout.write(opts.json ? `${JSON.stringify(json, null, 2)}\n` : `${text}\n`);
  if (!opts.json && !tdd && state.events.some((e) => e.type === 'LoopStarted')) {
    for (const loop of await client.loops(id))
      process.stdout.write(`\n${renderLoopStatus(loop.workflowId, loop.state)}\n`);
  }
}

/**
 * When `error` says no worker answered: prints what Temporal knows of item `id` without one (stdout) and that error
 * (stderr, one line), and returns it; any other error is thrown.
 */
async function printVisibleItem(
  client: TreadleClient,
  id: string,
  error: unknown,
  json?: boolean,
): Promise<VisibleItem> {
  if ((error as { code?: string }).code !== 'no_worker') throw error;
  const item = await client.visibleItem(id);
  process.stdout.write(json ? `${JSON.stringify(item, null, 2)}\n` : `${renderVisibleItem(item)}\n`);
  process.stderr.write(`treadle: ${(error as Error).message}\n`);
  return item;
}

/** What `status` shows with no worker: Temporal's and Treadle's status, pending reviews and approvals, a closed result. */
function renderVisibleItem(item: VisibleItem): string {
  const lines = [`${item.id} · pipeline ${item.pipeline ?? '?'} · ${item.status ?? '?'} (Temporal: ${item.execution})`];
  if (hasPriority(item)) lines.push(describePriority(item));
  for (const r of item.pendingReviews) lines.push(`  waiting for review: ${r.stage} (${r.reason}): ${r.message}`);
  for (const r of item.pendingApprovals) lines.push(`  waiting for approval: ${r.id} (${r.step}): ${r.summary}`);
  if (item.result) lines.push(`result: ${JSON.stringify(item.result, null, 2)}`);
  if (item.failure) lines.push(`failure: ${item.failure}`);
  return lines.join('\n');
}
