/** Every workflow the Treadle worker runs. */
export { workItem } from './work-item';
export { reviewSignal, resolveReviewUpdate, stateQuery } from './messages';
