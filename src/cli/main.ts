/**
 * The `treadle` command. Every failure prints one line, `treadle: <what went wrong>`, and exits 1.
 *
 * Start time (issue 7): at load this file reads only commander and the pipeline catalog; each command loads
 * what it needs when it runs (`load` below), so `--help`, `pipelines`, `validate` and `server-binary` never
 * load the Temporal SDK. `bench/scenarios/cli-start.ts` measures it.
 */
import { Command, InvalidArgumentError, Option } from 'commander';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type * as ClientModule from '../client';
import type * as ConfigModule from '../config';
import type * as PipelineModule from '../model/pipeline';
import type * as TemporalCliModule from '../server/temporal-cli';
import type * as WorkerModule from '../worker';
import type * as TracingModule from '../tracing';
import type * as DevModule from './dev';
import type * as LoopFilesModule from '../kinds/loop/files';
import type * as SpecLinesModule from '../pipelines/spec-lines';
import type { SpecLines as SpecLinesType } from '../pipelines/spec-lines';
import type { KnownImplementations as KnownImplementationsType } from '../model/pipeline';
import type { SpecProblem as SpecProblemType } from '../model/pipeline';
import type { TreadleClient } from '../client';
import type { UsageTotals } from '../engine/usage';
import type { Json } from '../model/shapes';
import {
  BUILT_IN_IMPLEMENTATIONS,
  CATALOG,
  findPipeline,
  oneLine,
  readJsonFile,
  readPipelineFile,
} from '../pipelines/catalog';
import { renderEvent, renderLoopStatus, renderStatus, renderTddStatus, table } from './render';
import { registerApproveCommands } from './approve';
import { registerCallsCommand } from './calls';
import { registerEnginesCommand } from './engines';
import type { TddNodeState } from '../kinds/tdd/shapes';

/* eslint-disable @typescript-eslint/no-require-imports -- deliberate lazy loading: `require` rather than
   `import()`, because a native dynamic import of CommonJS goes through the ESM loader and costs more. */
/** The modules commands load when they run: the SDK client and worker, the dev server, zod (validation). */
const load = {
  client: (): typeof ClientModule => require('../client'),
  config: (): typeof ConfigModule => require('../config'),
  dev: (): typeof DevModule => require('./dev'),
  pipeline: (): typeof PipelineModule => require('../model/pipeline'),
  temporalCli: (): typeof TemporalCliModule => require('../server/temporal-cli'),
  worker: (): typeof WorkerModule => require('../worker'),
  tracing: (): typeof TracingModule => require('../tracing'),
  loopFiles: (): typeof LoopFilesModule => require('../kinds/loop/files'),
};
/* eslint-enable @typescript-eslint/no-require-imports */

// A reader that stops reading (`treadle status <id> | head`) ends the command quietly, as with other Unix tools.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(0);
  throw error;
});

const program = new Command();
program
  .name('treadle')
  .description('Durable AI-agent work pipelines on Temporal')
  // Usage errors are one line too, like every other failure; --help shows the usage.
  .configureOutput({
    outputError: (text, write) => write(`treadle: ${oneLine(text.replace(/^error: /, ''))} (see treadle --help)\n`),
  })
  .showSuggestionAfterError()
  // Options after a subcommand belong to it (`approve batch --by x`, where `approve` has a --by of its own).
  .enablePositionalOptions();

/** A commander argument parser for whole numbers in [min, max], with the message shown otherwise. */
const wholeNumber =
  (min: number, message: string, max = Number.MAX_SAFE_INTEGER) =>
  (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min || n > max) throw new InvalidArgumentError(message);
    return n;
  };
const port = wholeNumber(1, 'must be a port number', 65_535);

/** Runs an action with one connected client, closed afterwards (errors become one line in the catch at the end). */
function withClient<A extends unknown[]>(
  fn: (client: TreadleClient, ...args: A) => Promise<void>,
): (...args: A) => Promise<void> {
  return async (...args: A) => {
    // With OTEL_EXPORTER_OTLP_ENDPOINT set, a start is the root span of the item's trace (loaded only then).
    const tracing =
      process.env.OTEL_EXPORTER_OTLP_ENDPOINT || process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
        ? load.tracing().tracingFromEnv()
        : undefined;
    const client = await load.client().TreadleClient.connect(tracing ? { tracing } : {});
    try {
      await fn(client, ...args);
    } finally {
      await client.close();
      await tracing?.shutdown();
    }
  };
}

