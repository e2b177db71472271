/**
 * Commands that start or resume work: `run` and `loop` (a work item on a pipeline), `resume` (a failed
 * loop stage), `tdd` (a V3 TDD tree). Specs are checked before connecting, so a bad one needs no server.
 */
import type { Command } from 'commander';
import path from 'node:path';
import type { TreadleClient } from '../client';
import type { Json } from '../model/shapes';
import { BUILT_IN_IMPLEMENTATIONS, findPipeline, readJsonFile, readPipelineFile } from '../pipelines/catalog';
import { listed, readInput, wholeNumber } from './arguments';
import { load } from './lazy-modules';
import { EXIT, exitWith, failedLoopMessage } from './exit-codes';
import { renderEvent, renderLoopStatus, renderStatus, renderTddStatus } from './render';
import { withClient } from './with-client';

/** Registers `treadle run`, `loop`, `resume` and `tdd`. */
export function registerStartCommands(program: Command): void {
  registerRun(program);
  registerLoop(program);
  registerResume(program);
  registerTdd(program);
}

/** `treadle run`: a work item on a built-in pipeline or a pipeline file. */
function registerRun(program: Command): void {
  program
    .command('run [pipeline]')
    .description('start a work item on a built-in pipeline or a pipeline file; prints the work item id')
    .option('-f, --file <file>', 'pipeline file (YAML or JSON)')
    .option('-i, --input <json>', "work item input: JSON, or @file.json (default: the pipeline's sample input)")
    .option(
      '--id <id>',
      'work item id (default: <pipeline>-<hash of the input>, so the same input returns the run it started); starting the same id twice returns the same item',
    )
    .option(
      '--token-budget <tokens>',
      'tokens this item may spend on models; then agent-backed stages escalate to review',
      wholeNumber(1, 'must be a whole number of tokens above 0'),
    )
    .option(
      '--custom-worker',
      "the pipeline names implementations your worker registers beyond the built-ins: start anyway and report the worker's check of them",
    )
    .option(
      '--session <name>',
      'loop pipelines (seed 004): the session, its folder under the runs directory and ${SESSION} (default: the work item id)',
    )
    .option(
      '-w, --wait',
      'print events until the item finishes or waits for a person, then its status; exit 0 completed, 1 failed, 3 waiting',
    )
    .action(
      async (
        name: string | undefined,
        opts: {
          file?: string;
          input?: string;
          id?: string;
          wait?: boolean;
          tokenBudget?: number;
          customWorker?: boolean;
          session?: string;
        },
      ) => {
        if (!name && !opts.file) throw new Error('name a built-in pipeline or pass --file pipeline.yaml');
        if (name && opts.file) throw new Error('give a pipeline name or --file, not both');
        const entry = name ? findPipeline(name) : undefined;
        const spec = specOfFile(
          entry ? entry.specFile : path.resolve(opts.file!),
          opts.session !== undefined ? { session: opts.session } : {},
        );
        const input = readInput(opts.input, entry ? readJsonFile(entry.sampleInputFile) : null);
        // Checked before connecting: a bad spec is reported with no server, and no work item is created.
        const unconfirmed = checkBeforeStart(spec, opts.customWorker === true);
        await withClient((client) => startItem(client, spec, input, opts, unconfirmed))();
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
    .option(
      '-w, --wait',
      'print events until the item finishes or a loop fails and waits for resume, then its status and its loops; exit 0 completed, 1 failed, 3 waiting',
    )
    .action(
      async (
        file: string,
        opts: { session?: string; replies?: string; input?: string; id?: string; wait?: boolean },
      ) => {
        const resolved = path.resolve(file);
        const spec = specOfFile(resolved, opts.session !== undefined ? { session: opts.session } : {});
        const given = readInput(opts.input, null);
        const replies = opts.replies ? (readPipelineFile(path.resolve(opts.replies)) as Json) : undefined;
        const input =
          replies === undefined
            ? given
            : ({
                ...(given !== null && typeof given === 'object' && !Array.isArray(given) ? given : {}),
                agent_replies: replies,
              } as Json);
        const unconfirmed = checkBeforeStart(spec, false);
        await withClient((client) => startItem(client, spec, input, opts, unconfirmed))();
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
    .action(
      withClient(async (client, id: string, opts: { stage?: string; abandon?: boolean; reason?: string }) => {
        const answer = await client.resumeLoop(id, {
          ...(opts.stage ? { stage: opts.stage } : {}),
          action: opts.abandon ? 'abandon' : 'resume',
          ...(opts.reason ? { reason: opts.reason } : {}),
        });
        process.stdout.write(
          answer.resumed
            ? `${answer.stage} (${answer.workflowId}) resumes at iteration ${answer.from}\n`
            : `${answer.stage} (${answer.workflowId}) abandoned at iteration ${answer.from}: the stage fails\n`,
        );
      }),
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
    .option(
      '-w, --wait',
      "print the root's events until it finishes or waits for a human, then its status; exit 0 merged, 1 failed, 3 waiting",
    )
    .action(async (file: string, opts: { repo: string; replies?: string; id?: string; wait?: boolean }) => {
      const spec = readPipelineFile(path.resolve(file));
      const replies = opts.replies ? (readPipelineFile(path.resolve(opts.replies)) as Json) : undefined;
      await withClient(async (client) => {
        const started = await client.startTdd(spec, {
          repo: path.resolve(opts.repo),
          ...(opts.id ? { id: opts.id } : {}),
          ...(replies !== undefined ? { replies } : {}),
        });
        if (!opts.wait) {
          process.stdout.write(`${started.id}\n`);
          return;
        }
        process.stdout.write(`started ${started.id}: branch ${started.branch}, merges into ${started.targetBranch}\n`);
        await client.watch(started.id, (e) => process.stdout.write(`${renderEvent(e)}\n`), { untilReview: true });
        const tree = await client.getTddState(started.id);
        process.stdout.write(`\n${renderTddStatus(tree)}\n`);
        exitWith(started.id, tree);
      })();
    });
}

/**
 * Starts a work item as `run` and `loop` do: says when the id names an earlier run, waits for the worker's
 * check of names it does not ship, then prints the id, or (`--wait`) the events, the status and its loops.
 */
async function startItem(
  client: TreadleClient,
  spec: unknown,
  input: Json,
  opts: { id?: string; tokenBudget?: number; wait?: boolean },
  unconfirmed: string[],
): Promise<void> {
  const started = await client.start(spec, input, {
    ...(opts.id ? { id: opts.id } : {}),
    ...(opts.tokenBudget !== undefined ? { tokenBudget: opts.tokenBudget } : {}),
  });
  if (started.existing)
    process.stderr.write(
      `treadle: ${started.id} was started before with this ${opts.id ? 'id' : 'pipeline and input'}: this is that run (give another --id for a new one)\n`,
    );
  if (unconfirmed.length > 0) await awaitWorkerVerdict(client, started.id, unconfirmed);
  if (!opts.wait) {
    process.stdout.write(`${started.id}\n`);
    return;
  }
  process.stdout.write(`started ${started.id}\n`);
  const state = await client.watch(started.id, (e) => process.stdout.write(`${renderEvent(e)}\n`), {
    untilReview: true,
    untilLoopFails: true,
  });
  process.stdout.write(`\n${renderStatus(state)}\n`);
  const stages = (spec as { stages?: unknown } | null)?.stages;
  const loops =
    Array.isArray(stages) && stages.some((s) => (s as { run?: unknown } | null)?.run === 'loop')
      ? await client.loops(started.id)
      : [];
  for (const loop of loops) process.stdout.write(`\n${renderLoopStatus(loop.workflowId, loop.state)}\n`);
  // A failed loop waits for `treadle resume` while its item still runs: a person's turn, said at once.
  const failed = state.status === 'running' ? loops.find((l) => l.state.status === 'failed') : undefined;
  if (failed) {
    process.stdout.write(`\n${failedLoopMessage(started.id, failed.state)}\n`);
    process.exitCode = EXIT.waiting;
  } else exitWith(started.id, state);
}

/** A pipeline file as a spec: a v3 loop pipeline (seed 004) becomes an ordinary spec of loop stages. */
function specOfFile(file: string, options: { session?: string } = {}): unknown {
  const raw = readPipelineFile(file);
  const loops = load.loopFiles();
  return loops.isLoopPipelineFile(raw) ? loops.loopPipelineSpec(file, raw, options) : raw;
}

/** An unshipped name in a problem's text: `unknown stage implementation "x"`, `unknown validator "y"`, … */
const UNKNOWN_NAME = /unknown (stage|gate) implementation "([^"]+)"|unknown (validator|reviser|action type) "([^"]+)"/g;

/**
 * Checks a spec before `run` or `loop` starts it, in one pass. Any problem but a name Treadle does not
 * ship refuses, listing every problem. Unshipped names (implementations, validators, action types) refuse
 * too, unless `customWorker` says the worker registers them: then they are returned, for the worker's own
 * check (the item's prepare step) to confirm.
 */
function checkBeforeStart(spec: unknown, customWorker: boolean): string[] {
  const result = load.pipeline().validatePipeline(spec, BUILT_IN_IMPLEMENTATIONS);
  if (result.ok) return [];
  if (result.found.some((p) => p.layer !== 'registry')) {
    throw new Error(`pipeline ${specName(spec)} is invalid:\n${listed(result.problems)}`);
  }
  if (!customWorker) {
    throw new Error(
      `pipeline ${specName(spec)} names implementations Treadle does not ship:\n${listed(result.problems)}\n` +
        'If your worker registers them, add --custom-worker: the item starts and the worker checks them before its first stage.',
    );
  }
  // The names alone, for the warning when no worker confirms them.
  const named = (p: string) => [...p.matchAll(UNKNOWN_NAME)].map((m) => `${m[2] ?? m[4]} (${m[1] ?? m[3]})`);
  const names = result.problems.flatMap(named);
  return [...new Set(names)];
}

function specName(spec: unknown): string {
  const name = typeof spec === 'object' && spec !== null ? (spec as { name?: unknown }).name : undefined;
  return typeof name === 'string' ? name : '(unnamed)';
}

/** How long `run --custom-worker` waits for the worker's verdict on implementations Treadle does not ship. */
const WORKER_VERDICT_WAIT_MS = 10_000;
/** Between state queries while waiting for that verdict. */
const WORKER_VERDICT_POLL_MS = 200;

/**
 * Waits for the item's prepare step, which checks the spec against the worker's real registry: returns
 * once the worker accepted it (its stages appear in the state), throws the worker's problems when it refused
 * (the item has then failed), and warns when no worker answered in time (the item stays started).
 */
async function awaitWorkerVerdict(client: TreadleClient, id: string, unconfirmed: string[]): Promise<void> {
  const deadline = Date.now() + WORKER_VERDICT_WAIT_MS;
  while (Date.now() < deadline) {
    // A query needs a worker; without one it would block, so it gets the time left and no more.
    const state = await client.client.withDeadline(deadline, () => client.getState(id)).catch(() => undefined);
    if (state?.problems?.length)
      throw new Error(
        `the worker refused pipeline ${state.pipeline}, so work item ${id} failed at once:\n${listed(state.problems)}`,
      );
    if (state && Object.keys(state.stages).length > 0) return;
    if (state && state.status !== 'running')
      throw new Error(`work item ${id} ended before its first stage: ${state.error ?? state.status}`);
    await new Promise((r) => setTimeout(r, WORKER_VERDICT_POLL_MS));
  }
  process.stderr.write(
    `treadle: warning: no worker on task queue ${client.taskQueue} checked ${unconfirmed.join(', ')} within ${WORKER_VERDICT_WAIT_MS / 1000}s; ` +
      `work item ${id} is started and fails at once if its worker lacks them\n`,
  );
}
