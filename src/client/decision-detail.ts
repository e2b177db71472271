/**
 * What the review inbox's detail view shows for one pending decision (issue 27): the item's stage table, every
 * attempt with its verdict and artefact, the approval's payload, a TDD node's diff and test output, a loop's
 * failure, progress.md and last iterations. Each kind says what (its entry in kind-clients.ts); read from the workflow's
 * state query, or, when no worker answers it, from the visibility listing alone (`live: false`).
 */
import type { DecisionDetail } from '../model/decisions';
import type { DecisionContext, DetailOptions } from './decision-kind';
import { kindAnswers } from './kind-clients';
import { decisionOf } from './decide';

export type { DetailOptions } from './decision-kind';

/**
 * The detail of the pending decision `key` (see `TreadleClient.decisionDetail`). Rejects with `not_found`
 * when its workflow does not exist or no longer waits on it, `invalid_review` for a string that is not a key.
 */
export async function decisionDetail(
  ctx: DecisionContext,
  key: string,
  options: DetailOptions = {},
): Promise<DecisionDetail> {
  const { kind, ...target } = decisionOf(key);
  return kindAnswers(kind).detail({ ...ctx, ...target, options });
}
