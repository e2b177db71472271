/** The `human` stage kind's worker side: its spec checks (they check `with:`, worker or not); no activities. */
import type { WorkerStageKind } from '../../index';
import { HUMAN_STAGE } from '../shapes';
import { humanSpecChecks } from '../spec-checks';

export const humanWorkerKind: WorkerStageKind = {
  name: HUMAN_STAGE,
  callsModels: false,
  specChecks: humanSpecChecks,
  activities: () => ({}),
};
