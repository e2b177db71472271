/**
 * A work item's own decisions in a listing (see decision-listing.ts): its stage reviews, `review` and `budget`,
 * from the `treadleReviews` memo and `TreadlePendingReviews`. Its entry (`itemClient`, item-decisions.ts) is first
 * in the table of kind-clients.ts, so it takes every review entry and pending stage no kind claims.
 */
import { PENDING_STAGES_CLAUSE, partialStageDecision, reviewEntryDecision, type KindListing } from './decision-listing';

/** A work item's stage reviews: `budget` when the token budget is spent, else `review`. */
export const itemListing: KindListing = {
  clauses: [PENDING_STAGES_CLAUSE],
  fromReview(source, review) {
    return reviewEntryDecision(
      source,
      review,
      review.reason === 'budget_exhausted' ? 'budget' : 'review',
      review.reason,
    );
  },
  fromPendingStage(source, stage) {
    return partialStageDecision(source, stage, 'review', 'unknown');
  },
};
