/**
 * The `treadle` command. Every failure prints one line, `treadle: <what went wrong>`, and exits 1.
 */
import { Command, InvalidArgumentError, Option } from 'commander';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { TreadleClient, TreadleError } from '../client';
import { loadConfig } from '../config';
import type { UsageTotals } from '../engine/usage';
import type { Json } from '../model/shapes';
import { CATALOG, findPipeline, oneLine, readJsonFile, readPipelineFile } from '../pipelines/catalog';
import { cliVersion, resolveTemporalCli, TemporalCliNotFoundError } from '../server/temporal-cli';
import { DEFAULT_DB_FILE, DEFAULT_PORT, DEFAULT_UI_PORT } from '../server/dev-server';
import { validatePipeline } from '../model/pipeline';
import { defaultRegistry, runWorker } from '../worker';
import { runDemo, runDev } from './dev';
import { renderEvent, renderStatus, table } from './render';

const program = new Command();
program
  .name('treadle')
  .description('Durable AI-agent work pipelines on Temporal')
  // Usage errors are one line too, like every other failure; --help shows the usage.
  .configureOutput({ outputError: (text, write) => write(`treadle: ${oneLine(text.replace(/^error: /, ''))} (see treadle --help)\n`) })
  .showSuggestionAfterError();

/** A commander argument parser for whole numbers in [min, max], with the message shown otherwise. */
const wholeNumber =
  (min: number, message: string, max = Number.MAX_SAFE_INTEGER) =>
  (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min || n > max) throw new InvalidArgumentError(message);
    return n;
  };
const port = wholeNumber(1, 'must be a port number', 65_535);

/**
 * Specs are checked for structure here; implementation names are checked by the worker that runs the
 * item, which may have registered more than the built-ins (the item then fails listing the unknown names).
 */
async function connect(): Promise<TreadleClient> {
  return TreadleClient.connect();
}

