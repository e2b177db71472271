/**
 * What the spec validation asks of an approval stage without loading the kind's config schema (which the worker
 * table's row loads when a worker checks `with:`): the action type it requests, which a worker's action catalog
 * must have, and the activities that run it, which follow the stage's queue when this worker lacks the action.
 */
import type { KindSpecChecks } from '../../model/pipeline-shapes';
import type { Json } from '../../model/shapes';
import { APPROVAL_CREATE_ACTIVITY, APPROVAL_EXECUTE_ACTIVITY, APPROVAL_STAGE } from './shapes';

/** The action type an approval stage requests (`with: { action }`), when it names one. */
function actionOf(config: Json | undefined): string | undefined {
  const action = typeof config === 'object' && config !== null && !Array.isArray(config) ? config.action : undefined;
  return typeof action === 'string' && action !== '' ? action : undefined;
}

/** The approval kind's spec checks (its worker row's `specChecks`, read by src/kinds/pipeline.ts). */
export const approvalSpecChecks: KindSpecChecks = {
  name: APPROVAL_STAGE,
  // `with:` is the worker's to check (its row's schema, through the worker table).
  configProblems: () => [],
  attemptEvents: 0,
  actionOf,
  actionActivities: [APPROVAL_CREATE_ACTIVITY, APPROVAL_EXECUTE_ACTIVITY],
};
