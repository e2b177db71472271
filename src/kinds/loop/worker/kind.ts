/** The `loop` stage kind's worker side: its `with:` check and its activities (iterations, queue checks, state.json). */
import type { WorkerStageKind } from '../../index';
import type * as Activities from './activities';
import { LOOP_STAGE } from '../shapes';
import type * as Spec from '../spec';

// Loaded on first use (lint allows `require` in a kind's worker row): the CLI reads this row (the kind's name)
// to check specs without loading the zod schema of its `with:` unless a spec names it, nor worker code.
const specModule = (): typeof Spec => require('../spec');
const activitiesModule = (): typeof Activities => require('./activities');

export const loopWorkerKind: WorkerStageKind = {
  name: LOOP_STAGE,
  checkConfig: (config) => specModule().checkLoopStageConfig(config),
  callsModels: true,
  activities: ({ blobs, agents, callLog, blobThresholdBytes }) =>
    activitiesModule().createLoopActivities({ blobs, agents, ...(callLog ? { callLog } : {}), blobThresholdBytes }),
};
