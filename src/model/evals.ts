/**
 * Evaluations (`treadle eval`, issue 42): the dataset's cases, the record of one case on one variant, each
 * variant's aggregates and the comparison of two runs. No I/O here: the client runs evaluations and stores their
 * records (src/client/eval-*.ts), the CLI and the inbox show them.
 */
import type { Json } from './shapes';

/** One line of a dataset (JSONL): the item's input, and what a scorer compares its output with. */
export interface EvalCase {
  /** The case's id (`[A-Za-z0-9_.-]`, at most 64): given, else its line number. */
  id: string;
  input: Json;
  expected?: Json;
}

/** A case id: safe in a workflow id and a URL. */
const CASE_ID = /^[A-Za-z0-9_.-]{1,64}$/;

/**
 * The cases of a JSONL dataset, or every problem with its line number (blank lines are skipped). Each line is
 * `{ "id"?: string, "input": <json>, "expected"?: <json> }`; ids are unique.
 */
export function parseDataset(text: string): { ok: true; cases: EvalCase[] } | { ok: false; problems: string[] } {
  const cases: EvalCase[] = [];
  const problems: string[] = [];
  const seen = new Map<string, number>();
  text.split(/\r?\n/).forEach((line, index) => {
    const lineNo = index + 1;
    if (line.trim() === '') return;
    const problem = (why: string): void => void problems.push(`line ${lineNo}: ${why}`);
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (error) {
      return problem(`not JSON (${(error as Error).message})`);
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value))
      return problem('a case is an object: { "id"?, "input", "expected"? }');
    const { id, input, expected, ...rest } = value as Record<string, Json | undefined>;
    const unknown = Object.keys(rest);
    if (unknown.length > 0) problem(`unknown key${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')}`);
    if (input === undefined) problem('no "input"');
    if (id !== undefined && (typeof id !== 'string' || !CASE_ID.test(id)))
      problem('"id" must be 1 to 64 letters, digits, "_", "." or "-"');
    const caseId = typeof id === 'string' ? id : String(lineNo);
    const first = seen.get(caseId);
    if (first !== undefined) problem(`case id "${caseId}" is also on line ${first}`);
    else seen.set(caseId, lineNo);
    cases.push({ id: caseId, input: input ?? null, ...(expected !== undefined ? { expected } : {}) });
  });
  if (problems.length > 0) return { ok: false, problems };
  if (cases.length === 0) return { ok: false, problems: ['the dataset has no cases'] };
  return { ok: true, cases };
}

/** How human decisions in an evaluation's items are answered: approved, rejected, or left to people. */
export type EvalPolicy = 'approve' | 'reject' | 'wait';
export const EVAL_POLICIES: readonly EvalPolicy[] = ['approve', 'reject', 'wait'];
/** The reviewer the policy answers as, so the audit tells its decisions from people's. */
export const EVAL_POLICY_REVIEWER = 'eval-policy';

/** What came of one case on one variant. */
export interface EvalCaseRecord {
  caseId: string;
  variant: string;
  itemId: string;
  outcome: 'completed' | 'failed' | 'cancelled';
  /** The gates' verdicts over every attempt of every stage. */
  verdicts: { passed: number; rejected: number; uncertain: number };
  /** Attempts over every stage. */
  attempts: number;
  /** Human decisions the item needed: reviews, approval requests and human steps. */
  escalations: number;
  tokens: { input: number; output: number };
  /** Estimated cost in USD; null when a model's price is unknown. */
  costUsd: number | null;
  /** From the item's start to its close. */
  wallMs: number;
  /** 0..1, or null when the scorer could not score (`scoreError` says why). */
  score: number | null;
  scoreError?: string;
  /** Completed and scored at least the scorer's pass mark. */
  passed: boolean;
}

/** One variant's aggregates over its cases. */
export interface EvalVariantSummary {
  variant: string;
  cases: number;
  completed: number;
  passed: number;
  /** passed / cases (0 with no cases). */
  passRate: number;
  /** Mean of the scores that are not null; null when none is. */
  meanScore: number | null;
  meanAttempts: number;
  escalations: number;
  tokens: { input: number; output: number };
  /** Total estimated cost; null when any case's is unknown. */
  costUsd: number | null;
  meanWallMs: number;
}

/** A variant: its name and the overrides applied to the spec (none: the spec as written). */
export interface EvalVariant {
  name: string;
  /** The file the overrides came from, as given. */
  file?: string;
  overrides: Json;
}

/** A finished (or resumed and finished) evaluation run: what `eval show`, `compare` and the inbox read. */
export interface EvalRunRecord {
  /** The record's shape; 1 for this one. */
  format: 1;
  run: string;
  pipeline: string;
  scorer: { name: string; passMark: number };
  policy: EvalPolicy;
  variants: EvalVariant[];
  startedAt: string;
  finishedAt: string;
  summaries: EvalVariantSummary[];
  results: EvalCaseRecord[];
}

