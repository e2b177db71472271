/**
 * Durations in pipeline specs: a number of milliseconds, or a string such as `500ms`, `30s`, `5m`, `2h`,
 * `1d`, or a combination (`1m30s`). Parsed once at validation time so workflow code only sees numbers.
 */

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const PART = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/g;
const WHOLE = /^(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+$/;

/** Parses a duration; returns the milliseconds, or an error message naming the bad value. */
export function parseDuration(value: unknown): { ms: number } | { error: string } {
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || value < 0)
      return { error: `duration must be a non-negative number of ms, got ${value}` };
    return { ms: Math.round(value) };
  }
  if (typeof value !== 'string')
    return { error: `duration must be a string like "30s" or a number of ms, got ${typeof value}` };
  const text = value.trim();
  if (!WHOLE.test(text)) return { error: `"${value}" is not a duration (use e.g. 500ms, 30s, 5m, 2h, 1d or 1m30s)` };
  let ms = 0;
  for (const match of text.matchAll(PART)) ms += Number(match[1]) * (UNIT_MS[match[2] ?? 'ms'] ?? 1);
  return { ms: Math.round(ms) };
}

/** Formats milliseconds for humans: `850ms`, `30s`, `2m5s`, `1h`. */
export function formatDuration(ms: number): string {
  if (ms < 1_000) return `${ms}ms`;
  if (ms < 60_000 && ms % 1_000 !== 0) return `${Math.round(ms / 100) / 10}s`;
  const parts: string[] = [];
  let rest = Math.round(ms / 1_000);
  for (const [unit, size] of [
    ['d', 86_400],
    ['h', 3_600],
    ['m', 60],
    ['s', 1],
  ] as const) {
    if (rest >= size) {
      parts.push(`${Math.floor(rest / size)}${unit}`);
      rest %= size;
    }
  }
  return parts.join('');
}
