/**
 * How one run of the Claude Code CLI ended and what it printed: its JSON result (`--output-format json`),
 * read leniently, and the usage it reports.
 */
import { z } from 'zod';
import type { AgentUsage } from './types';

/** The final `result` message the CLI prints with `--output-format json`; unknown fields are ignored. */
const CliResultSchema = z.object({
  type: z.literal('result'),
  subtype: z.string().optional(),
  is_error: z.boolean().optional(),
  result: z.string().optional(),
  session_id: z.string().optional(),
  usage: z
    .object({
      input_tokens: z.number().optional(),
      output_tokens: z.number().optional(),
      cache_read_input_tokens: z.number().optional(),
    })
    .optional(),
  total_cost_usd: z.number().optional(),
  duration_ms: z.number().optional(),
});
export type CliResult = z.infer<typeof CliResultSchema>;

/** How one run of the CLI ended. */
export type CliOutcome =
  | { kind: 'exited'; code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }
  | { kind: 'spawn-failed'; error: NodeJS.ErrnoException; synchronous: boolean }
  | { kind: 'aborted' }
  | { kind: 'timed-out' };

/** A resumed call that exited with an error and printed no result: the CLI could not load the session. */
export function sessionNotResumed(outcome: CliOutcome): boolean {
  return outcome.kind === 'exited' && outcome.code !== 0 && !parseCliOutput(outcome.stdout).ok;
}

/** Reads the CLI's JSON result; tolerates a message array (`--verbose`) and stray lines before the JSON. */
export function parseCliOutput(stdout: string): { ok: true; value: CliResult } | { ok: false; reason: string } {
  const trimmed = stdout.trim();
  if (trimmed === '') return { ok: false, reason: 'stdout is empty' };
  const candidates = [trimmed, lastLine(trimmed)].filter((c): c is string => c !== undefined);
  let reason = 'not JSON';
  for (const candidate of candidates) {
    let value: unknown;
    try {
      value = JSON.parse(candidate);
    } catch {
      continue;
    }
    const message: unknown = Array.isArray(value) ? [...(value as unknown[])].reverse().find(isResultMessage) : value;
    const parsed = CliResultSchema.safeParse(message);
    if (parsed.success) return { ok: true, value: parsed.data };
    reason = `JSON without a result message: ${parsed.error.issues[0]?.message ?? 'unexpected shape'}`;
  }
  return { ok: false, reason };
}

function isResultMessage(value: unknown): boolean {
  return typeof value === 'object' && value !== null && (value as { type?: unknown }).type === 'result';
}

/** The tokens a result reports, as whole non-negative counts. */
export function usageOf(result: CliResult): AgentUsage {
  const count = (n: number | undefined): number => Math.max(0, Math.round(n ?? 0));
  return {
    inputTokens: count(result.usage?.input_tokens),
    outputTokens: count(result.usage?.output_tokens),
    cacheReadTokens: count(result.usage?.cache_read_input_tokens),
  };
}

/** The last non-empty line of a text, trimmed. */
export function lastLine(text: string): string | undefined {
  return text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l !== '')
    .pop();
}
