/**
 * `treadle calls`: the cross-run LLM call log (seed 003's `llm_call_log`), grouped by model, provider,
 * pipeline or stage, with counts, errors, tokens, latency percentiles and estimated cost. Reads the SQLite
 * file (`TREADLE_CALL_LOG`) directly: no server, no worker.
 */
import type { Command } from 'commander';
import { existsSync } from 'node:fs';
import { parseDuration } from '../model/duration';
import { loadConfig } from '../config';
import type { CallGrouping, CallSummary } from '../storage/call-log';
import type * as CallLogModule from '../storage/call-log';
import { table } from './render';

const GROUPINGS: CallGrouping[] = ['model', 'provider', 'pipeline', 'stage'];

export function registerCallsCommand(program: Command): void {
  program
    .command('calls')
    .description('model calls across runs (the call log): counts, errors, tokens, latency and estimated cost')
    .option('--since <duration>', 'only calls of the last DURATION (24h, 7d, 30m)')
    .option('--pipeline <name>', "only this pipeline's calls")
    .option('--by <group>', `group by ${GROUPINGS.join(' | ')}`, 'model')
    .option('--json', 'as JSON: { groups: [...], total: {...} }')
    .action((opts: { since?: string; pipeline?: string; by: string; json?: boolean }) => {
      if (!GROUPINGS.includes(opts.by as CallGrouping))
        throw new Error(`--by must be one of ${GROUPINGS.join(', ')}, got "${opts.by}"`);
      let since: Date | undefined;
      if (opts.since !== undefined) {
        const parsed = parseDuration(opts.since);
        if ('error' in parsed) throw new Error(`--since: ${parsed.error}`);
        since = new Date(Date.now() - parsed.ms);
      }
      const file = loadConfig().callLog;
      if (file === null) throw new Error('the call log is off (TREADLE_CALL_LOG=off)');
      if (!existsSync(file))
        throw new Error(
          `no call log at ${file} yet: workers write it when they make model calls (set TREADLE_CALL_LOG to read another)`,
        );
      // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded only by this command (native module)
      const { SqliteCallLog } = require('../storage/call-log') as typeof CallLogModule;
      const log = new SqliteCallLog(file);
      try {
        const summary = log.summarize(opts.by as CallGrouping, {
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
      } finally {
        log.close();
      }
    });
}
