/** The `approval` stage kind's worker side: its `with:` check and its activities (requests, idempotent actions). */
import { idempotencyKey, inputHash } from '../../../model/hashing';
import type { WorkerStageKind } from '../../index';
import type * as Activities from './activities';
import { APPROVAL_STAGE } from '../shapes';
import { approvalSpecChecks } from '../spec-checks';
import type * as Spec from '../spec';

// Loaded on first use (lint allows `require` in a kind's worker row): the CLI reads this row (the kind's name)
// to check specs without loading the zod schema of its `with:` unless a spec names it, nor worker code.
const specModule = (): typeof Spec => require('../spec');
const activitiesModule = (): typeof Activities => require('./activities');

export const approvalWorkerKind: WorkerStageKind = {
  name: APPROVAL_STAGE,
  checkConfig: (config) => specModule().checkApprovalStageConfig(config),
  callsModels: false,
  specChecks: approvalSpecChecks,
  activities: ({ blobs, actions, blobThresholdBytes }) =>
    activitiesModule().createApprovalActivities({ blobs, actions, blobThresholdBytes, idempotencyKey, inputHash }),
};
