/**
 * The table of kinds on the client's side (see `KindClient` in decision-kind.ts): one entry per kind whose
 * workflows wait on a person, each made in the kind's folder (`src/kinds/<kind>/client.ts`), so the listing
 * (decisions.ts), the answers (decide.ts) and the detail view (decision-detail.ts) never name a kind. A work
 * item's own stage reviews (`review`, `budget`, item-decisions.ts) are the first entry: they take every review
 * entry and pending stage no kind claims. The order is the query's and the listing's: keep it.
 */
import type { DecisionKind } from '../model/decisions';
import type { KindClient, KindDecisions } from './decision-kind';
import { itemClient } from './item-decisions';
import { approvalClient } from '../kinds/approval/client';
import { tddClient } from '../kinds/tdd/client';
import { loopClient } from '../kinds/loop/client';
import { humanClient } from '../kinds/human/client';

/** Every kind whose decisions a person answers; each decision kind is listed by exactly one entry. */
export const KIND_CLIENTS: readonly KindClient[] = [itemClient, approvalClient, tddClient, loopClient, humanClient];

/** The answers of decision kind `kind`: those of the entry that lists it. */
export function kindAnswers(kind: DecisionKind): KindDecisions {
  const entry = KIND_CLIENTS.find((client) => client.kinds.includes(kind));
  // Only a new decision kind left out of the table gets here (test/unit/kind-listings.test.ts checks it).
  if (!entry) throw new Error(`no entry of KIND_CLIENTS (src/client/kind-clients.ts) lists decision kind ${kind}`);
  return entry.answers;
}
