/**
 * `treadle notify test [--webhook <name>]` (docs/notifications.md, docs/cli.md): posts a signed sample to each
 * webhook of the `TREADLE_NOTIFY` file, or the one named, and prints each receiver's answer. Exit 0 when every
 * receiver answered 2xx, 1 when one did not (or did not answer), 2 when the file or the name is wrong.
 */
import type { Command } from 'commander';
import { UsageError } from './exit-codes';
import { load } from './lazy-modules';

/** Registers `treadle notify`. */
export function registerNotifyCommands(program: Command): void {
  const notify = program
    .command('notify')
    .description('webhooks told about decisions and failed items (TREADLE_NOTIFY)');
  notify
    .command('test')
    .description("post a signed sample to each webhook (or the one named) and print the receiver's answer")
    .option('--webhook <name>', 'only this webhook of the notifications file')
    .option('--json', 'as JSON: [{ webhook, url, status?, answer, delivered }]')
    .action(async (opts: { webhook?: string; json?: boolean }) => {
      const { NOTIFY_ENV, notificationsFromEnv } = load.notifySettings();
      const notifications = notificationsFromEnv();
      if (!notifications)
        throw new UsageError(`${NOTIFY_ENV} is not set: name a notifications file (docs/notifications.md)`);
      const webhooks = notifications.webhooks.filter((w) => opts.webhook === undefined || w.name === opts.webhook);
      if (webhooks.length === 0) {
        const names = notifications.webhooks.map((w) => w.name).join(', ') || 'none';
        throw new UsageError(
          opts.webhook === undefined
            ? `${process.env[NOTIFY_ENV]} lists no webhooks; add one under webhooks:`
            : `no webhook "${opts.webhook}" in ${process.env[NOTIFY_ENV]} (its webhooks: ${names})`,
        );
      }
      const results = await load.notifySample().sendSamples(notifications, webhooks);
      if (opts.json) process.stdout.write(`${JSON.stringify(results, null, 2)}\n`);
      else for (const r of results) process.stdout.write(`${r.webhook}: ${r.answer} (${r.url})\n`);
      if (results.some((r) => !r.delivered)) process.exitCode = 1;
    });
}
