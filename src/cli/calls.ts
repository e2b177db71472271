/**
 * `treadle calls`: the cross-run LLM call log (seed 003's `llm_call_log`), grouped by model, provider,
 * pipeline or stage, with counts, errors, tokens, latency percentiles and estimated cost; `treadle calls
 * prune` deletes old rows. Reads the log `TREADLE_CALL_LOG` names (a SQLite file or a PostgreSQL URL)
 * directly: no Temporal server, no worker.
 */
import { Option, type Command } from 'commander';
import { existsSync } from 'node:fs';
import { loadConfig } from '../config';
import type { CallGrouping, CallLog, CallSummary } from '../storage/call-log';
import { describeCallLog, isPostgresUrl, openCallLog } from '../storage/open-call-log';
import { duration } from './arguments';
import { table } from './render';

const GROUPINGS: CallGrouping[] = ['model', 'provider', 'pipeline', 'stage'];

/** Registers `calls` and `calls prune`. */
export function registerCallsCommand(program: Command): void {
  const calls = program
    .command('calls')
    .description('model calls across runs (the call log): counts, errors, tokens, latency and estimated cost')
    .option('--since <duration>', 'only calls of the last DURATION (24h, 7d, 30m)', duration)
    .option('--pipeline <name>', "only this pipeline's calls")
    .addOption(new Option('--by <group>', 'group by').choices(GROUPINGS).default('model'))
    .option('--json', 'as JSON: { groups: [...], total: {...} }')
    .action(async (opts: { since?: number; pipeline?: string; by: CallGrouping; json?: boolean }) => {
      const since = opts.since !== undefined ? new Date(Date.now() - opts.since) : undefined;
      await withCallLog(async (log) => {
        const summary = await log.summarize(opts.by, {
          ...(since ? { since } : {}),
          ...(opts.pipeline !== undefined ? { pipeline: opts.pipeline } : {}),
        });
        if (opts.json) {
          process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
          return;
        }
        if (summary.total.calls === 0) {
          process.stdout.write('no calls\n');
          return;
        }
        const row = (s: CallSummary): string[] => [
          s.group,
          String(s.calls),
          String(s.errors),
          String(s.inputTokens),
          String(s.outputTokens),
          `${s.latencyMs.p50} / ${s.latencyMs.p95} / ${s.latencyMs.max}`,
          s.estimatedCostUsd === null ? 'unknown' : `$${s.estimatedCostUsd.toFixed(4)}`,
        ];
        process.stdout.write(
          `${table([opts.by.toUpperCase(), 'CALLS', 'ERRORS', 'IN TOKENS', 'OUT TOKENS', 'LATENCY P50/P95/MAX MS', 'COST'], [...summary.groups.map(row), row(summary.total)])}\n`,
        );
      });
    });

  calls
    .command('prune')
    .description('delete the calls that started more than DURATION ago from the call log')
    .requiredOption('--before <duration>', 'the age of the oldest calls kept (90d, 720h)', duration)
    .action(async (opts: { before: number }) => {
      const before = new Date(Date.now() - opts.before);
      await withCallLog(async (log) => {
        const deleted = await log.prune(before);
        process.stdout.write(`deleted ${deleted} calls from before ${before.toISOString()}\n`);
      });
    });
}

/** Opens the configured call log for one command, and closes it after. */
async function withCallLog(use: (log: CallLog) => Promise<void>): Promise<void> {
  const setting = loadConfig().callLog;
  if (setting === null) throw new Error('the call log is off (TREADLE_CALL_LOG=off)');
  if (!isPostgresUrl(setting) && !existsSync(setting))
    throw new Error(
      `no call log at ${setting} yet: workers write it when they make model calls (set TREADLE_CALL_LOG to read another)`,
    );
  const log = openCallLog(setting);
  try {
    await use(log);
  } catch (error) {
    // A database error names the log; nothing here may print its password.
    const where = describeCallLog(setting);
    const message = (error as Error).message.split(setting).join(where);
    throw new Error(message.includes(where) ? message : `call log ${where}: ${message}`, { cause: error });
  } finally {
    await log.close();
  }
}
