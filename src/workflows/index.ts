/** Every workflow the Treadle worker runs. */
export { workItem } from './work-item';
export { tddNode } from './tdd-node';
export { loopStage } from './loop-stage';
export { reviewSignal, resolveReviewUpdate, stateQuery } from './messages';
