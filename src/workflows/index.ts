/** Every workflow the Treadle worker runs. */
export { workItem } from './work-item';
export { tddNode } from './tdd-node';
export { loopStage } from './loop-stage';
export { fanOut } from './fan-out';
export { reviewSignal, resolveReviewUpdate, stateQuery } from './messages';