/** A run as the list of runs shows it (the record without its per-case results and variant overrides). */
export interface EvalRunListing {
  run: string;
  pipeline: string;
  scorer: string;
  finishedAt: string;
  summaries: EvalVariantSummary[];
}

const mean = (values: number[]): number =>
  values.length === 0 ? 0 : values.reduce((a, b) => a + b, 0) / values.length;

/** The aggregates of one variant's records. */
export function summarizeVariant(variant: string, records: readonly EvalCaseRecord[]): EvalVariantSummary {
  const scores = records.map((r) => r.score).filter((s): s is number => s !== null);
  const passed = records.filter((r) => r.passed).length;
  const costs = records.map((r) => r.costUsd);
  return {
    variant,
    cases: records.length,
    completed: records.filter((r) => r.outcome === 'completed').length,
    passed,
    passRate: records.length === 0 ? 0 : passed / records.length,
    meanScore: scores.length === 0 ? null : mean(scores),
    meanAttempts: mean(records.map((r) => r.attempts)),
    escalations: records.reduce((n, r) => n + r.escalations, 0),
    tokens: {
      input: records.reduce((n, r) => n + r.tokens.input, 0),
      output: records.reduce((n, r) => n + r.tokens.output, 0),
    },
    costUsd: costs.some((c) => c === null) ? null : costs.reduce<number>((n, c) => n + c!, 0),
    meanWallMs: mean(records.map((r) => r.wallMs)),
  };
}

/** How one variant changed from run A to run B (B minus A); per-case means, so runs of other sizes compare. */
export interface EvalVariantDelta {
  variant: string;
  a: EvalVariantSummary;
  b: EvalVariantSummary;
  passRate: number;
  meanScore: number | null;
  meanAttempts: number;
  escalationsPerCase: number;
  tokensPerCase: number;
  costPerCase: number | null;
  meanWallMs: number;
  /** B's pass rate is lower than A's by more than the threshold. */
  regressed: boolean;
}

/** The comparison of two runs: each variant both have, and the variants only one has. */
export interface EvalComparison {
  runA: string;
  runB: string;
  threshold: number;
  deltas: EvalVariantDelta[];
  onlyInA: string[];
  onlyInB: string[];
  /** The variants whose pass rate dropped past the threshold (`eval compare` exits 1 when any did). */
  regressions: string[];
}

const perCase = (total: number, cases: number): number => (cases === 0 ? 0 : total / cases);

/** Compares run B with run A; a variant regresses when its pass rate drops by more than `threshold` (0..1). */
export function compareRuns(
  a: Pick<EvalRunListing, 'run' | 'summaries'>,
  b: Pick<EvalRunListing, 'run' | 'summaries'>,
  threshold: number,
): EvalComparison {
  const inB = new Map(b.summaries.map((s) => [s.variant, s]));
  const inA = new Set(a.summaries.map((s) => s.variant));
  // A float margin: 0.9 - 0.85 is 0.05000000000000004, which is no drop "by more than" 0.05.
  const EPSILON = 1e-9;
  const deltas: EvalVariantDelta[] = [];
  for (const sa of a.summaries) {
    const sb = inB.get(sa.variant);
    if (!sb) continue;
    const costA = sa.costUsd === null ? null : perCase(sa.costUsd, sa.cases);
    const costB = sb.costUsd === null ? null : perCase(sb.costUsd, sb.cases);
    deltas.push({
      variant: sa.variant,
      a: sa,
      b: sb,
      passRate: sb.passRate - sa.passRate,
      meanScore: sa.meanScore === null || sb.meanScore === null ? null : sb.meanScore - sa.meanScore,
      meanAttempts: sb.meanAttempts - sa.meanAttempts,
      escalationsPerCase: perCase(sb.escalations, sb.cases) - perCase(sa.escalations, sa.cases),
      tokensPerCase:
        perCase(sb.tokens.input + sb.tokens.output, sb.cases) - perCase(sa.tokens.input + sa.tokens.output, sa.cases),
      costPerCase: costA === null || costB === null ? null : costB - costA,
      meanWallMs: sb.meanWallMs - sa.meanWallMs,
      regressed: sa.passRate - sb.passRate > threshold + EPSILON,
    });
  }
  return {
    runA: a.run,
    runB: b.run,
    threshold,
    deltas,
    onlyInA: a.summaries.filter((s) => !inB.has(s.variant)).map((s) => s.variant),
    onlyInB: b.summaries.filter((s) => !inA.has(s.variant)).map((s) => s.variant),
    regressions: deltas.filter((d) => d.regressed).map((d) => d.variant),
  };
}

/** A run id or variant name: safe in a workflow id and a URL. */
export const EVAL_NAME = /^[A-Za-z0-9_.-]{1,64}$/;

/** The item id of a case on a variant: `eval-<run>-<variant>-<case>`, the same on every rerun of the run. */
export function evalItemId(run: string, variant: string, caseId: string): string {
  return `eval-${run}-${variant}-${caseId}`;
}
