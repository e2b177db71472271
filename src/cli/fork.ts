/**
 * `treadle fork` (a work item again from one of its stages, with changed settings or input; src/client/fork.ts)
 * and `treadle forks` (the forks made of an item).
 */
import type { Command } from 'commander';
import path from 'node:path';
import type { ItemPriority } from '../model/priority';
import { combineOverrides, settingOverride, type SpecOverrides } from '../model/spec-overrides';
import { readPipelineFile } from '../pipelines/catalog';
import { readInput } from './arguments';
import { given } from './exit-codes';
import { table } from './render';
import { followItem, priorityFlags, queueOf, waitAllOption, warnWithoutWorker, withItemOptions } from './start';
import { withClient } from './with-client';

type ForkFlags = {
  from: string;
  input?: string;
  set: string[];
  overrides?: string;
  id?: string;
  tokenBudget?: number;
  wait?: boolean;
  waitAll?: boolean;
  taskQueue?: string;
  json?: boolean;
} & ItemPriority;

/** Registers `treadle fork` and `treadle forks`. */
export function registerForkCommands(program: Command): void {
  const fork = program
    .command('fork <id>')
    .description(
      'start a new work item from <id> that runs again from one stage, with changed settings or input; the stages that stage does not lead to are carried as they ended in <id> (no model call)',
    )
    .requiredOption('--from <stage>', 'the stage to run again from (everything it leads to runs again too)')
    .option('-i, --input <json>', "a new work item input: JSON, or @file.json (default: the original's)")
    .option(
      '--set <stage.key=value>',
      'change a setting of a stage that runs again, as the pipeline file writes it (draft.with.model=…, draft.retry_budget.max_attempts=5); repeatable; values are JSON when they parse',
      (value: string, all: string[]) => [...all, value],
      [] as string[],
    )
    .option('--overrides <file>', 'changed settings as YAML or JSON: pipeline keys, and `stages: { <name>: {…} }`')
    .option('--id <id>', "the fork's id (default: <id>-fork-<hash of --from, the settings and the input>)");
  withItemOptions(fork, "tokens the fork may spend on models (default: the original's)")
    .option(
      '-w, --wait',
      'print events until the fork finishes or waits for a person; exit codes as treadle run --wait',
    )
    .addOption(waitAllOption('item'))
    .action(async (id: string, opts: ForkFlags) => {
      const { overrides, input } = given(() => ({
        overrides: overridesOf(opts),
        input: opts.input !== undefined ? readInput(opts.input, null) : undefined,
      }));
      await withClient(async (client) => {
        const fork = await client.items.fork(id, {
          from: opts.from,
          ...(overrides ? { overrides } : {}),
          ...(input !== undefined ? { input } : {}),
          ...(opts.id ? { id: opts.id } : {}),
          ...(opts.tokenBudget !== undefined ? { tokenBudget: opts.tokenBudget } : {}),
          ...(opts.taskQueue !== undefined ? { taskQueue: opts.taskQueue } : {}),
          ...priorityFlags(opts),
        });
        const carried = fork.carried.length > 0 ? fork.carried.join(', ') : 'none';
        process.stderr.write(
          `treadle: ${fork.existing ? 'this fork was started before: ' : ''}${fork.id} forks ${fork.of} from ${fork.from}; carried: ${carried}; runs again: ${fork.rerun.join(', ')}\n`,
        );
        if (!fork.existing) await warnWithoutWorker(client, 'item', fork.taskQueue);
        await followItem(client, fork.id, null, opts);
      }, queueOf(opts))();
    });

  program
    .command('forks <id>')
    .description('list the forks made of work item <id> (oldest first)')
    .option('--json', 'print them as JSON')
    .action(async (id: string, opts: { json?: boolean }) =>
      withClient(async (client) => {
        const forks = await client.items.forks(id);
        if (opts.json) process.stdout.write(`${JSON.stringify(forks, null, 2)}\n`);
        else if (forks.length === 0) process.stdout.write(`no forks of ${id}\n`);
        else
          process.stdout.write(
            `${table(
              ['FORK', 'FROM', 'STATUS', 'STARTED'],
              forks.map((f) => [f.id, f.from, f.status, f.startedAt]),
            )}\n`,
          );
      })(),
    );
}

/** `--set` settings and an `--overrides` file as one set of overrides (the file first, then each --set). */
function overridesOf(opts: ForkFlags): SpecOverrides | undefined {
  const list: SpecOverrides[] = [];
  if (opts.overrides !== undefined) {
    const file = readPipelineFile(path.resolve(opts.overrides));
    if (typeof file !== 'object' || file === null || Array.isArray(file))
      throw new Error(`--overrides ${opts.overrides}: expected an object of pipeline keys and stages`);
    list.push(file as SpecOverrides);
  }
  list.push(...opts.set.map(settingOverride));
  return list.length > 0 ? combineOverrides(list) : undefined;
}
