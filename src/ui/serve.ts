/**
 * The review inbox for a connected client: `treadle ui`, `treadle dev` and `treadle demo` all start it here, so
 * they read the same settings, identify reviewers the same way and link the same Temporal Web UI.
 */
import { existsSync } from 'node:fs';
import type { TreadleClient } from '../client';
import { addToken, readTokensFile } from './auth';
import { clientBackend } from './client-backend';
import { inboxAuth, inboxSettings, type InboxSettings } from './options';
import { createInboxServer } from './server';

/** Where the inbox listens and the settings it runs with (default: the environment's `TREADLE_UI_*`). */
export interface ServeInboxOptions {
  host?: string;
  /** 0: any free port (the URL says which). */
  port?: number;
  settings?: InboxSettings;
  /** `dev`/`demo`: a token is created for this reviewer when the tokens file has none (and no proxy header). */
  firstReviewer?: string;
}

/** A running inbox. */
export interface ServedInbox {
  url: string;
  tokensFile: string;
  /** The token created for `firstReviewer`, to be shown once; absent when the file already had tokens. */
  newToken?: string;
  close(): Promise<void>;
}

/** Starts the inbox over `client`; a configuration error (no way to identify reviewers) is thrown before listening. */
export async function serveInbox(client: TreadleClient, options: ServeInboxOptions = {}): Promise<ServedInbox> {
  const settings = options.settings ?? inboxSettings();
  let newToken: string | undefined;
  const hasTokens = existsSync(settings.tokensFile) && readTokensFile(settings.tokensFile).length > 0;
  if (options.firstReviewer && !settings.userHeader && !hasTokens)
    newToken = addToken(settings.tokensFile, options.firstReviewer);
  const auth = inboxAuth(settings, (e) => process.stderr.write(`treadle ui: ${(e as Error).message}\n`));
  const server = await createInboxServer({
    backend: clientBackend(client),
    host: options.host ?? '127.0.0.1',
    port: options.port ?? 8234,
    auth,
    namespace: client.client.options.namespace,
    allowedHosts: settings.allowedHosts,
    ...(settings.webUiUrl ? { webUiUrl: settings.webUiUrl } : {}),
  });
  return { url: server.url, tokensFile: settings.tokensFile, ...(newToken ? { newToken } : {}), close: server.close };
}
