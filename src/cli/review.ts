/**
 * Commands for stage reviews: `reviews` (pending across all items) and `review` (approve, reject, edit or
 * request changes).
 */
import type { Command } from 'commander';
import { readJsonFile } from '../pipelines/catalog';
import { wholeNumber } from './arguments';
import { alreadyRecorded, table } from './render';
import { given, UsageError } from './exit-codes';
import { withClient } from './with-client';

/** Registers `treadle reviews` and `review`. */
export function registerReviewCommands(program: Command): void {
  registerReviewsCommand(program);
  registerReviewCommand(program);
}

/** `treadle reviews`: the reviews pending across all work items, as a table or JSON. */
function registerReviewsCommand(program: Command): void {
  program
    .command('reviews')
    .description('pending reviews across all work items')
    .option('--json', 'as JSON')
    .option('--pipeline <name>', "only this pipeline's items")
    .action(
      withClient(async (client, opts: { json?: boolean; pipeline?: string }) => {
        const reviews = await client.listPendingReviews(opts.pipeline ? { pipeline: opts.pipeline } : {});
        if (opts.json) {
          process.stdout.write(`${JSON.stringify(reviews, null, 2)}\n`);
          return;
        }
        if (reviews.length === 0) {
          process.stdout.write('no pending reviews\n');
          return;
        }
        const rows = reviews.map((r) => [
          r.itemId,
          r.pipeline,
          r.stage,
          r.reason,
          r.requestedAt.slice(0, 19).replace('T', ' '),
          r.message,
        ]);
        process.stdout.write(`${table(['ITEM', 'PIPELINE', 'STAGE', 'REASON', 'REQUESTED', 'WHY'], rows)}\n`);
      }),
    );
}

/** `treadle review <id> <stage>`: approve, reject, approve with an edited artefact, or request changes. */
function registerReviewCommand(program: Command): void {
  program
    .command('review <id> <stage>')
    .description('approve, reject, approve with an edited artefact, or request changes')
    .option('--approve', "approve the output (the latest attempt's, or --attempt N)")
    .option('--reject <reason>', 'reject: the stage fails and its dependents are skipped')
    .option('--edit <file>', 'approve with the JSON artefact in FILE instead of the output')
    .option(
      '--request-changes <note>',
      "run one more attempt with NOTE in its feedback, beside the gate's (at most 4096 characters)",
    )
    .option(
      '--attempt <n>',
      "with --approve: which attempt's output to approve",
      wholeNumber(1, 'must be a whole number >= 1'),
    )
    .option('--note <text>', 'a note recorded with the review')
    .option('--reviewer <name>', 'who reviews (default: $TREADLE_REVIEWER or $USER)')
    .action(
      withClient(
        async (
          client,
          id: string,
          stage: string,
          opts: {
            approve?: boolean;
            reject?: string;
            edit?: string;
            requestChanges?: string;
            attempt?: number;
            note?: string;
            reviewer?: string;
          },
        ) => {
          const chosen = [
            opts.approve ? '--approve' : '',
            opts.reject !== undefined ? '--reject' : '',
            opts.edit !== undefined ? '--edit' : '',
            opts.requestChanges !== undefined ? '--request-changes' : '',
          ].filter(Boolean);
          if (chosen.length !== 1)
            throw new UsageError(
              `give exactly one of --approve, --reject REASON, --edit FILE, --request-changes NOTE${chosen.length ? ` (got ${chosen.join(', ')})` : ''}`,
            );
          if (opts.requestChanges !== undefined && opts.note !== undefined)
            throw new UsageError('--request-changes NOTE is the note; leave out --note');
          if (opts.attempt !== undefined && !opts.approve) throw new UsageError('--attempt goes with --approve');
          // Read before the review is sent: a file that cannot be read is a usage error (exit 2), not a review's.
          const edited = opts.edit !== undefined ? { artefact: given(() => readJsonFile(opts.edit!)) } : undefined;
          const note = opts.note !== undefined ? { note: opts.note } : {};
          let done;
          if (opts.requestChanges !== undefined)
            done = await client.requestChanges(id, stage, opts.requestChanges, {
              ...(opts.reviewer ? { reviewer: opts.reviewer } : {}),
            });
          else if (opts.approve)
            done = await client.review(
              id,
              stage,
              { kind: 'approve', ...note, ...(opts.attempt !== undefined ? { attempt: opts.attempt } : {}) },
              opts.reviewer,
            );
          else if (opts.reject !== undefined)
            done = await client.review(id, stage, { kind: 'reject', reason: opts.reject, ...note }, opts.reviewer);
          // Through approveWithEdits, so that large edits go to the blob store like stage artefacts.
          else
            done = await client.approveWithEdits(id, stage, edited!.artefact, {
              ...note,
              ...(opts.reviewer ? { reviewer: opts.reviewer } : {}),
            });
          process.stdout.write(
            `${done.stage} of ${done.itemId}: ${done.outcome.replace(/_/g, ' ')} by ${done.reviewer}${alreadyRecorded(done.repeated)}\n`,
          );
        },
      ),
    );
}
