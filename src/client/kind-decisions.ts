/**
 * Which answers each decision kind has (see decision-kind.ts): the one list the client reaches a kind's decision
 * logic through, so `decide`, `decisionDetail` and `checkEdit` never branch on a kind's name. A work item's own
 * stage reviews (`review`, `budget`) are answered here in the client; every other kind's answers live in its
 * folder, `src/kinds/<kind>/client.ts`.
 */
import type { DecisionKind } from '../model/decisions';
import type { KindDecisions } from './decision-kind';
import { itemDecisions } from './item-decisions';
import { approvalDecisions } from '../kinds/approval/client';
import { tddDecisions } from '../kinds/tdd/client';
import { loopDecisions } from '../kinds/loop/client';

/** The answers of each decision kind. */
export const KIND_DECISIONS: Readonly<Record<DecisionKind, KindDecisions>> = {
  review: itemDecisions,
  budget: itemDecisions,
  approval: approvalDecisions,
  tdd: tddDecisions,
  loop: loopDecisions,
};
