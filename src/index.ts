/** Treadle's public API. */
export {
  TreadleClient,
  TreadleError,
  runIdFor,
  type PendingReviewListing,
  type ApprovalListing,
  type ConnectOptions,
} from './client';
export {
  createWorker,
  createImplementationsWorker,
  runWorker,
  connectWorker,
  type TreadleWorkerOptions,
} from './worker';
export { temporalSettings, connectClient, type TemporalSettings } from './connection';
export { defaultRegistry, defaultActionRegistry } from './registries';
export {
  Registry,
  type StageImplementation,
  type GateImplementation,
  type StageContext,
  type GateContext,
} from './activities/registry';
export { FileBlobStore, type BlobStore } from './storage/blob-store';
export { pipeline, PipelineBuilder } from './model/builder';
export {
  validatePipeline,
  parsePipeline,
  PipelineValidationError,
  type PipelineSpec,
  type StageSpec,
  type ReviewPolicy,
} from './model/pipeline';
export * from './model/shapes';
export type * from './model/state';
export { startDevServer, type DevServer } from './server/dev-server';
export { defineActionType, ActionRegistry, type ActionType, type ActionContext } from './kinds/approval/actions';
export { idempotencyKey, inputHash } from './model/hashing';
export type { ApprovalRequest, ApprovalDecision, ApprovalStatus } from './kinds/approval/shapes';
export { createTracing, tracingFromEnv, WORKFLOW_TRACING_MODULE, type TreadleTracing } from './tracing';
export type { AuditEntry } from './audit';
