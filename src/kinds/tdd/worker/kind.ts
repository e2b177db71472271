/** The `tdd` stage kind's worker side: its `with:` check and its activities (node calls, git worktrees). */
import type { WorkerStageKind } from '../../index';
import type * as Activities from './activities';
import { TDD_STAGE } from '../shapes';
import type * as Spec from '../spec';

// Loaded on first use (lint allows `require` in a kind's worker row): the CLI reads this row (the kind's name)
// to check specs without loading the zod schema of its `with:` unless a spec names it, nor worker code.
const specModule = (): typeof Spec => require('../spec');
const activitiesModule = (): typeof Activities => require('./activities');

export const tddWorkerKind: WorkerStageKind = {
  name: TDD_STAGE,
  checkConfig: (config) => specModule().checkTddStageConfig(config),
  callsModels: true,
  activities: ({ blobs, agents, callLog }) =>
    activitiesModule().createTddActivities({ blobs, agents, ...(callLog ? { callLog } : {}) }),
};
