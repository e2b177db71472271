/**
 * Commands that start or resume work: `run` and `loop` (a work item on a pipeline), `resume` (a failed
 * loop stage), `tdd` (a V3 TDD tree). Specs are checked before connecting, so a bad one needs no server.
 */
import { Option, type Command } from 'commander';
import path from 'node:path';
import type { TreadleClient } from '../client';
import type { PipelineSpec } from '../model/pipeline';
import type { Json } from '../model/shapes';
import { BUILT_IN_IMPLEMENTATIONS, findPipeline, readJsonFile, readPipelineFile } from '../pipelines/catalog';
import { fairnessKey, fairnessWeight, listed, priorityLevel, readInput, wholeNumber } from './arguments';
import { load } from './lazy-modules';
import { exitWith, exitWithItem, given, UsageError } from './exit-codes';
import { itemPriorityProblems, mergePriority, type ItemPriority } from '../model/priority';
import { renderEvent, renderLoopStatus, renderStatus, renderTddStatus } from './render';
import { withClient } from './with-client';
import { missingQueueHint, workerCommandFor } from '../worker/task-queues';
import { hasLoopStages } from '../kinds/loop/shapes';

/** Registers `treadle run`, `loop`, `resume` and `tdd`. */
export function registerStartCommands(program: Command): void {
  registerRun(program);
  registerLoop(program);
  registerResume(program);
  registerTdd(program);
}

/** `treadle run`: a work item on a built-in pipeline or a pipeline file. */
function registerRun(program: Command): void {
  const command = program
    .command('run [pipeline]')
    .description('start a work item on a built-in pipeline or a pipeline file; prints the work item id')
    .option('-f, --file <file>', 'pipeline file (YAML or JSON)')
    .option('-i, --input <json>', "work item input: JSON, or @file.json (default: the pipeline's sample input)")
    .option(
      '--id <id>',
      'work item id (default: <pipeline>-<hash of the input>, so the same input returns the run it started); starting the same id twice returns the same item',
    );
  withItemOptions(command, 'tokens this item may spend on models; then agent-backed stages escalate to review')
    .option('--custom-worker', 'deprecated, does nothing: name the task_queue of your implementations in the pipeline')
    .option(
      '--session <name>',
      'loop pipelines (seed 004): the session, its folder under the runs directory and ${SESSION} (default: the work item id)',
    )
    .option(
      '-w, --wait',
      'print events until the item finishes or waits for a person, then its status; exit 0 completed, 1 failed, 3 waiting, 4 cancelled',
    )
    .addOption(waitAllOption('item'))
    .action(
      async (
        name: string | undefined,
        opts: {
          file?: string;
          input?: string;
          id?: string;
          wait?: boolean;
          waitAll?: boolean;
          tokenBudget?: number;
          customWorker?: boolean;
          session?: string;
          taskQueue?: string;
        } & ItemPriority,
      ) => {
        if (opts.customWorker)
          process.stderr.write(
            'treadle: --custom-worker is deprecated and does nothing: implementations of your own run on the task_queue the pipeline names for them\n',
          );
        // Checked before connecting: a bad spec is reported with no server, and no work item is created.
        const { spec, input } = given(() => {
          if (!name && !opts.file) throw new Error('name a built-in pipeline or pass --file pipeline.yaml');
          if (name && opts.file) throw new Error('give a pipeline name or --file, not both');
          const entry = name ? findPipeline(name) : undefined;
          const read = specOfFile(
            entry ? entry.specFile : path.resolve(opts.file!),
            opts.session !== undefined ? { session: opts.session } : {},
          );
          checkPriorityFlags(opts, checkBeforeStart(read));
          return { spec: read, input: readInput(opts.input, entry ? readJsonFile(entry.sampleInputFile) : null) };
        });
        await withClient((client) => startItem(client, spec, input, opts), queueOf(opts))();
      },
    );
}

