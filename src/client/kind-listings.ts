/**
 * How each decision kind is found and read in a listing (see decision-listing.ts): the one list decisions.ts
 * reaches the kinds' listings through, so the listing never names a kind. A work item's own reviews (`review`,
 * `budget`) come first and take what no kind claims; every other kind's listing lives in its folder,
 * `src/kinds/<kind>/client-listing.ts`. The order is the query's and the listing's: keep it.
 */
import type { KindListing } from './decision-listing';
import { itemListing } from './item-listing';
import { approvalListing } from '../kinds/approval/client-listing';
import { tddListing } from '../kinds/tdd/client-listing';
import { loopListing } from '../kinds/loop/client-listing';

/** The listings of every decision kind, each kind in exactly one. */
export const KIND_LISTINGS: readonly KindListing[] = [itemListing, approvalListing, tddListing, loopListing];