/** Runs an action with one client and turns every error into one line. */
function action<A extends unknown[]>(fn: (client: TreadleClient, ...args: A) => Promise<void>): (...args: A) => Promise<void> {
  return async (...args: A) => {
    const client = await connect();
    try {
      await fn(client, ...args);
    } finally {
      await client.close();
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
    throw new TreadleError(`--input is not valid JSON (${oneLine((error as Error).message)}); pass JSON or @file.json`, 'invalid_input');
  }
}

program
  .command('dev')
  .description('start a Temporal dev server (SQLite under .treadle/) and a worker in one process')
  .addOption(new Option('--port <port>', 'gRPC port').argParser(port).default(DEFAULT_PORT))
  .addOption(new Option('--ui-port <port>', 'Web UI port').argParser(port).default(DEFAULT_UI_PORT))
  .option('--db <file>', 'SQLite file', DEFAULT_DB_FILE)
  .action(async (opts: { port: number; uiPort: number; db: string }) => runDev(opts));

program
  .command('demo')
  .description('the five-minute tour: server, worker, and the review-demo work item, with review prompts in this terminal')
  .addOption(new Option('--port <port>', 'gRPC port').argParser(port).default(DEFAULT_PORT))
  .addOption(new Option('--ui-port <port>', 'Web UI port').argParser(port).default(DEFAULT_UI_PORT))
  .option('--db <file>', 'SQLite file', DEFAULT_DB_FILE)
  .option('--exit', 'stop the server when the item finishes instead of keeping the Web UI up')
  .action(async (opts: { port: number; uiPort: number; db: string; exit?: boolean }) => runDemo(opts));

program
  .command('worker')
  .description('run a worker against TEMPORAL_ADDRESS (default localhost:7233)')
  .action(async () => {
    await runWorker();
  });

program
  .command('server-binary')
  .description('find the Temporal CLI (building it once with go install when missing) and print its path')
  .action(async () => {
    const { binary, tried } = await resolveTemporalCli();
    if (!binary) throw new TemporalCliNotFoundError(tried);
    process.stdout.write(`${binary.path}\n`);
    process.stderr.write(`(from ${binary.source}: ${cliVersion(binary.path) ?? 'version unknown'})\n`);
  });

program
  .command('pipelines')
  .description('list the built-in pipelines')
  .action(() => {
    process.stdout.write(`${table(['NAME', 'DESCRIPTION'], CATALOG.map((e) => [e.name, e.description]))}\n`);
  });

program
  .command('validate <file>')
  .description('validate a pipeline file against the built-in implementations, listing every problem')
  .action(async (file: string) => {
    const result = validatePipeline(readPipelineFile(file), defaultRegistry().names());
    if (result.ok) {
      process.stdout.write(`${file}: pipeline ${result.spec.name} is valid (${result.spec.stages.length} stages)\n`);
      return;
    }
    throw new TreadleError(`${file} is invalid:\n${result.problems.map((p) => `  - ${p}`).join('\n')}`, 'invalid_pipeline', result.problems);
  });

program
  .command('run [pipeline]')
  .description('start a work item on a built-in pipeline or a pipeline file; prints the work item id')
  .option('-f, --file <file>', 'pipeline file (YAML or JSON)')
  .option('-i, --input <json>', 'work item input: JSON, or @file.json (default: the pipeline\'s sample input)')
  .option('--id <id>', 'work item id (default: generated); starting the same id twice returns the same item')
  .option('--token-budget <tokens>', 'tokens this item may spend on models; then agent-backed stages escalate to review', wholeNumber(1, 'must be a whole number of tokens above 0'))
  .option('-w, --wait', 'print events until the item finishes or waits for review, then its status')
  .action(
    action(async (client, name: string | undefined, opts: { file?: string; input?: string; id?: string; wait?: boolean; tokenBudget?: number }) => {
      if (!name && !opts.file) throw new TreadleError('name a built-in pipeline or pass --file pipeline.yaml', 'invalid_input');
      if (name && opts.file) throw new TreadleError('give a pipeline name or --file, not both', 'invalid_input');
      const entry = name ? findPipeline(name) : undefined;
      const spec = readPipelineFile(entry ? entry.specFile : path.resolve(opts.file!));
      const input = readInput(opts.input, entry ? readJsonFile(entry.sampleInputFile) : null);
      const started = await client.start(spec, input, { ...(opts.id ? { id: opts.id } : {}), ...(opts.tokenBudget !== undefined ? { tokenBudget: opts.tokenBudget } : {}) });
      if (!opts.wait) {
        process.stdout.write(`${started.id}\n`);
        return;
      }
      process.stdout.write(`started ${started.id}\n`);
      const state = await client.watch(started.id, (e) => process.stdout.write(`${renderEvent(e)}\n`), { untilReview: true });
      process.stdout.write(`\n${renderStatus(state)}\n`);
    }),
  );

program
  .command('status <id>')
  .description('a work item\'s stages, attempts and pending reviews')
  .option('--json', 'the full state as JSON')
  .action(
    action(async (client, id: string, opts: { json?: boolean }) => {
      const state = await client.getState(id);
      process.stdout.write(opts.json ? `${JSON.stringify(state, null, 2)}\n` : `${renderStatus(state)}\n`);
    }),
  );

program
  .command('watch <id>')
  .description('print events as they happen until the item finishes or waits for review')
  .action(
    action(async (client, id: string) => {
      const state = await client.watch(id, (e) => process.stdout.write(`${renderEvent(e)}\n`), { untilReview: true });
      process.stdout.write(`${state.id} is ${state.status}\n`);
    }),
  );

program
  .command('reviews')
  .description('pending reviews across all work items')
  .option('--json', 'as JSON')
  .option('--pipeline <name>', 'only this pipeline\'s items')
  .action(
    action(async (client, opts: { json?: boolean; pipeline?: string }) => {
      const reviews = await client.listPendingReviews(opts.pipeline ? { pipeline: opts.pipeline } : {});
      if (opts.json) {
        process.stdout.write(`${JSON.stringify(reviews, null, 2)}\n`);
        return;
      }
      if (reviews.length === 0) {
        process.stdout.write('no pending reviews\n');
        return;
      }
      const rows = reviews.map((r) => [r.itemId, r.pipeline, r.stage, r.reason, r.requestedAt.slice(0, 19).replace('T', ' '), r.message]);
      process.stdout.write(`${table(['ITEM', 'PIPELINE', 'STAGE', 'REASON', 'REQUESTED', 'WHY'], rows)}\n`);
    }),
  );

program
  .command('review <id> <stage>')
  .description('approve, reject, or approve with an edited artefact')
  .option('--approve', 'approve the output (the latest attempt\'s, or --attempt N)')
  .option('--reject <reason>', 'reject: the stage fails and its dependents are skipped')
  .option('--edit <file>', 'approve with the JSON artefact in FILE instead of the output')
  .option('--attempt <n>', 'with --approve: which attempt\'s output to approve', wholeNumber(1, 'must be a whole number >= 1'))
  .option('--note <text>', 'a note recorded with the review')
  .option('--reviewer <name>', 'who reviews (default: $TREADLE_REVIEWER or $USER)')
  .action(
    action(async (client, id: string, stage: string, opts: { approve?: boolean; reject?: string; edit?: string; attempt?: number; note?: string; reviewer?: string }) => {
      const chosen = [opts.approve ? '--approve' : '', opts.reject !== undefined ? '--reject' : '', opts.edit !== undefined ? '--edit' : ''].filter(Boolean);
      if (chosen.length !== 1) throw new TreadleError(`give exactly one of --approve, --reject REASON, --edit FILE${chosen.length ? ` (got ${chosen.join(', ')})` : ''}`, 'invalid_input');
      if (opts.attempt !== undefined && !opts.approve) throw new TreadleError('--attempt goes with --approve', 'invalid_input');
      const note = opts.note !== undefined ? { note: opts.note } : {};
      let done;
      if (opts.approve) done = await client.review(id, stage, { kind: 'approve', ...note, ...(opts.attempt !== undefined ? { attempt: opts.attempt } : {}) }, opts.reviewer);
      else if (opts.reject !== undefined) done = await client.review(id, stage, { kind: 'reject', reason: opts.reject, ...note }, opts.reviewer);
      // Through approveWithEdits, so that large edits go to the blob store like stage artefacts.
      else done = await client.approveWithEdits(id, stage, readJsonFile(opts.edit!), { ...note, ...(opts.reviewer ? { reviewer: opts.reviewer } : {}) });
      process.stdout.write(`${done.stage} of ${done.itemId}: ${done.outcome.replace(/_/g, ' ')} by ${done.reviewer}\n`);
    }),
  );

program
  .command('usage <id>')
  .description('model calls, tokens and estimated cost of a work item, per stage and in total')
  .option('--json', 'as JSON: { total: {...}, stages: { <name>: {...} } }')
  .action(
    action(async (client, id: string, opts: { json?: boolean }) => {
      const usage = await client.usage(id);
      if (opts.json) {
        process.stdout.write(`${JSON.stringify(usage, null, 2)}\n`);
        return;
      }
      const cost = (usd: number | null) => (usd === null ? 'unknown' : `$${usd.toFixed(4)}`);
      const row = (name: string, t: UsageTotals) => [name, String(t.calls), String(t.errors), String(t.inputTokens), String(t.outputTokens), String(t.cacheReadTokens), `${Math.round(t.latencyMs)}ms`, cost(t.estimatedCostUsd)];
      const rows = [...Object.entries(usage.stages).map(([name, t]) => row(name, t)), row('TOTAL', usage.total)];
      process.stdout.write(`${table(['STAGE', 'CALLS', 'ERRORS', 'INPUT', 'OUTPUT', 'CACHE READ', 'LATENCY', 'EST. COST'], rows)}\n`);
    }),
  );

program
  .command('result <id>')
  .description('wait for a work item to finish and print its result as JSON')
  .action(
    action(async (client, id: string) => {
      process.stdout.write(`${JSON.stringify(await client.result(id), null, 2)}\n`);
    }),
  );

program
  .command('artefact <id> <stage>')
  .description('print a stage\'s final artefact as JSON, read from the blob store when it was offloaded')
  .action(
    action(async (client, id: string, stage: string) => {
      const state = await client.getState(id);
      const st = state.stages[stage];
      if (!st) throw new TreadleError(`work item ${id} has no stage "${stage}" (stages: ${Object.keys(state.stages).join(', ')})`, 'invalid_input');
      if (st.artefact === undefined) throw new TreadleError(`stage ${stage} of ${id} has no artefact (it is ${st.status})`, 'invalid_input');
      process.stdout.write(`${JSON.stringify(await client.readArtefact(st.artefact), null, 2)}\n`);
    }),
  );

program.addHelpText('after', () => {
  let address: string;
  try {
    address = loadConfig().address;
  } catch (error) {
    address = `configuration error: ${(error as Error).message}`;
  }
  const version = (JSON.parse(readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8')) as { version: string }).version;
  return `\nEnvironment: TEMPORAL_ADDRESS (${address}), TEMPORAL_NAMESPACE, TREADLE_TASK_QUEUE, TREADLE_BLOB_DIR, TREADLE_BLOB_THRESHOLD.\nVersion: ${version}`;
});

program.parseAsync(process.argv).catch((error: unknown) => {
  if (process.env.TREADLE_DEBUG && error instanceof Error) process.stderr.write(`${error.stack}\ncause: ${String(error.cause)}\n`);
  process.stderr.write(`treadle: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