/** `treadle loop`: a work item on a v3 loop pipeline (seed 004). */
function registerLoop(program: Command): void {
  program
    .command('loop <pipeline>')
    .description(
      'start a loop pipeline (seed 004): a v3 pipeline.yaml whose stages name templates (stages/<template>/stage.yaml and its prompt)',
    )
    .option(
      '--session <name>',
      'the session: its folder under the runs directory and ${SESSION} (default: the work item id)',
    )
    .option(
      '--replies <file>',
      'scripted agent replies, YAML or JSON: { "<stage id>": [{ output, progress, status }, ...] } (offline runs)',
    )
    .option('-i, --input <json>', "work item input: JSON, or @file.json (written to the session's inputs/input.json)")
    .option('--id <id>', 'work item id (default: <pipeline>-<hash of the input>)')
    .addOption(taskQueueOption('item'))
    .addOption(priorityOption('item'))
    .addOption(fairnessKeyOption('item'))
    .addOption(fairnessWeightOption())
    .option(
      '-w, --wait',
      'print events until the item finishes or a loop fails and waits for resume, then its status and its loops; exit 0 completed, 1 failed, 3 waiting, 4 cancelled',
    )
    .addOption(waitAllOption('item'))
    .action(
      async (
        file: string,
        opts: {
          session?: string;
          replies?: string;
          input?: string;
          id?: string;
          wait?: boolean;
          waitAll?: boolean;
          taskQueue?: string;
        } & ItemPriority,
      ) => {
        const { spec, input } = given(() => {
          const read = specOfFile(path.resolve(file), opts.session !== undefined ? { session: opts.session } : {});
          checkPriorityFlags(opts, checkBeforeStart(read));
          const inputGiven = readInput(opts.input, null);
          const replies = opts.replies ? (readPipelineFile(path.resolve(opts.replies)) as Json) : undefined;
          if (replies === undefined) return { spec: read, input: inputGiven };
          const fields =
            inputGiven !== null && typeof inputGiven === 'object' && !Array.isArray(inputGiven) ? inputGiven : {};
          return { spec: read, input: { ...fields, agent_replies: replies } as Json };
        });
        await withClient((client) => startItem(client, spec, input, opts), queueOf(opts))();
      },
    );
}

/** `treadle resume`: a failed loop stage resumed from the iteration that failed, or abandoned. */
function registerResume(program: Command): void {
  program
    .command('resume <id>')
    .description(
      'resume a failed loop stage (seed 004) from the iteration that failed, keeping its history and progress; or give it up with --abandon',
    )
    .option('--stage <name>', 'the loop stage, when several are failed')
    .option('--abandon', 'give the loop up instead: the stage fails')
    .option('--reason <text>', 'why (recorded with an abandon)')
    .option('--note <text>', "with a resume: what the rerun iteration should change (its context.json's resume.note)")
    .option('--by <name>', 'who decides (default: $TREADLE_REVIEWER or $USER)')
    .action(
      withClient(
        async (
          client,
          id: string,
          opts: { stage?: string; abandon?: boolean; reason?: string; by?: string; note?: string },
        ) => {
          if (opts.note !== undefined && opts.abandon)
            throw new UsageError('--note goes with a resume; an abandon takes --reason');
          const answer = await client.resumeLoop(id, {
            ...(opts.stage ? { stage: opts.stage } : {}),
            action: opts.abandon ? 'abandon' : 'resume',
            ...(opts.reason ? { reason: opts.reason } : {}),
            ...(opts.by ? { by: opts.by } : {}),
            ...(opts.note !== undefined ? { note: opts.note } : {}),
          });
          process.stdout.write(
            answer.resumed
              ? `${answer.stage} (${answer.workflowId}) resumes at iteration ${answer.from}\n`
              : `${answer.stage} (${answer.workflowId}) abandoned at iteration ${answer.from}: the stage fails\n`,
          );
        },
      ),
    );
}

/** `treadle tdd`: a V3 TDD tree (seed 001) on a git repository. */
function registerTdd(program: Command): void {
  program
    .command('tdd <spec>')
    .description(
      'start a V3 TDD tree (seed 001) on a git repository: a spec file (YAML or JSON), the repository its workers use',
    )
    .requiredOption(
      '-r, --repo <path>',
      'the git repository (a path on the workers; they allow only TREADLE_TDD_REPOS)',
    )
    .option(
      '--replies <file>',
      'scripted agent replies, YAML or JSON: { "<spec id>.<node>": [reply, ...] } (offline runs)',
    )
    .option(
      '--id <id>',
      'workflow id of the root node (default tdd-<spec id>); starting the same id twice returns the same tree',
    )
    .addOption(taskQueueOption('tree'))
    .addOption(priorityOption('tree'))
    .addOption(fairnessKeyOption('tree'))
    .addOption(fairnessWeightOption())
    .option(
      '-w, --wait',
      "print the root's events until it finishes or waits for a human, then its status; exit 0 merged, 1 failed, 3 waiting, 4 cancelled",
    )
    .addOption(waitAllOption('tree'))
    .action(
      async (
        file: string,
        opts: {
          repo: string;
          replies?: string;
          id?: string;
          wait?: boolean;
          waitAll?: boolean;
          taskQueue?: string;
        } & ItemPriority,
      ) => {
        const { spec, replies } = given(() => {
          checkPriorityFlags(opts, {});
          return {
            spec: readPipelineFile(path.resolve(file)),
            replies: opts.replies ? (readPipelineFile(path.resolve(opts.replies)) as Json) : undefined,
          };
        });
        await withClient(async (client) => {
          const started = await client.startTdd(spec, {
            repo: path.resolve(opts.repo),
            ...(opts.id ? { id: opts.id } : {}),
            ...(replies !== undefined ? { replies } : {}),
            ...priorityFlags(opts),
          });
          await warnWithoutWorker(client, 'tree');
          if (!opts.wait && !opts.waitAll) {
            process.stdout.write(`${started.id}\n`);
            return;
          }
          process.stdout.write(
            `started ${started.id}: branch ${started.branch}, merges into ${started.targetBranch}\n`,
          );
          // --wait-all waits through the reviews the tree asks for, as `treadle result` does.
          await client.watch(started.id, (e) => process.stdout.write(`${renderEvent(e)}\n`), {
            untilReview: !opts.waitAll,
            patient: true,
          });
          const tree = await client.getTddState(started.id);
          process.stdout.write(`\n${renderTddStatus(tree)}\n`);
          exitWith(started.id, tree);
        }, queueOf(opts))();
      },
    );
}

