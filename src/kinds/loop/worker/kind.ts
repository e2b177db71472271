/** The `loop` stage kind's worker side: its `with:` check and its activities (iterations, queue checks, state.json). */
import type { WorkerStageKind } from '../../index';
import { createLoopActivities } from './activities';
import { checkLoopStageConfig, LOOP_STAGE } from '../spec';

export const loopWorkerKind: WorkerStageKind = {
  name: LOOP_STAGE,
  checkConfig: checkLoopStageConfig,
  callsModels: true,
  activities: ({ blobs, agents, callLog, blobThresholdBytes }) =>
    createLoopActivities({ blobs, agents, ...(callLog ? { callLog } : {}), blobThresholdBytes }),
};
