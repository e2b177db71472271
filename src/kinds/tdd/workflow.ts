/**
 * The `tddNode` workflow: one execution per Spec of a V3 TDD tree (seed 001). It walks the seed's graph —
 * Scaffold → Fork (TDDWriteTests ∥ ImplBarrier, children as child workflows) → Impl (self-loop, at most 5
 * attempts) → TDDReviewImpl → Merger, with Rebaser on a sibling's merge — performing what the pure routing
 * functions in `kinds/tdd/routes.ts` decide. Each graph node is one activity call (registered in `kinds/tdd/worker/activities.ts`, run by `worker/node-call.ts`);
 * what the agents read travels by reference (the seed's envelope pattern).
 *
 * Children merge into their parent's branch, in the parent's worktree, which only the parent may touch
 * while it works: a child asks (`tddMergeRequest`), the parent judges the child's diff against the criteria
 * it assigned (parent-as-judge, its TDDReviewImpl) at a moment its worktree is idle, then grants
 * (`tddMergeGrant`) and waits until the child's Merger is done (`tddMergeDone`), and tells the other running
 * children (`tddSiblingMerged`), which rebase before their next step (`kinds/tdd/merge-handshake.ts`).
 *
 * Humans: `ClarificationNeeded`, `Stuck` (also a `RequestRetry` at the last attempt, and the bounds on review
 * rounds and scaffold reruns) and a reviewer's `Reject` wait in the same review queue as stage reviews
 * (`treadle reviews`, the `resolveReview` update or the `review` signal): an approval with a note or an edit
 * is the answer (clarification → Scaffold again; guidance → Impl again), a rejection aborts
 * (`kinds/tdd/human-review.ts`).
 *
 * The function is a short shell over `TddNodeRun` (`kinds/tdd/node-run.ts`), which keeps the node's state and
 * handlers and walks the graph.
 */
import type { TddNodeInput, TddNodeResult } from './shapes';
import { TddNodeRun } from './node-run';

export { TDD_PIPELINE_NAME } from './node-publishing';

/** Runs one node of a TDD tree; see the module comment. */
export async function tddNode(input: TddNodeInput): Promise<TddNodeResult> {
  const run = new TddNodeRun(input);
  // Before the first await, so no message is dropped.
  run.registerHandlers();
  return run.run();
}