/**
 * Starts a work item as `run` and `loop` do: says when the id names an earlier run, then prints the id, or
 * (`--wait`) the events, the status and its loops; `--wait-all` waits through people until the item ends.
 */
async function startItem(
  client: TreadleClient,
  spec: unknown,
  input: Json,
  opts: { id?: string; tokenBudget?: number; wait?: boolean; waitAll?: boolean } & ItemPriority,
): Promise<void> {
  const started = await client.start(spec, input, {
    ...(opts.id ? { id: opts.id } : {}),
    ...(opts.tokenBudget !== undefined ? { tokenBudget: opts.tokenBudget } : {}),
    ...priorityFlags(opts),
  });
  if (started.existing)
    process.stderr.write(
      `treadle: ${started.id} was started before with this ${opts.id ? 'id' : 'pipeline and input'}: this is that run (give another --id for a new one)\n`,
    );
  else await warnWithoutWorker(client, 'item');
  await followItem(client, started.id, spec, opts);
}

/**
 * After a start: the item's id, or with `--wait` / `--wait-all` its events until it ends or waits for a person,
 * then its status, exiting with the item's code.
 */
export async function followItem(
  client: TreadleClient,
  id: string,
  spec: unknown,
  opts: { wait?: boolean; waitAll?: boolean },
): Promise<void> {
  if (!opts.wait && !opts.waitAll) {
    process.stdout.write(`${id}\n`);
    return;
  }
  process.stdout.write(`started ${id}\n`);
  // --wait stops at a person's turn (exit 3); --wait-all waits through reviews, approvals and loop resumes.
  const state = await client.watch(id, (e) => process.stdout.write(`${renderEvent(e)}\n`), {
    untilReview: !opts.waitAll,
    untilLoopFails: !opts.waitAll,
    // Just started: a busy worker may take a moment to run it, and one that crashes hands it to another.
    patient: true,
  });
  process.stdout.write(`\n${renderStatus(state)}\n`);
  const loops = hasLoopStages(spec) ? await loopsOf(client, id, state.status) : [];
  for (const loop of loops) process.stdout.write(`\n${renderLoopStatus(loop.workflowId, loop.state)}\n`);
  exitWithItem(id, state, loops);
}

/**
 * The loops an item started, for its status. A running item needs them (a failed loop is why it waits); for an
 * ended one they are only shown, so a loop whose state cannot be read is a line on stderr, and the exit code
 * stays the item's.
 */
async function loopsOf(
  client: TreadleClient,
  id: string,
  status: string,
): Promise<Awaited<ReturnType<TreadleClient['loops']>>> {
  if (status === 'running') return client.loops(id);
  return client.loops(id).catch((error: unknown) => {
    process.stderr.write(`treadle: could not read the loops' state of ${id}: ${(error as Error).message}\n`);
    return [];
  });
}

/**
 * `--wait-all`: `--wait` through people. The watch ends only when the item or tree does, so the exit code is 0 or 1,
 * never 3 (scripts that hand the decisions to others and want the outcome, as `treadle result` gives it).
 */
export function waitAllOption(what: 'item' | 'tree'): Option {
  const ended = what === 'item' ? '0 completed' : '0 merged';
  return new Option(
    '--wait-all',
    `as --wait, but waits through people (reviews, approvals${what === 'item' ? ', loop resumes' : ''}) until the ${what} ends; exit ${ended}, 1 failed`,
  );
}

/**
 * The options every command that starts work items takes, after its own: `--token-budget` (described by
 * `tokenBudget`), `--task-queue`, `--priority`, `--fairness-key` and `--fairness-weight`.
 */
export function withItemOptions(command: Command, tokenBudget: string): Command {
  return command
    .option('--token-budget <tokens>', tokenBudget, wholeNumber(1, 'must be a whole number of tokens above 0'))
    .addOption(taskQueueOption('item'))
    .addOption(priorityOption('item'))
    .addOption(fairnessKeyOption('item'))
    .addOption(fairnessWeightOption());
}

