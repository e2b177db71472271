/** The `tdd` stage kind's worker side: its `with:` check and its activities (node calls, git worktrees). */
import type { WorkerStageKind } from '../../index';
import { createTddActivities } from './activities';
import { checkTddStageConfig, TDD_STAGE } from '../spec';

export const tddWorkerKind: WorkerStageKind = {
  name: TDD_STAGE,
  checkConfig: checkTddStageConfig,
  callsModels: true,
  activities: ({ blobs, agents, callLog }) => createTddActivities({ blobs, agents, ...(callLog ? { callLog } : {}) }),
};
