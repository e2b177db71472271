/**
 * The inbox list's query parameters as a {@link DecisionFilter} (shared by the JSON list and the HTML page) and
 * a page size; a parameter it cannot read is a {@link FilterError}, which both answer with 400.
 */
import { DECISION_KINDS, parseAge, type DecisionFilter, type DecisionKind } from '../model/decisions';

/** A query-string filter the server cannot read. */
export class FilterError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FilterError';
  }
}

/** The page's choices for `age` (waiting at least this long), shortest first; the API takes any `<n>m|h|d`. */
export const AGE_CHOICES = ['15m', '1h', '4h', '1d'] as const;
/** The `age` choice for decisions past their deadline (`review_sla`), last in the page's Waiting filter. */
export const OVERDUE = 'overdue';

/**
 * The filter in `q` (`kind` a comma-separated list, `pipeline`, `reviewers`, `age` such as `15m`, `2h` or `1d`, or
 * `overdue`, `text`); throws {@link FilterError}.
 */
export function parseFilter(q: Record<string, string | undefined>): DecisionFilter {
  const kinds = q.kind ? q.kind.split(',') : undefined;
  const unknown = kinds?.find((k) => !(DECISION_KINDS as readonly string[]).includes(k));
  if (unknown) throw new FilterError(`unknown decision kind ${JSON.stringify(unknown)}`);
  return {
    ...(kinds ? { kinds: kinds as DecisionKind[] } : {}),
    ...(q.pipeline ? { pipeline: q.pipeline } : {}),
    ...(q.reviewers ? { reviewers: q.reviewers } : {}),
    ...(q.age === OVERDUE ? { overdue: true } : q.age ? { olderThanMs: ageMs(q.age) } : {}),
    ...(q.text ? { text: q.text } : {}),
  };
}

/** `15m`, `2h`, `1d` in milliseconds; anything else is a {@link FilterError}. */
export function ageMs(age: string): number {
  const ms = parseAge(age);
  if (ms === undefined) {
    throw new FilterError(
      `age is how long a decision has waited, in minutes, hours or days (15m, 2h, 1d), or overdue, got ${JSON.stringify(age.slice(0, 40))}`,
    );
  }
  return ms;
}

/** The `limit` query parameter: absent, or a whole number (the index keeps it between 1 and its maximum). */
export function parseLimit(value: string | undefined): number | undefined {
  if (value === undefined || value === '') return undefined;
  if (!/^\d{1,9}$/.test(value)) {
    throw new FilterError(`limit must be a whole number of decisions, got ${JSON.stringify(value.slice(0, 40))}`);
  }
  return Number(value);
}
