/**
 * The `fan_out` stage kind's worker side: its activities (the children's pipeline and elements, by
 * reference). Its `with:` (and element stage) is checked by the pipeline validation itself, against the
 * same implementations and with or without a worker (`fanOutSpecChecks`, src/kinds/pipeline.ts), so it has no
 * config check of its own.
 */
import type { WorkerStageKind } from '../../index';
import type * as Activities from './activities';
import { FAN_OUT_STAGE } from '../shapes';

/** Its activities' module, loaded when a worker registers them: the CLI reads this row without worker code. */
const activitiesModule = (): typeof Activities => require('./activities');

export const fanOutWorkerKind: WorkerStageKind = {
  name: FAN_OUT_STAGE,
  callsModels: false,
  activities: ({ blobs, registry }) => activitiesModule().createFanOutActivities({ blobs, known: registry.names() }),
};
