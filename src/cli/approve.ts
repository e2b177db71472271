/**
 * `treadle approve`, named as seed 003 names it: `approve list`, `approve <id>`, `approve reject <id>
 * [--reason]`, and `approve batch` (interactive: each pending request with its context and payload;
 * approve, reject, skip or quit). Listing is one visibility call; decisions go through the validated update.
 */
import type { Command } from 'commander';
import { createInterface } from 'node:readline/promises';
import type { ApprovalListing, TreadleClient } from '../client';
import { TreadleError } from '../config/errors';
import { alreadyRecorded, table } from './render';
import { APPROVAL_ID_PATTERN } from '../kinds/approval/shapes';
import type { WithClient } from './with-client';

/** Registers `treadle approve` and its subcommands `list`, `reject` and `batch`. */
export function registerApproveCommands(program: Command, withClient: WithClient): void {
  const approve = program
    .command('approve')
    .description('approval requests (seed 003): approve <id>, or approve list | reject <id> | batch')
    .argument('[id]', 'the approval request to approve (ap-…)')
    // `approve reject <id> --by x`: options after a subcommand are the subcommand's, not approve's own --by.
    .enablePositionalOptions()
    .option('--by <name>', 'who decides (default: $TREADLE_REVIEWER or $USER)')
    .action(async (id: string | undefined, opts: { by?: string }) => {
      // Checked before connecting: a mistyped command fails at once, without a server.
      if (id === undefined)
        throw new Error(
          'name the request to approve (treadle approve <id>), or use approve list | reject <id> | batch',
        );
      checkId(id);
      await withClient(async (client) => {
        const decided = await client.decideApproval(id, 'approve', opts.by !== undefined ? { by: opts.by } : {});
        process.stdout.write(
          `${decided.id} (${decided.step} of ${decided.itemId}): approved by ${decided.decidedBy}${alreadyRecorded(decided.repeated)}\n`,
        );
      })();
    });

  approve
    .command('list')
    .description('pending approval requests across all work items')
    .option('--json', 'as JSON')
    .option('--pipeline <name>', "only this pipeline's items")
    .action(
      withClient(async (client, opts: { json?: boolean; pipeline?: string }) => {
        const requests = await client.listApprovals(opts.pipeline ? { pipeline: opts.pipeline } : {});
        if (opts.json) {
          process.stdout.write(`${JSON.stringify(requests, null, 2)}\n`);
          return;
        }
        if (requests.length === 0) {
          process.stdout.write('no pending approval requests\n');
          return;
        }
        const rows = requests.map((r) => [r.id, r.itemId, r.step, r.actionType, reviewers(r), expiry(r), r.summary]);
        process.stdout.write(`${table(['ID', 'ITEM', 'STEP', 'ACTION', 'REVIEWERS', 'EXPIRES', 'WHAT'], rows)}\n`);
      }),
    );

  approve
    .command('reject <id>')
    .description('reject a pending approval request (the step goes on without it, or stops, as it configures)')
    .option('--reason <text>', 'why, recorded with the decision')
    .option('--by <name>', 'who decides (default: $TREADLE_REVIEWER or $USER)')
    .action(async (id: string, opts: { reason?: string; by?: string }) => {
      checkId(id);
      await withClient(async (client) => {
        const decided = await client.decideApproval(id, 'reject', {
          ...(opts.by !== undefined ? { by: opts.by } : {}),
          ...(opts.reason !== undefined ? { reason: opts.reason } : {}),
        });
        process.stdout.write(
          `${decided.id} (${decided.step} of ${decided.itemId}): rejected by ${decided.decidedBy}${alreadyRecorded(decided.repeated)}\n`,
        );
      })();
    });

  approve
    .command('batch')
    .description('review every pending request in turn: [a]pprove, [r]eject, [s]kip, [q]uit')
    .option('--pipeline <name>', "only this pipeline's items")
    .option('--by <name>', 'who decides (default: $TREADLE_REVIEWER or $USER)')
    .action(withClient((client, opts: { pipeline?: string; by?: string }) => approveBatch(client, opts)));
}

