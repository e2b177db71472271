/** `treadle decisions`: every pending decision (reviews, budgets, approvals, TDD steps, failed loops) in one table. */
import { InvalidArgumentError, Option, type Command } from 'commander';
import {
  DECISION_KINDS,
  isOverdue,
  matchesFilter,
  parseAge,
  waitingFor,
  type DecisionKind,
  type PendingDecision,
} from '../model/decisions';
import { table } from './render';
import type { WithClient } from './with-client';

/** The table's rows: KIND, ITEM, STAGE, REASON, WAITING (`overdue` past its `review_sla`), MESSAGE. */
export function decisionRows(decisions: readonly PendingDecision[], now: number): string[][] {
  return decisions.map((d) => [
    d.partial ? `${d.kind}*` : d.kind,
    d.itemId,
    d.stage,
    d.reason,
    isOverdue(d, now) ? `${waitingFor(d.requestedAt, now)} overdue` : waitingFor(d.requestedAt, now),
    d.escalated ? `${d.message} (overdue: handed to ${d.escalated.to})` : d.message,
  ]);
}

/** Registers `treadle decisions`. */
export function registerDecisionsCommand(program: Command, withClient: WithClient): void {
  program
    .command('decisions')
    .description('every pending decision: reviews, budget reviews, approvals, TDD human steps and failed loops')
    .addOption(new Option('--kind <kind...>', 'only these kinds').choices(DECISION_KINDS as string[]))
    .option('--pipeline <name>', 'only items of this pipeline')
    .option('--reviewers <group>', "only decisions for this reviewer group (a stage's reviewers:)")
    .option('--older-than <age>', 'only decisions waiting at least this long: 15m, 2h, 1d', ageOption)
    .option('--overdue', "only decisions past their deadline (a stage's review_sla)")
    .option('--json', 'as JSON: the PendingDecision array (see docs/sdk.md)')
    .action(
      withClient(async (client, opts: DecisionsOptions) => {
        const now = Date.now();
        const listed = await client.listPendingDecisions({
          ...(opts.kind ? { kinds: opts.kind } : {}),
          ...(opts.pipeline ? { pipeline: opts.pipeline } : {}),
        });
        // The same test the inbox's filters use; the listing itself filters what visibility can.
        const filter = {
          ...(opts.reviewers ? { reviewers: opts.reviewers } : {}),
          ...(opts.olderThan !== undefined ? { olderThanMs: opts.olderThan } : {}),
          ...(opts.overdue ? { overdue: true } : {}),
        };
        const decisions = listed.filter((d) => matchesFilter(d, filter, now));
        if (opts.json) {
          process.stdout.write(`${JSON.stringify(decisions, null, 2)}\n`);
          return;
        }
        if (decisions.length === 0) {
          process.stdout.write('no pending decisions\n');
          return;
        }
        const rows = decisionRows(decisions, now);
        process.stdout.write(`${table(['KIND', 'ITEM', 'STAGE', 'REASON', 'WAITING', 'MESSAGE'], rows)}\n`);
        if (decisions.some((d) => d.partial))
          process.stdout.write(
            '* listed from search attributes alone (an older workflow): treadle status <item> has the rest\n',
          );
      }),
    );
}

interface DecisionsOptions {
  kind?: DecisionKind[];
  pipeline?: string;
  reviewers?: string;
  olderThan?: number;
  overdue?: boolean;
  json?: boolean;
}

function ageOption(value: string): number {
  const ms = parseAge(value);
  if (ms === undefined) throw new InvalidArgumentError('an age in minutes, hours or days, such as 15m, 2h or 1d.');
  return ms;
}
