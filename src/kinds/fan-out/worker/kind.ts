/**
 * The `fan_out` stage kind's worker side: its activities (the children's pipeline and elements, by
 * reference). Its `with:` (and element stage) is checked by the pipeline validation itself, against the
 * same implementations, so it has no config check of its own.
 */
import type { WorkerStageKind } from '../../index';
import { createFanOutActivities } from './activities';
import { FAN_OUT_STAGE } from '../shapes';

export const fanOutWorkerKind: WorkerStageKind = {
  name: FAN_OUT_STAGE,
  callsModels: false,
  activities: ({ blobs, registry }) => createFanOutActivities({ blobs, known: registry.names() }),
};
