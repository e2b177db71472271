/**
 * Summary statistics for benchmark samples: nearest-rank percentiles over milliseconds, rounded so the
 * results files stay readable.
 */

/** p50/p95/p99 (nearest rank), mean, min, max and the sample count. */
export interface Distribution {
  n: number;
  p50: number;
  p95: number;
  p99: number;
  mean: number;
  min: number;
  max: number;
}

/** Rounds to `digits` decimals (results are compared by people, not bits). */
export function round(value: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

/** The nearest-rank percentile `p` (0–100) of sorted samples; NaN when there are none. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(rank, sorted.length) - 1]!;
}

/** Summarises samples; an empty list gives zeros with n = 0. */
export function distribution(samples: readonly number[]): Distribution {
  if (samples.length === 0) return { n: 0, p50: 0, p95: 0, p99: 0, mean: 0, min: 0, max: 0 };
  const sorted = [...samples].sort((a, b) => a - b);
  const mean = sorted.reduce((sum, x) => sum + x, 0) / sorted.length;
  return {
    n: sorted.length,
    p50: round(percentile(sorted, 50)),
    p95: round(percentile(sorted, 95)),
    p99: round(percentile(sorted, 99)),
    mean: round(mean),
    min: round(sorted[0]!),
    max: round(sorted[sorted.length - 1]!),
  };
}

/** `a / b`, rounded; null when `b` is zero (a ratio that means nothing is not printed as Infinity). */
export function ratio(a: number, b: number): number | null {
  return b === 0 ? null : round(a / b, 3);
}

/** Median of numbers (for per-item values such as history sizes). */
export function median(values: readonly number[]): number {
  return percentile(
    [...values].sort((a, b) => a - b),
    50,
  );
}

/**
 * The first and third quartiles (nearest rank) of numbers: the middle half of the samples lies between them,
 * which says how far one round's ratio may stray from the median on this machine.
 */
export function quartiles(values: readonly number[]): [number, number] {
  const sorted = [...values].sort((a, b) => a - b);
  return [percentile(sorted, 25), percentile(sorted, 75)];
}

/**
 * The mean of numbers and its standard error (sample standard deviation ÷ √n): how far the mean of this
 * many rounds may stray from the mean of many more. Null with fewer than two values.
 */
export function meanWithStandardError(values: readonly number[]): { mean: number; standardError: number } | null {
  if (values.length < 2) return null;
  const mean = values.reduce((sum, x) => sum + x, 0) / values.length;
  const variance = values.reduce((sum, x) => sum + (x - mean) ** 2, 0) / (values.length - 1);
  return { mean, standardError: Math.sqrt(variance / values.length) };
}