/** Reads `--input`: inline JSON, or `@file`. */
function readInput(value: string | undefined, fallback: Json): Json {
  if (value === undefined) return fallback;
  if (value.startsWith('@')) return readJsonFile(value.slice(1));
  try {
    return JSON.parse(value) as Json;
  } catch (error) {
    throw new Error(`--input is not valid JSON (${oneLine((error as Error).message)}); pass JSON or @file.json`);
  }
}

/** Problems as the indented list every multi-problem error uses. */
const listed = (problems: string[]): string => problems.map((p) => `  - ${p}`).join('\n');

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
  });
  process.stdout.write(`\n${renderStatus(state)}\n`);
  const stages = (spec as { stages?: unknown } | null)?.stages;
  if (Array.isArray(stages) && stages.some((s) => (s as { run?: unknown } | null)?.run === 'loop')) {
    for (const loop of await client.loops(started.id))
      process.stdout.write(`\n${renderLoopStatus(loop.workflowId, loop.state)}\n`);
  }
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

/**
 * The names and checks `validate --custom-worker <module>` validates against: the module's Registry (its
 * export `registry`, its default export, the module itself, or what a function of those returns) and its
 * `approvalActions` when it has them, else the built-in action types, as `runWorker` defaults them.
 */
function customWorkerNames(module: string): KnownImplementationsType {
  const file = path.resolve(module);
  let loaded: Record<string, unknown>;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- the user's module, named at run time
    loaded = require(file) as Record<string, unknown>;
  } catch (error) {
    throw new Error(`--custom-worker: cannot load ${module}: ${oneLine((error as Error).message)}`);
  }
  const isRegistry = (r: unknown): r is { names(): KnownImplementationsType } =>
    typeof (r as { names?: unknown } | null)?.names === 'function';
  // A function that is no registry itself builds one.
  const pick = (value: unknown): unknown =>
    typeof value === 'function' && !isRegistry(value) ? (value as () => unknown)() : value;
  const registry = [loaded.registry, loaded.default, loaded].map(pick).find(isRegistry);
  if (!registry) {
    const how = "export your worker's registry as `registry` (module.exports = { registry })";
    throw new Error(`--custom-worker: ${module} exports no Registry: ${how}`);
  }
  const actions = pick(loaded.approvalActions) as { names?: () => string[] } | undefined;
  const actionTypes = typeof actions?.names === 'function' ? actions.names() : BUILT_IN_IMPLEMENTATIONS.actions!;
  return { ...registry.names(), actions: actionTypes };
}

/** Every problem as `shown:line: problem` (the line where `file` has the field), for `validate`. */
function placedProblems(file: string, shown: string, problems: string[], found: readonly SpecProblemType[]): string[] {
  let lines: SpecLinesType | undefined;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- only when there are problems to place
    const { SpecLines } = require('../pipelines/spec-lines') as typeof SpecLinesModule;
    lines = new SpecLines(readFileSync(file, 'utf8'));
  } catch {
    lines = undefined;
  }
  return problems.map((problem, i) => {
    const line = found[i] && found[i].at.length > 0 ? lines?.lineOf(found[i].at) : undefined;
    return `${shown}${line !== undefined ? `:${line}` : ''}: ${problem}`;
  });
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

/**
 * Defaults of the `dev` / `demo` flags: the same as the dev server's own (`server/dev-server.ts`), written out
 * because that module loads the Temporal client and `--help` should not; the CLI test checks they agree.
 */
const DEV_DEFAULTS = { port: 7233, uiPort: 8233, db: path.join('.treadle', 'temporal.sqlite') } as const;

/** The dev server's flags, shared by `dev` and `demo`. */
function withServerOptions(command: Command): Command {
  return command
    .addOption(new Option('--port <port>', 'gRPC port').argParser(port).default(DEV_DEFAULTS.port))
    .addOption(new Option('--ui-port <port>', 'Web UI port').argParser(port).default(DEV_DEFAULTS.uiPort))
    .option('--db <file>', 'SQLite file', DEV_DEFAULTS.db);
}

