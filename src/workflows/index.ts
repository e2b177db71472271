/** Every workflow the Treadle worker runs. */
export { workItem } from './work-item';
export { tddNode } from './tdd-node';
export { reviewSignal, resolveReviewUpdate, stateQuery } from './messages';
