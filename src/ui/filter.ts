/**
 * The inbox list's query parameters as a {@link DecisionFilter} (shared by the JSON list and the HTML page) and
 * a page size; a parameter it cannot read is a {@link FilterError}, which both answer with 400.
 */
import { DECISION_KINDS, type DecisionFilter, type DecisionKind } from '../model/decisions';

/** A query-string filter the server cannot read. */
export class FilterError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FilterError';
  }
}

/** The filter in `q` (`kind` a comma-separated list, `pipeline`, `reviewers`, `text`); throws {@link FilterError}. */
export function parseFilter(q: Record<string, string | undefined>): DecisionFilter {
  const kinds = q.kind ? q.kind.split(',') : undefined;
  const unknown = kinds?.find((k) => !(DECISION_KINDS as readonly string[]).includes(k));
  if (unknown) throw new FilterError(`unknown decision kind ${JSON.stringify(unknown)}`);
  return {
    ...(kinds ? { kinds: kinds as DecisionKind[] } : {}),
    ...(q.pipeline ? { pipeline: q.pipeline } : {}),
    ...(q.reviewers ? { reviewers: q.reviewers } : {}),
    ...(q.text ? { text: q.text } : {}),
  };
}

/** The `limit` query parameter: absent, or a whole number (the index keeps it between 1 and its maximum). */
export function parseLimit(value: string | undefined): number | undefined {
  if (value === undefined || value === '') return undefined;
  if (!/^\d{1,9}$/.test(value)) {
    throw new FilterError(`limit must be a whole number of decisions, got ${JSON.stringify(value.slice(0, 40))}`);
  }
  return Number(value);
}
