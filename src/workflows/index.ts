/**
 * Every workflow the Treadle worker runs.
 *
 * Versioning behaviour on a versioned worker (docs/deploy.md, "Upgrading workers with Worker Deployment
 * Versioning"): the work item and its children (fan-outs, TDD nodes, loop stages) declare none and take the
 * worker's default, PINNED unless `TREADLE_VERSIONING_BEHAVIOR=auto-upgrade`: an item finishes on the build it
 * started on, so a build's code may go once its version drains. Its children start on the parent's version. The
 * shared limiter and notifier, which serve every build's items, declare AUTO_UPGRADE.
 */
export { workItem } from './work-item';
export { tddNode, loopStage, fanOut } from '../kinds/workflow-table';
export { reviewSignal, resolveReviewUpdate, stateQuery } from '../workflow-kit/messages';
export { treadleLimiter } from '../capacity/workflow';
export { treadleNotifier } from '../notify/workflow';
