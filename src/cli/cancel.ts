/**
 * `treadle cancel <id> [--reason "…"] [--by name]` (issue 40): the item records who cancels it and why, then its
 * run, its children and its activities stop. A finished item is refused (exit 2); the cancelled item's outcome
 * is exit 4 wherever an outcome becomes an exit code (exit-codes.ts).
 */
import type { Command } from 'commander';
import type { WithClient } from './with-client';

/** Registers `treadle cancel`. */
export function registerCancelCommand(program: Command, withClient: WithClient): void {
  program
    .command('cancel <id>')
    .description('cancel a work item: its stages, children and waits for people stop; its decisions leave the inbox')
    .option('--reason <text>', 'why, shown by `treadle status` and the inbox')
    .option('--by <name>', 'who cancels (default: $TREADLE_REVIEWER or $USER)')
    .action(
      withClient(async (client, id: string, opts: { reason?: string; by?: string }) => {
        const cancelled = await client.cancel(id, {
          ...(opts.reason !== undefined ? { reason: opts.reason } : {}),
          ...(opts.by !== undefined ? { by: opts.by } : {}),
        });
        const why = cancelled.reason !== undefined ? `: ${cancelled.reason}` : '';
        const state = cancelled.closed ? 'cancelled' : 'cancellation requested (it stops when a worker runs it)';
        // A TDD tree's root or a loop's own workflow has no place for who and why.
        const who = cancelled.recorded ? ` by ${cancelled.by}${why}` : ' (a TDD node or loop records no who or why)';
        process.stdout.write(`${id}: ${state}${who}\n`);
      }),
    );
}