withServerOptions(program.command('dev'))
  .description('start a Temporal dev server (SQLite under .treadle/) and a worker in one process')
  .action(async (opts: { port: number; uiPort: number; db: string }) => load.dev().runDev(opts));

withServerOptions(program.command('demo'))
  .description(
    'the five-minute tour: server, worker, and the review-demo work item, with review prompts in this terminal',
  )
  .option('--exit', 'stop the server when the item finishes instead of keeping the Web UI up')
  .action(async (opts: { port: number; uiPort: number; db: string; exit?: boolean }) => load.dev().runDemo(opts));

program
  .command('worker')
  .description('run a worker against TEMPORAL_ADDRESS (default localhost:7233)')
  .action(async () => {
    await load.worker().runWorker();
  });

program
  .command('server-binary')
  .description('find the Temporal CLI (building it once with go install when missing) and print its path')
  .action(async () => {
    const { cliVersion, resolveTemporalCli, TemporalCliNotFoundError } = load.temporalCli();
    const { binary, tried } = await resolveTemporalCli();
    if (!binary) throw new TemporalCliNotFoundError(tried);
    process.stdout.write(`${binary.path}\n`);
    process.stderr.write(`(from ${binary.source}: ${cliVersion(binary.path) ?? 'version unknown'})\n`);
  });

program
  .command('pipelines')
  .description('list the built-in pipelines')
  .action(() => {
    process.stdout.write(
      `${table(
        ['NAME', 'DESCRIPTION'],
        CATALOG.map((e) => [e.name, e.description]),
      )}\n`,
    );
  });

program
  .command('validate <file>')
  .description('validate a pipeline file against the built-in implementations, listing every problem with its line')
  .option('--custom-worker <module>', "check against your worker's registry: a module exporting it as `registry`")
  .action((file: string, opts: { customWorker?: string }) => {
    const resolved = path.resolve(file);
    const known = opts.customWorker !== undefined ? customWorkerNames(opts.customWorker) : BUILT_IN_IMPLEMENTATIONS;
    const raw = readPipelineFile(resolved);
    const loops = load.loopFiles();
    // A loop pipeline's spec is made from several files, whose problems name them; the rest are placed in this file.
    const loopPipeline = loops.isLoopPipelineFile(raw);
    const result = load.pipeline().validatePipeline(loopPipeline ? loops.loopPipelineSpec(resolved, raw) : raw, known);
    if (!result.ok) {
      const problems = loopPipeline ? result.problems : placedProblems(resolved, file, result.problems, result.found);
      const count = `${problems.length} problem${problems.length === 1 ? '' : 's'}`;
      throw new Error(`${file} is invalid (${count}):\n${listed(problems)}`);
    }
    process.stdout.write(`${file}: pipeline ${result.spec.name} is valid (${result.spec.stages.length} stages)\n`);
  });

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
  .option('-w, --wait', 'print events until the item finishes or waits for review, then its status')
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
  .option('-w, --wait', 'print events until the item finishes, then its status and its loops')
  .action(
    async (file: string, opts: { session?: string; replies?: string; input?: string; id?: string; wait?: boolean }) => {
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

program
  .command('tdd <spec>')
  .description(
    'start a V3 TDD tree (seed 001) on a git repository: a spec file (YAML or JSON), the repository its workers use',
  )
  .requiredOption('-r, --repo <path>', 'the git repository (a path on the workers; they allow only TREADLE_TDD_REPOS)')
  .option(
    '--replies <file>',
    'scripted agent replies, YAML or JSON: { "<spec id>.<node>": [reply, ...] } (offline runs)',
  )
  .option(
    '--id <id>',
    'workflow id of the root node (default tdd-<spec id>); starting the same id twice returns the same tree',
  )
  .option('-w, --wait', "print the root's events until it finishes or waits for a human, then its status")
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
      process.stdout.write(`\n${renderTddStatus(await client.getTddState(started.id))}\n`);
    })();
  });