/** `--task-queue`, as `temporal workflow start --task-queue` has it. */
export function taskQueueOption(what: 'item' | 'tree'): Option {
  return new Option(
    '--task-queue <queue>',
    `the task queue the ${what} starts on, which its workers poll (default: TREADLE_TASK_QUEUE, else treadle)`,
  );
}

/** `--priority`: the item's or tree's priority in the task queues (src/model/priority.ts). */
export function priorityOption(what: 'item' | 'tree'): Option {
  return new Option(
    '--priority <level>',
    `the ${what}'s priority in the task queues, 1 (first) to 5; its tasks go before those of lower priorities (default: the pipeline's priority:, else 3)`,
  ).argParser(priorityLevel);
}

/** `--fairness-key`: the tenant or team the item's tasks are shared out by. */
export function fairnessKeyOption(what: 'item' | 'tree'): Option {
  return new Option(
    '--fairness-key <key>',
    `the ${what}'s tenant or team (at most 64 bytes): tasks of one priority are shared between keys by weight, so one key's backlog does not starve another's (default: the pipeline's fairness_key:)`,
  ).argParser(fairnessKey);
}

/** `--fairness-weight`: the fairness key's share. */
export function fairnessWeightOption(): Option {
  return new Option(
    '--fairness-weight <weight>',
    "the fairness key's share of the queue, 0.001 to 1000 (default: the pipeline's fairness_weight:, else 1)",
  ).argParser(fairnessWeight);
}

/** The priority flags given, as the client's start options take them. */
export function priorityFlags(opts: ItemPriority): ItemPriority {
  return {
    ...(opts.priority !== undefined ? { priority: opts.priority } : {}),
    ...(opts.fairnessKey !== undefined ? { fairnessKey: opts.fairnessKey } : {}),
    ...(opts.fairnessWeight !== undefined ? { fairnessWeight: opts.fairnessWeight } : {}),
  };
}

/**
 * Refuses priority flags that cannot work with the spec's own (`defaults`) before connecting: a
 * `--fairness-weight` with no fairness key to weigh, from the flags or the spec.
 */
export function checkPriorityFlags(opts: ItemPriority, defaults: ItemPriority): void {
  const problems = itemPriorityProblems(mergePriority(priorityFlags(opts), defaults), {
    priority: '--priority',
    fairnessKey: '--fairness-key',
    fairnessWeight: '--fairness-weight',
  });
  if (problems.length === 1) throw new UsageError(problems[0]!);
  if (problems.length > 1) throw new UsageError(`the priority flags are invalid:\n${listed(problems)}`);
}

/** The client a start command connects: on `--task-queue` when given. */
export function queueOf(opts: { taskQueue?: string }): { taskQueue?: string } {
  return opts.taskQueue !== undefined ? { taskQueue: opts.taskQueue } : {};
}

/**
 * One stderr line when no worker polls the queue work was just started on: the work waits for one, which is
 * not a failure, but a wrong queue (a typo, a worker started without TREADLE_TASK_QUEUE) looks the same.
 */
export async function warnWithoutWorker(
  client: TreadleClient,
  what: 'item' | 'tree',
  queue: string = client.taskQueue,
): Promise<void> {
  // A courtesy: a server that will not describe the queue (a narrow API key's role) gets no warning.
  if (!(await client.noWorkerPolls(queue).catch(() => false))) return;
  process.stderr.write(
    `treadle: no worker polls task queue ${queue} yet; the ${what} waits until one does: start one with \`${workerCommandFor(queue)}\`\n`,
  );
}

/** A pipeline file as a spec: a v3 loop pipeline (seed 004) becomes an ordinary spec of loop stages. */
export function specOfFile(file: string, options: { session?: string } = {}): unknown {
  const raw = readPipelineFile(file);
  const loops = load.loopFiles();
  return loops.isLoopPipelineFile(raw) ? loops.loopPipelineSpec(file, raw, options) : raw;
}

/**
 * Checks a spec before `run` or `loop` starts it, in one pass, against what Treadle ships (what every worker
 * on the core queue registers), listing every problem. An implementation of your own is fine where the stage
 * or the pipeline names the `task_queue` its worker polls; without one it is a problem. Returns the canonical spec.
 */
export function checkBeforeStart(spec: unknown): PipelineSpec {
  const result = load.pipeline().validatePipeline(spec, BUILT_IN_IMPLEMENTATIONS);
  if (result.ok) return result.spec;
  const hint = missingQueueHint(result.problems);
  throw new Error(`pipeline ${specName(spec)} is invalid:\n${listed(result.problems)}${hint}`);
}

function specName(spec: unknown): string {
  const name = typeof spec === 'object' && spec !== null ? (spec as { name?: unknown }).name : undefined;
  return typeof name === 'string' ? name : '(unnamed)';
}