/** `approve batch`: each pending request in turn with its context and payload, decided at the terminal. */
async function approveBatch(client: TreadleClient, opts: { pipeline?: string; by?: string }): Promise<void> {
  if (!process.stdin.isTTY)
    throw new Error(
      'approve batch is interactive and needs a terminal; in scripts use treadle approve <id> or treadle approve reject <id>',
    );
  const requests = await client.listApprovals(opts.pipeline ? { pipeline: opts.pipeline } : {});
  if (requests.length === 0) {
    process.stdout.write('no pending approval requests\n');
    return;
  }
  const rl = createInterface({ input: process.stdin, output: process.stdout });
  const tally = { approved: 0, rejected: 0, skipped: 0, refused: 0 };
  const by = opts.by !== undefined ? { by: opts.by } : {};
  let unanswered: TreadleError | undefined;
  try {
    for (const [index, listed] of requests.entries()) {
      const read = await client.getApproval(listed.id).then(
        (request) => ({ request }),
        (error: unknown) => ({ error }),
      );
      const forWhom = listed.reviewers ? ` · for ${reviewers(listed)}` : '';
      const what = `${listed.step} of ${listed.itemId} · ${listed.actionType}${forWhom} · ${expiry(listed)}`;
      const where = `${listed.id} · ${what}`;
      process.stdout.write(`\n[${index + 1}/${requests.length}] ${where}\n`);
      process.stdout.write(`  ${listed.summary}\n`);
      if (listed.context) process.stdout.write(`  context: ${listed.context}\n`);
      if ('error' in read) {
        // No worker answers for this item: every request after it waits for a worker too, so stop here.
        if (read.error instanceof TreadleError && read.error.code === 'no_worker') {
          unanswered = read.error;
          break;
        }
        process.stdout.write(`  cannot read it (${errorMessage(read.error)}); skipped\n`);
        tally.skipped++;
        continue;
      }
      const { request } = read;
      if (request.status !== 'pending') {
        process.stdout.write(`  (${request.status} meanwhile; skipped)\n`);
        tally.skipped++;
        continue;
      }
      process.stdout.write(`  payload: ${JSON.stringify(request.payload, null, 2).split('\n').join('\n  ')}\n`);
      let answer = '';
      while (!['a', 'r', 's', 'q'].includes(answer))
        answer = (await rl.question('[a]pprove, [r]eject, [s]kip, [q]uit? ')).trim().toLowerCase().slice(0, 1);
      if (answer === 'q') break;
      if (answer === 's') {
        tally.skipped++;
        continue;
      }
      const reason = answer === 'r' ? (await rl.question('reason (optional): ')).trim() : '';
      try {
        const decided = await client.decideApproval(listed.id, answer === 'a' ? 'approve' : 'reject', {
          ...by,
          ...(reason ? { reason } : {}),
        });
        process.stdout.write(`  ${decided.status} by ${decided.decidedBy}\n`);
        tally[decided.status]++;
      } catch (error) {
        // Someone else decided it, or it expired: say so and go on with the next one.
        process.stdout.write(`  not recorded: ${errorMessage(error)}\n`);
        tally.refused++;
      }
    }
  } finally {
    rl.close();
  }
  process.stdout.write(
    `\n${tally.approved} approved, ${tally.rejected} rejected, ${tally.skipped} skipped${tally.refused ? `, ${tally.refused} refused` : ''}\n`,
  );
  if (unanswered) throw unanswered;
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function checkId(id: string): void {
  if (!APPROVAL_ID_PATTERN.test(id))
    throw new Error(`"${id}" is not an approval id (they look like ap-7k3m9q2xwd; see treadle approve list)`);
}

/** After its TTL an escalated request waits for the escalation group, until the escalation's own expiry. */
function reviewers(request: ApprovalListing): string {
  return request.escalated ? `escalated to ${request.reviewers ?? '?'}` : (request.reviewers ?? '');
}

function expiry(request: ApprovalListing): string {
  return request.expiresAt ? `expires ${request.expiresAt.slice(0, 19).replace('T', ' ')}` : 'no expiry';
}
