/**
 * The inbox's settings from the environment (`TREADLE_UI_*`, `TREADLE_WEB_UI_URL`) and the reviewer
 * identification they give; `treadle ui`'s flags override them. No way to identify reviewers is a
 * configuration error: the inbox never records an answer without knowing who gave it.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { configError } from '../config/errors';
import { treadleHome } from '../config/home';
import { tokensFileSource, type ProxyIdentity } from './auth';
import type { InboxAuth } from './server';

/** What the environment says about the inbox. */
export interface InboxSettings {
  /** The tokens file, absolute (`TREADLE_UI_TOKENS`, relative to the home; default `<home>/ui-tokens`). */
  tokensFile: string;
  /** A proxy's user header (`TREADLE_UI_USER_HEADER`); unset: no proxy identity. */
  userHeader?: string;
  /** The proxy's header naming the reviewer's groups (`TREADLE_UI_GROUPS_HEADER`, default `X-Treadle-Groups`). */
  groupsHeader?: string;
  /** The addresses the header is honoured from (`TREADLE_UI_TRUSTED_PROXIES`, default loopback). */
  trustedProxies: string[];
  /** The Temporal Web UI's address, for history links (`TREADLE_WEB_UI_URL`). */
  webUiUrl?: string;
  /** Extra `host:port` values the inbox answers as (`TREADLE_UI_ALLOWED_HOSTS`), e.g. behind a proxy. */
  allowedHosts: string[];
}

const HEADER = /^[A-Za-z0-9-]{1,64}$/;
const list = (value: string | undefined): string[] =>
  (value ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');

/** Reads the inbox's settings; throws naming the variable when a value is malformed. */
export function inboxSettings(env: NodeJS.ProcessEnv = process.env): InboxSettings {
  const header = env.TREADLE_UI_USER_HEADER?.trim();
  if (header && !HEADER.test(header)) {
    throw configError(`TREADLE_UI_USER_HEADER must be a header name such as X-Forwarded-User, got "${header}"`);
  }
  const groupsHeader = env.TREADLE_UI_GROUPS_HEADER?.trim();
  if (groupsHeader && !HEADER.test(groupsHeader)) {
    throw configError(`TREADLE_UI_GROUPS_HEADER must be a header name such as X-Treadle-Groups, got "${groupsHeader}"`);
  }
  const webUiUrl = env.TREADLE_WEB_UI_URL?.trim();
  if (webUiUrl && !/^https?:\/\/[^\s]+$/i.test(webUiUrl)) {
    throw configError(`TREADLE_WEB_UI_URL must be an http(s) address, got "${webUiUrl}"`);
  }
  const proxies = list(env.TREADLE_UI_TRUSTED_PROXIES);
  return {
    tokensFile: path.resolve(treadleHome(env), env.TREADLE_UI_TOKENS?.trim() || 'ui-tokens'),
    ...(header ? { userHeader: header } : {}),
    ...(groupsHeader ? { groupsHeader } : {}),
    trustedProxies: proxies.length > 0 ? proxies : ['127.0.0.1', '::1'],
    ...(webUiUrl ? { webUiUrl } : {}),
    allowedHosts: list(env.TREADLE_UI_ALLOWED_HOSTS),
  };
}

/**
 * How the inbox identifies reviewers under `settings`: the tokens file when it exists (re-read when it
 * changes), the proxy header when set. Neither is a configuration error naming both ways.
 */
export function inboxAuth(settings: InboxSettings, onError?: (e: unknown) => void): InboxAuth {
  const proxy: ProxyIdentity | undefined = settings.userHeader
    ? {
        header: settings.userHeader,
        ...(settings.groupsHeader ? { groupsHeader: settings.groupsHeader } : {}),
        trustedAddresses: settings.trustedProxies,
      }
    : undefined;
  const tokens = existsSync(settings.tokensFile) ? tokensFileSource(settings.tokensFile, onError) : undefined;
  if (!proxy && (!tokens || tokens().length === 0)) {
    throw configError(
      `no way to identify reviewers: add a token (treadle ui token add <name>, into ${settings.tokensFile}) or set TREADLE_UI_USER_HEADER behind a proxy`,
    );
  }
  return { ...(tokens ? { tokens } : {}), ...(proxy ? { proxy } : {}) };
}
