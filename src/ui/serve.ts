/**
 * The review inbox for a connected client: `treadle ui`, `treadle dev` and `treadle demo` all start it here, so
 * they read the same settings, identify reviewers the same way and link the same Temporal Web UI.
 */
import { existsSync } from 'node:fs';
import type { TreadleClient } from '../client';
import { addToken, EVERY_GROUP, readTokensFile } from './auth';
import { clientBackend } from './client-backend';
import { inboxAuth, inboxSettings, type InboxSettings } from './options';
import { createInboxServer, type InboxAuth } from './server';

/** Where the inbox listens and the settings it runs with (default: the environment's `TREADLE_UI_*`). */
export interface ServeInboxOptions {
  host?: string;
  /** 0: any free port (the URL says which). */
  port?: number;
  settings?: InboxSettings;
  /** `dev`/`demo`: a token is created for this reviewer when the tokens file has none (and no proxy header). */
  firstReviewer?: string;
  /** How reviewers are identified, when the caller built it ({@link reviewerAuth}); not with `firstReviewer`. */
  auth?: InboxAuth;
}

/** A running inbox. */
export interface ServedInbox {
  url: string;
  tokensFile: string;
  /** The token created for `firstReviewer`, to be shown once; absent when the file already had tokens. */
  newToken?: string;
  close(): Promise<void>;
}

/**
 * How the inbox identifies reviewers under `settings` (`inboxAuth`: a configuration error when there is no way);
 * a tokens file that becomes unusable while serving ends every session and is said on stderr.
 */
export function reviewerAuth(settings: InboxSettings): InboxAuth {
  return inboxAuth(settings, (e) => process.stderr.write(`treadle ui: ${(e as Error).message}\n`));
}

/** Starts the inbox over `client`; a configuration error (no way to identify reviewers) is thrown before listening. */
export async function serveInbox(client: TreadleClient, options: ServeInboxOptions = {}): Promise<ServedInbox> {
  const settings = options.settings ?? inboxSettings();
  let newToken: string | undefined;
  const file = settings.tokensFile;
  // The file is read for this only when a first reviewer may need a token (`dev`/`demo`). The only reviewer
  // of a dev setup answers for every group (`*`), so decisions addressed to one are not read-only to them.
  if (options.firstReviewer && !settings.userHeader && !(existsSync(file) && readTokensFile(file).length > 0))
    newToken = addToken(file, options.firstReviewer, [EVERY_GROUP]);
  const server = await createInboxServer({
    backend: clientBackend(client),
    host: options.host,
    port: options.port,
    auth: options.auth ?? reviewerAuth(settings),
    namespace: client.client.options.namespace,
    allowedHosts: settings.allowedHosts,
    ...(settings.webUiUrl ? { webUiUrl: settings.webUiUrl } : {}),
  });
  return { url: server.url, tokensFile: settings.tokensFile, ...(newToken ? { newToken } : {}), close: server.close };
}
