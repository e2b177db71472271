/**
 * The inbox list's query parameters as a {@link DecisionFilter}, shared by the JSON list and the HTML page;
 * a parameter it cannot read is a {@link FilterError}, which both answer with 400.
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
