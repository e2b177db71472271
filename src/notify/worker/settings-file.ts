/**
 * The worker's notifications (docs/notifications.md): the file `TREADLE_NOTIFY` names, read like the limits file
 * (every problem listed with its file, line and field; `treadle worker` exits 2), with each webhook's secret
 * looked up in the environment, and the inbox's address `TREADLE_UI_URL` for the links.
 */
import path from 'node:path';
import { TreadleError } from '../../config/errors';
import { readSettingsFile, type SettingsParse } from '../../capacity/worker/limits-file';
import { parseNotifySettings, type NotifyParse, type NotifySettings } from '../settings';

/** The setting naming the notifications file. */
export const NOTIFY_ENV = 'TREADLE_NOTIFY';
/** The setting giving the review inbox's address, for links to a decision's page. */
export const UI_URL_ENV = 'TREADLE_UI_URL';

/** The file's webhooks and the inbox address the links use. */
export interface WorkerNotifications extends NotifySettings {
  /** `TREADLE_UI_URL`, when set. */
  uiUrl?: string;
}

/**
 * Checks the notifications file as parsed, and that each webhook's `secret_env` is set in `env` (a worker
 * without the key could not sign, and would find out only when a decision is owed).
 */
export function parseNotifyWithSecrets(raw: unknown, env: NodeJS.ProcessEnv): NotifyParse {
  const parsed = parseNotifySettings(raw);
  if (!parsed.ok) return parsed;
  const problems = parsed.settings.webhooks.flatMap((w, i) =>
    env[w.secretEnv]
      ? []
      : [
          `webhooks.${i}.secret_env: ${w.secretEnv} is not set; export it (the webhook's HMAC key) where workers and \`treadle notify test\` run`,
        ],
  );
  return problems.length > 0 ? { ok: false, problems } : parsed;
}

/** Reads the notifications file at `file` (relative to the working directory) against `env`. */
export function readNotifyFile(file: string, env: NodeJS.ProcessEnv = process.env): NotifyParse {
  const parse = (raw: unknown): SettingsParse<{ settings: NotifySettings }> => parseNotifyWithSecrets(raw, env);
  return readSettingsFile(path.resolve(file), parse);
}

/**
 * The notifications `TREADLE_NOTIFY` names, or undefined when it is unset or empty (no webhooks). A file that
 * cannot be read or holds anything wrong, or a `TREADLE_UI_URL` that is no address, is a configuration error
 * listing every problem.
 */
export function notificationsFromEnv(env: NodeJS.ProcessEnv = process.env): WorkerNotifications | undefined {
  const file = env[NOTIFY_ENV]?.trim();
  if (!file) return undefined;
  const parsed = readNotifyFile(file, env);
  const uiUrl = env[UI_URL_ENV]?.trim();
  const problems = parsed.ok ? [] : [...parsed.problems];
  if (uiUrl && !/^https?:\/\/[^\s]+$/i.test(uiUrl))
    problems.push(`${UI_URL_ENV} must be the inbox's http(s) address (e.g. https://inbox.example.com), got "${uiUrl}"`);
  if (!parsed.ok || problems.length > 0) {
    const list = problems.map((problem) => `\n  ${problem}`).join('');
    throw new TreadleError(`${NOTIFY_ENV} names a notifications file that cannot be used:${list}`, 'config', problems);
  }
  return { ...parsed.settings, ...(uiUrl ? { uiUrl } : {}) };
}
