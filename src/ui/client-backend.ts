/**
 * The review inbox's backend in production: the client SDK. Listing, the delta listing, the detail view,
 * deciding, the edit check, cancelling and the evaluations' records are all `TreadleClient` calls, so the page decides through exactly the
 * validated updates the CLI sends.
 */
import type { TreadleClient } from '../client';
import type { InboxBackend } from './backend';

export function clientBackend(client: TreadleClient): InboxBackend {
  return {
    list: () => client.listPendingDecisions(),
    changes: (since) => client.listDecisionChanges(since),
    detail: (key, options) => client.decisionDetail(key, options),
    decide: (key, answer, reviewer, group) => client.decide(key, answer, reviewer, group ? { group } : {}),
    checkEdit: (key, artefact) => client.checkEdit(key, artefact),
    cancel: (itemId, by, reason) => client.cancel(itemId, { by, ...(reason ? { reason } : {}) }),
    fork: (itemId, options) => client.items.fork(itemId, options),
    evalRuns: () => client.evals.list(),
    evalRun: (run) => client.evals.show(run),
  };
}
