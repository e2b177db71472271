/**
 * `treadle respond <id> <stage>` (issue 40): a person supplies the output of a `human` stage, or rejects the stage.
 * The output is checked against the stage's output schema before anything is sent (`TreadleClient.respond`): a
 * violation lists each problem and exits 2, and nothing reaches the workflow.
 */
import type { Command } from 'commander';
import type { Json } from '../model/shapes';
import { readJsonFile } from '../pipelines/catalog';
import { EXIT, given, UsageError } from './exit-codes';
import { withClient } from './with-client';

/** The output as given: `@file.json` is the file's JSON, anything else is JSON text. */
function outputOf(given: string): Json {
  if (given.startsWith('@')) return readJsonFile(given.slice(1));
  try {
    return JSON.parse(given) as Json;
  } catch (error) {
    throw new Error(
      `--output is not valid JSON (${(error as Error).message}); give JSON text or @file.json for a file's`,
    );
  }
}

/** Registers `treadle respond`. */
export function registerRespondCommand(program: Command): void {
  program
    .command('respond <id> <stage>')
    .description('supply the output of a human stage (run: human), checked against its output_schema first')
    .option('--output <json>', "the stage's output: JSON text, or @file.json")
    .option('--reject <reason>', 'reject instead: the stage fails with this reason')
    .option('--reviewer <name>', 'who answers (default: $TREADLE_REVIEWER or $USER)')
    .action(
      withClient(
        async (client, id: string, stage: string, opts: { output?: string; reject?: string; reviewer?: string }) => {
          if ((opts.output === undefined) === (opts.reject === undefined))
            throw new UsageError('give exactly one of --output JSON|@FILE, --reject REASON');
          const reviewer = opts.reviewer !== undefined ? { reviewer: opts.reviewer } : {};
          let outcome;
          if (opts.output !== undefined) {
            // Read before anything is sent: a file that cannot be read or bad JSON is a usage error (exit 2).
            const output = given(() => outputOf(opts.output!));
            outcome = await client.respond(id, stage, output, reviewer);
          } else
            outcome = await client.decide(
              client.humanDecisionKey(id, stage),
              { action: 'reject', reason: opts.reject! },
              ...(opts.reviewer !== undefined ? [opts.reviewer] : []),
            );
          if (outcome.status === 'decided') {
            const what = outcome.outcome === 'reject' ? 'rejected' : 'output supplied';
            process.stdout.write(`${stage} of ${id}: ${what} by ${outcome.by}\n`);
            return;
          }
          process.stderr.write(
            `${stage} of ${id} was answered already${outcome.by ? ` by ${outcome.by}` : ''}${outcome.outcome ? ` (${outcome.outcome})` : ''}${outcome.at ? ` at ${outcome.at}` : ''}; nothing sent\n`,
          );
          process.exitCode = EXIT.failed;
        },
      ),
    );
}
