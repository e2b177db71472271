/**
 * The `fan_out` stage kind's worker side: its activities (the children's pipeline and elements, by reference),
 * and its spec checks: its `with:` (and element stage) is checked by the pipeline validation itself, against the
 * same implementations and with or without a worker (`specChecks`, read by src/kinds/pipeline.ts), so it has no
 * config check of its own.
 */
import type { WorkerStageKind } from '../../index';
import type * as Activities from './activities';
import type * as Spec from '../spec';
import { FAN_OUT_ATTEMPT_EVENTS, FAN_OUT_STAGE } from '../shapes';

// Loaded on first use (lint allows `require` in a kind's worker row): the CLI reads this row to check specs
// without loading the zod schema of its `with:` unless a spec names the kind, nor worker code.
const specModule = (): typeof Spec => require('../spec');
const activitiesModule = (): typeof Activities => require('./activities');

export const fanOutWorkerKind: WorkerStageKind = {
  name: FAN_OUT_STAGE,
  callsModels: false,
  specChecks: {
    name: FAN_OUT_STAGE,
    configProblems: (config, validate) => specModule().fanOutConfigProblems(config, validate),
    // Its weight in the work item's history: its start and progress.
    attemptEvents: FAN_OUT_ATTEMPT_EVENTS,
  },
  activities: ({ blobs, registry }) => activitiesModule().createFanOutActivities({ blobs, known: registry.names() }),
};
