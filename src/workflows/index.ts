/** Every workflow the Treadle worker runs. */
export { workItem } from './work-item';
export { tddNode } from '../kinds/tdd/workflow';
export { loopStage } from '../kinds/loop/workflow';
export { fanOut } from '../kinds/fan-out/workflow';
export { reviewSignal, resolveReviewUpdate, stateQuery } from '../workflow-kit/messages';
