/** Every workflow the Treadle worker runs. */
export { workItem } from './work-item';
export { tddNode, loopStage, fanOut } from '../kinds/workflow-table';
export { reviewSignal, resolveReviewUpdate, stateQuery } from '../workflow-kit/messages';
export { treadleLimiter } from '../capacity/workflow';
export { treadleNotifier } from '../notify/workflow';
