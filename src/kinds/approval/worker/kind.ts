/** The `approval` stage kind's worker side: its `with:` check and its activities (requests, idempotent actions). */
import { idempotencyKey, inputHash } from '../../../model/hashing';
import type { WorkerStageKind } from '../../index';
import { createApprovalActivities } from './activities';
import { APPROVAL_STAGE } from '../shapes';
import { checkApprovalStageConfig } from '../spec';

export const approvalWorkerKind: WorkerStageKind = {
  name: APPROVAL_STAGE,
  checkConfig: checkApprovalStageConfig,
  callsModels: false,
  activities: ({ blobs, actions, blobThresholdBytes }) =>
    createApprovalActivities({ blobs, actions, blobThresholdBytes, idempotencyKey, inputHash }),
};
