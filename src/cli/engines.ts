/** `treadle engines`: open work items per engine version (src/client/engine-versions.ts), for operators. */
import type { Command } from 'commander';
import { ENGINE_VERSION } from '../model/state';
import { table } from './render';
import type { WithClient } from './with-client';

/** Registers `treadle engines`. */
export function registerEnginesCommand(program: Command, withClient: WithClient): void {
  program
    .command('engines')
    .description('open work items per engine version: when none of a version is left, its legacy code may go')
    .option('--task-queue <name>', 'only items on this task queue (default: every work item in the namespace)')
    .option('--json', 'as JSON: [{ version, openItems, oldestStart, examples }]')
    .action(
      withClient(async (client, opts: { json?: boolean; taskQueue?: string }) => {
        const counts = await client.openItemsByEngine(opts.taskQueue ? { taskQueue: opts.taskQueue } : {});
        if (opts.json) {
          process.stdout.write(`${JSON.stringify(counts, null, 2)}\n`);
          return;
        }
        if (counts.length === 0) process.stdout.write('no open work items\n');
        else {
          const rows = counts.map((c) => [
            c.version === null ? 'not known yet' : `${c.version}${c.version === ENGINE_VERSION ? ' (live)' : ''}`,
            String(c.openItems),
            c.oldestStart.slice(0, 19).replace('T', ' '),
            c.examples.join(', '),
          ]);
          process.stdout.write(`${table(['ENGINE', 'OPEN ITEMS', 'OLDEST START', 'FOR EXAMPLE'], rows)}\n`);
        }
        process.stdout.write(
          `this build runs engines 1 to ${ENGINE_VERSION}; see docs/versioning.md for when an older one's code may be deleted\n`,
        );
      }),
    );
}