program
  .command('status <id>')
  .description("a work item's stages, attempts and pending reviews")
  .option('--json', 'the full state as JSON')
  .action(
    withClient(async (client, id: string, opts: { json?: boolean }) => {
      if ((await client.workflowType(id)) === 'loopStage') {
        const loop = await client.getLoopState(id);
        process.stdout.write(opts.json ? `${JSON.stringify(loop, null, 2)}\n` : `${renderLoopStatus(id, loop)}\n`);
        return;
      }
      const state = await client.getState(id);
      const tdd = (state as unknown as { kind?: string }).kind === 'tdd';
      const retries =
        !tdd &&
        !opts.json &&
        (state.status === 'running' || state.status === 'waiting_review' || state.status === 'waiting_approval')
          ? await client.activityRetries(id)
          : [];
      const text = tdd ? renderTddStatus(state as unknown as TddNodeState) : renderStatus(state, retries);
      process.stdout.write(opts.json ? `${JSON.stringify(state, null, 2)}\n` : `${text}\n`);
      if (!opts.json && !tdd && state.events.some((e) => e.type === 'LoopStarted')) {
        for (const loop of await client.loops(id))
          process.stdout.write(`\n${renderLoopStatus(loop.workflowId, loop.state)}\n`);
      }
    }),
  );

program
  .command('watch <id>')
  .description('print events as they happen until the item finishes or waits for review')
  .action(
    withClient(async (client, id: string) => {
      const state = await client.watch(id, (e) => process.stdout.write(`${renderEvent(e)}\n`), { untilReview: true });
      process.stdout.write(`${state.id} is ${state.status}\n`);
    }),
  );

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

program
  .command('review <id> <stage>')
  .description('approve, reject, or approve with an edited artefact')
  .option('--approve', "approve the output (the latest attempt's, or --attempt N)")
  .option('--reject <reason>', 'reject: the stage fails and its dependents are skipped')
  .option('--edit <file>', 'approve with the JSON artefact in FILE instead of the output')
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
        opts: { approve?: boolean; reject?: string; edit?: string; attempt?: number; note?: string; reviewer?: string },
      ) => {
        const chosen = [
          opts.approve ? '--approve' : '',
          opts.reject !== undefined ? '--reject' : '',
          opts.edit !== undefined ? '--edit' : '',
        ].filter(Boolean);
        if (chosen.length !== 1)
          throw new Error(
            `give exactly one of --approve, --reject REASON, --edit FILE${chosen.length ? ` (got ${chosen.join(', ')})` : ''}`,
          );
        if (opts.attempt !== undefined && !opts.approve) throw new Error('--attempt goes with --approve');
        const note = opts.note !== undefined ? { note: opts.note } : {};
        let done;
        if (opts.approve)
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
          done = await client.approveWithEdits(id, stage, readJsonFile(opts.edit!), {
            ...note,
            ...(opts.reviewer ? { reviewer: opts.reviewer } : {}),
          });
        process.stdout.write(
          `${done.stage} of ${done.itemId}: ${done.outcome.replace(/_/g, ' ')} by ${done.reviewer}\n`,
        );
      },
    ),
  );

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
  .description('wait for a work item to finish and print its result as JSON')
  .action(
    withClient(async (client, id: string) => {
      process.stdout.write(`${JSON.stringify(await client.result(id), null, 2)}\n`);
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

registerApproveCommands(program, withClient);
registerCallsCommand(program);
registerEnginesCommand(program, withClient);

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

program.addHelpText('after', () => {
  let address: string;
  try {
    address = load.config().loadConfig().address;
  } catch (error) {
    address = `configuration error: ${(error as Error).message}`;
  }
  const version = (
    JSON.parse(readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8')) as { version: string }
  ).version;
  return `\nEnvironment: TEMPORAL_ADDRESS (${address}), TEMPORAL_NAMESPACE, TREADLE_TASK_QUEUE, TREADLE_BLOB_DIR, TREADLE_BLOB_THRESHOLD.\nVersion: ${version}`;
});

program.parseAsync(process.argv).catch((error: unknown) => {
  if (process.env.TREADLE_DEBUG && error instanceof Error)
    process.stderr.write(`${error.stack}\ncause: ${String(error.cause)}\n`);
  process.stderr.write(`treadle: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
