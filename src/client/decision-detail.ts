/**
 * What the review inbox's detail view shows for one pending decision (issue 27): the item's stage table, every
 * attempt with its verdict and artefact, the approval's payload, a TDD node's diff and test output, a loop's
 * failure, progress.md and last iterations.
 */
import { parseDecisionKey, type DecisionDetail } from '../model/decisions';
import { TreadleError } from './errors';
import type { DecideContext } from './decide';

export async function decisionDetail(_context: DecideContext, key: string): Promise<DecisionDetail> {
  const parsed = parseDecisionKey(key);
  if (!parsed) throw new TreadleError(`"${key}" is not a decision key`, 'invalid_review');
  throw new TreadleError('decisionDetail is being written (issue 27)', 'invalid_review');
}
