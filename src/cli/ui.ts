/**
 * `treadle ui`: the review inbox, a web page listing every decision a person owes, served over the client SDK
 * until Ctrl-C; and `treadle ui token add|list|remove`, the reviewers who may sign in to it (docs/inbox.md).
 */
import { Option, type Command } from 'commander';
import { existsSync } from 'node:fs';
import { INBOX_HOST, INBOX_PORT, loginUrl } from '../ui/address';
import { load } from './lazy-modules';
import { interrupted } from './interrupted';
import { wholeNumber } from './arguments';
import type { WithClient } from './with-client';

/** A port, or 0 for any free one. */
const listenPort = wholeNumber(0, 'must be a port number (0: any free port)', 65_535);

interface UiOptions {
  host: string;
  port: number;
  tokens?: string;
  userHeader?: string;
  webUiUrl?: string;
}

/**
 * Why the inbox could not listen, in one line when another process holds the address (exit 1: the machine's
 * state, not the command's arguments); any other failure as it is.
 */
function listenFailure(error: unknown, opts: UiOptions): unknown {
  if ((error as NodeJS.ErrnoException | null)?.code !== 'EADDRINUSE') return error;
  return new Error(`cannot serve the inbox on ${opts.host}:${opts.port}: the address is in use; choose another --port`);
}

/** The tokens file `--tokens` names, else the environment's (TREADLE_UI_TOKENS, `<home>/ui-tokens`). */
function tokensFile(flag: string | undefined): string {
  const { inboxSettings } = load.inboxOptions();
  return inboxSettings({ ...process.env, ...(flag ? { TREADLE_UI_TOKENS: flag } : {}) }).tokensFile;
}

/** Registers `treadle ui` and `treadle ui token …`. */
export function registerUiCommands(program: Command, withClient: WithClient): void {
  const ui = program
    .command('ui')
    .description('serve the review inbox: every decision a person owes, in a web page (docs/inbox.md)')
    .option('--host <address>', 'the address to listen on', INBOX_HOST)
    .addOption(new Option('--port <port>', 'the port (0: any free port)').argParser(listenPort).default(INBOX_PORT))
    .option('--tokens <file>', 'the reviewers tokens file (default: TREADLE_UI_TOKENS, else <home>/ui-tokens)')
    .option('--user-header <name>', "an authenticating proxy's user header (TREADLE_UI_USER_HEADER)")
    .option('--web-ui-url <url>', 'the Temporal Web UI, for history links (TREADLE_WEB_UI_URL)')
    .action(async (opts: UiOptions) => {
      const env = {
        ...process.env,
        ...(opts.tokens ? { TREADLE_UI_TOKENS: opts.tokens } : {}),
        ...(opts.userHeader ? { TREADLE_UI_USER_HEADER: opts.userHeader } : {}),
        ...(opts.webUiUrl ? { TREADLE_WEB_UI_URL: opts.webUiUrl } : {}),
      };
      const settings = load.inboxOptions().inboxSettings(env);
      const { reviewerAuth, serveInbox } = load.inbox();
      // No way to identify reviewers is refused before connecting: exit 2 whether or not a server answers.
      const auth = reviewerAuth(settings);
      await withClient(async (client) => {
        const served = serveInbox(client, { host: opts.host, port: opts.port, settings, auth });
        const inbox = await served.catch((e: unknown) => {
          throw listenFailure(e, opts);
        });
        process.stdout.write(`Review inbox: ${inbox.url}\n`);
        process.stderr.write(
          settings.userHeader
            ? `Reviewers are named by the ${settings.userHeader} header from ${settings.trustedProxies.join(', ')}.\n`
            : `Reviewers sign in with a token from ${inbox.tokensFile} (treadle ui token add <name>). Ctrl-C stops.\n`,
        );
        await interrupted();
        await inbox.close();
      })();
    });

  const token = ui.command('token').description("the reviewers' sign-in tokens (only their hashes are kept)");
  const fileOption = (): Option =>
    new Option('--tokens <file>', 'the tokens file (default: TREADLE_UI_TOKENS, else <home>/ui-tokens)');
  token
    .command('add <name>')
    .description('make a token for a reviewer; it is printed once, with the address that signs in with it')
    .addOption(fileOption())
    .option('--url <url>', "the inbox's address, for the sign-in link", `http://${INBOX_HOST}:${INBOX_PORT}`)
    .option('--groups <groups>', 'their reviewer groups, comma-separated (legal,leads; * is every group)')
    .action((name: string, opts: { tokens?: string; url: string; groups?: string }) => {
      const file = tokensFile(opts.tokens);
      const groups = opts.groups !== undefined ? opts.groups.split(',') : [];
      const secret = load.inboxAuth().addToken(file, name, groups);
      process.stdout.write(`${secret}\n`);
      const inGroups = groups.length > 0 ? ` (groups ${groups.map((g) => g.trim()).join(', ')})` : '';
      process.stderr.write(`Token for ${name}${inGroups} added to ${file}; it is not shown again. Sign in at:\n`);
      process.stderr.write(`  ${loginUrl(opts.url, secret)}\n`);
    });
  token
    .command('list')
    .description('the reviewers who have a token')
    .addOption(fileOption())
    .action((opts: { tokens?: string }) => {
      const file = tokensFile(opts.tokens);
      const names = existsSync(file)
        ? load
            .inboxAuth()
            .readTokensFile(file)
            .map((e) => (e.groups.length > 0 ? `${e.name} groups=${e.groups.join(',')}` : e.name))
        : [];
      process.stdout.write(names.length ? `${names.join('\n')}\n` : `no reviewer tokens in ${file}\n`);
    });
  token
    .command('remove <name>')
    .description("remove a reviewer's token (their sessions end at their next request)")
    .addOption(fileOption())
    .action((name: string, opts: { tokens?: string }) => {
      const file = tokensFile(opts.tokens);
      load.inboxAuth().removeToken(file, name);
      process.stderr.write(`Token for ${name} removed from ${file}.\n`);
    });
}
