/**
 * `treadle limits`: the model capacity limiters running now (issue 39, docs/cli.md), one row per scope (provider,
 * model, API key id) with its use against each limit, a provider's slow-down, the calls waiting by priority and
 * fairness key, and the limit that holds them back. Read through the SDK (`client.limits.list()`).
 */
import type { Command } from 'commander';
import { describeUsage, type UsageSnapshot, type WaitingClass } from '../capacity/shapes';
import type { LimiterUsage } from '../client/capacity';
import { table } from './render';
import type { WithClient } from './with-client';

/** `5 (priority 1 acme: 2, priority 3: 3)`: the calls waiting, by class; empty when none waits. */
export function describeWaiting(waiting: WaitingClass[]): string {
  const total = waiting.reduce((sum, w) => sum + w.calls, 0);
  if (total === 0) return '';
  const classes = waiting.map((w) => `priority ${w.priority}${w.fairnessKey ? ` ${w.fairnessKey}` : ''}: ${w.calls}`);
  return `${total} (${classes.join(', ')})`;
}

/** The limits holding waiting calls back, as the limits file names them (`concurrency`, `tokens_per_minute`). */
export function describeBinding(usage: UsageSnapshot): string {
  return [...new Set(usage.waiting.map((w) => w.binds))].join(', ');
}

/** The table `treadle limits` prints: the use last and never cut (it is what the command is for; a long line wraps). */
export function renderLimits(limiters: LimiterUsage[]): string {
  const rows = limiters.map((l) => [
    l.provider,
    l.model,
    l.keyId,
    l.usage ? describeWaiting(l.usage.waiting) : '?',
    l.usage ? describeBinding(l.usage) : '?',
    l.usage ? describeUsage(l.usage) : `no answer: ${l.error ?? '?'}`,
  ]);
  return table(['PROVIDER', 'MODEL', 'KEY', 'WAITING', 'BINDS', 'IN USE'], rows, Number.MAX_SAFE_INTEGER);
}

/** Registers `treadle limits`. */
export function registerLimitsCommand(program: Command, withClient: WithClient): void {
  program
    .command('limits')
    .description(
      'model capacity now: each running limit (provider, model, key) with calls in flight, requests and tokens this minute, slow-downs and the calls waiting',
    )
    .option('--json', 'as JSON: [{ workflowId, provider, model, keyId, usage?, error? }]')
    .action(
      withClient(async (client, opts: { json?: boolean }) => {
        const limiters = await client.limits.list();
        if (opts.json) process.stdout.write(`${JSON.stringify(limiters, null, 2)}\n`);
        else if (limiters.length === 0)
          process.stdout.write(
            'no limiter is running: one starts with the first model call a worker makes under a limits file (docs/configuration.md)\n',
          );
        else process.stdout.write(`${renderLimits(limiters)}\n`);
        // A limiter that gave no answer is not "within its limits": say so and fail, as `status` does without a worker.
        const unanswered = limiters.filter((l) => !l.usage);
        for (const l of unanswered) process.stderr.write(`treadle: ${l.workflowId}: ${l.error ?? 'no answer'}\n`);
        if (unanswered.length) process.exitCode = 1;
      }),
    );
}
