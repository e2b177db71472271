/**
 * The `treadle` command. Every failure prints one line, `treadle: <what went wrong>`, and exits 1 (2 for a
 * usage or configuration error; the exit codes are in exit-codes.ts).
 *
 * Start time (issue 7): at load this file reads only commander and the pipeline catalog; each command loads
 * what it needs when it runs (`load`, in lazy-modules.ts), so `--help`, `pipelines`, `validate` and `server-binary` never
 * load the Temporal SDK. `bench/scenarios/cli-start.ts` measures it.
 */
import { Command, CommanderError, Option } from 'commander';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { devDatabaseFile, oldStateWarning, treadleHome } from '../config/home';
import { CATALOG, oneLine } from '../pipelines/catalog';
import { port } from './arguments';
import { registerApproveCommands } from './approve';
import { registerBlobsCommand } from './blobs';
import { registerCallsCommand } from './calls';
import { registerCancelCommand } from './cancel';
import { registerDecisionsCommand } from './decisions';
import { registerEnginesCommand } from './engines';
import { registerForkCommands } from './fork';
import { registerEvalCommands } from './eval';
import { registerDeploymentsCommand } from './deployments';
import { registerLimitsCommand } from './limits';
import { registerNotifyCommands } from './notify';
import { EXIT, exitCodeOfError } from './exit-codes';
import { registerAuditCommand, registerOutputCommands, registerProgressCommands } from './items';
import { load } from './lazy-modules';
import { table } from './render';
import { registerReviewCommands } from './review';
import { registerRespondCommand } from './respond';
import { registerStartCommands } from './start';
import { registerScheduleCommands } from './schedule';
import { INBOX_PORT } from '../ui/address';
import { registerUiCommands } from './ui';
import { registerValidateCommand } from './validate';
import { withClient } from './with-client';

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
  // Usage errors reach the catch at the end (exit 2, src/cli/exit-codes.ts) instead of exiting 1 inside commander.
  .exitOverride()
  // Options after a subcommand belong to it (`approve batch --by x`, where `approve` has a --by of its own).
  .enablePositionalOptions();

// State an older version kept in ./.treadle/ is no longer read: say so once, with the line that keeps it.
const oldState = oldStateWarning(process.env, process.cwd(), existsSync);
if (oldState) process.stderr.write(`${oldState}\n`);

/**
 * Defaults of the `dev` / `demo` flags: the same as the dev server's own (`server/dev-server.ts`), written out
 * because that module loads the Temporal client and `--help` should not; the CLI test checks they agree.
 */
const DEV_DEFAULTS = { port: 7233, uiPort: 8233, inboxPort: INBOX_PORT, db: devDatabaseFile() } as const;

/** The dev server's flags, shared by `dev` and `demo`. */
type DevFlags = { port: number; uiPort: number; db: string; inboxPort: number; inbox: boolean };

function withServerOptions(command: Command): Command {
  return command
    .addOption(new Option('--port <port>', 'gRPC port').argParser(port).default(DEV_DEFAULTS.port))
    .addOption(new Option('--ui-port <port>', 'Web UI port').argParser(port).default(DEV_DEFAULTS.uiPort))
    .option('--db <file>', 'SQLite file', DEV_DEFAULTS.db)
    .addOption(new Option('--inbox-port <port>', 'review inbox port').argParser(port).default(DEV_DEFAULTS.inboxPort))
    .option('--no-inbox', 'do not start the review inbox');
}

withServerOptions(program.command('dev'))
  .description('start a Temporal dev server (SQLite in TREADLE_HOME) and a worker in one process')
  .action(async (opts: DevFlags) => load.dev().runDev(opts));

withServerOptions(program.command('demo'))
  .description(
    'the five-minute tour: server, worker, and the review-demo work item, with review prompts in this terminal',
  )
  .option('--exit', 'stop the server when the item finishes instead of keeping the Web UI up')
  .action(async (opts: DevFlags & { exit?: boolean }) => load.dev().runDemo(opts));

program
  .command('worker')
  .description('run a worker against TEMPORAL_ADDRESS (default localhost:7233)')
  .action(async () => {
    await load.worker().runWorker(load.bundledExamples().bundledWorkerOptions());
  });

program
  .command('server-binary')
  .description('find the Temporal CLI (building it once with go install when missing) and print its path')
  .option('--cluster', 'the full Temporal server and its sql tool instead, for a server on PostgreSQL (docs/deploy.md)')
  .action(async (opts: { cluster?: boolean }) => {
    if (opts.cluster) {
      const tools = await load.serverTools().resolveServerTools();
      process.stdout.write(`${tools.server}\n${tools.sql}\n`);
      process.stderr.write(`(from ${tools.source})\n`);
      return;
    }
    const { cliVersion, resolveTemporalCli, TemporalCliNotFoundError } = load.temporalCli();
    const { binary, tried } = await resolveTemporalCli();
    if (!binary) throw new TemporalCliNotFoundError(tried);
    process.stdout.write(`${binary.path}\n`);
    process.stderr.write(`(from ${binary.source}: ${cliVersion(binary.path) ?? 'version unknown'})\n`);
  });

program
  .command('server-config')
  .description(
    'write the configuration of a self-hosted Temporal server on PostgreSQL for this machine, one process per service (docs/deploy.md)',
  )
  .option(
    '--root <dir>',
    'the folder the server runs in (server --root); the files go to <dir>/config',
    '/etc/temporal',
  )
  .option('--database <host:port>', 'PostgreSQL', '127.0.0.1:5432')
  .option('--user <name>', 'the database role the server connects as (its password: SQL_PASSWORD)', 'temporal')
  .option('--force', 'replace files that exist')
  .action((opts: { root: string; database: string; user: string; force?: boolean }) => {
    const { writeServerConfig, PRODUCTION_ENV } = load.serverConfig();
    for (const file of writeServerConfig(opts)) process.stdout.write(`${file}\n`);
    const root = path.resolve(opts.root);
    process.stderr.write(
      `start each service (history first on a new database), with SQL_PASSWORD in its environment:\n` +
        `  server --root ${root} --config config --env ${PRODUCTION_ENV} --zone <service> --allow-no-auth start --service <service>\n`,
    );
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

// Registered in this order, which is the order `--help` lists them in.
registerValidateCommand(program);
registerStartCommands(program);
registerForkCommands(program);
registerScheduleCommands(program, withClient);
registerProgressCommands(program);
registerReviewCommands(program);
registerRespondCommand(program);
registerCancelCommand(program, withClient);
registerOutputCommands(program);
registerApproveCommands(program, withClient);
registerDecisionsCommand(program, withClient);
registerUiCommands(program, withClient);
registerCallsCommand(program);
registerBlobsCommand(program, withClient);
registerEnginesCommand(program, withClient);
registerDeploymentsCommand(program, withClient);
registerLimitsCommand(program, withClient);
registerNotifyCommands(program);
registerEvalCommands(program, withClient);
registerAuditCommand(program);

program.addHelpText('after', () => {
  let temporal: string;
  try {
    temporal = load.connectionSettings().temporalSettings().summary;
  } catch (error) {
    temporal = `configuration error: ${(error as Error).message}`;
  }
  const version = (
    JSON.parse(readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8')) as { version: string }
  ).version;
  return [
    '',
    `Temporal: ${temporal}.`,
    'Connection settings, as for every Temporal tool: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY,',
    'TEMPORAL_TLS, TEMPORAL_TLS_CLIENT_CERT_PATH / _KEY_PATH, TEMPORAL_TLS_SERVER_CA_CERT_PATH, TEMPORAL_TLS_SERVER_NAME,',
    'TEMPORAL_PROFILE and TEMPORAL_CONFIG_FILE (temporal.toml profiles).',
    'Treadle: TREADLE_TASK_QUEUE, TREADLE_BLOB_DIR, TREADLE_BLOB_THRESHOLD (docs/configuration.md).',
    `Local state (blobs, call log, task list): ${treadleHome()} (TREADLE_HOME).`,
    `Version: ${version}`,
  ].join('\n');
});

program.parseAsync(process.argv).catch((error: unknown) => {
  // Commander has printed its message (or the help, or the version, which exit 0).
  if (error instanceof CommanderError) process.exit(error.exitCode === 0 ? EXIT.completed : EXIT.usage);
  if (process.env.TREADLE_DEBUG && error instanceof Error)
    process.stderr.write(`${error.stack}\ncause: ${String(error.cause)}\n`);
  process.stderr.write(`treadle: ${error instanceof Error ? error.message : String(error)}\n`);
  // What the command was given or configured with cannot work (a file, a spec, a setting, a profile): exit 2.
  process.exit(exitCodeOfError(error));
});
