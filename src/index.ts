/** Treadle's public API. */
export {
  TreadleClient,
  TreadleError,
  AlreadyDecidedError,
  runIdFor,
  type PendingReviewListing,
  type ApprovalListing,
  type ConnectOptions,
  type LimiterUsage,
  type ActivityCapacityWait,
  type UsageSnapshot,
  type ScheduleCreateOptions,
  type ScheduleDetail,
  type ScheduleFiring,
  type ScheduleListing,
  type ScheduleOverlap,
  type TriggerOutcome,
} from './client';
export {
  createWorker,
  createImplementationsWorker,
  runWorker,
  connectWorker,
  WORKER_READY_LINE,
  type TreadleWorkerOptions,
} from './worker';
export { temporalSettings, connectClient, type TemporalSettings } from './config/connection';
export { prebuiltWorkflowBundle, type WorkflowBundleVariant } from './worker/workflow-bundle';
export { defaultRegistry, defaultActionRegistry } from './worker/registries';
export {
  Registry,
  type StageImplementation,
  type GateImplementation,
  type StageContext,
  type GateContext,
} from './activities/registry';
export {
  FileBlobStore,
  MemoryBlobStore,
  BlobNotFoundError,
  createBlobStore,
  S3BlobStore,
  ConditionalWritesUnsupportedError,
  type BlobStore,
  type BlobStoreSettings,
  type S3BlobStoreOptions,
  type S3Credentials,
} from './storage';
export { treadleExternalStorage, DEFAULT_EXTERNAL_STORAGE_THRESHOLD_BYTES } from './storage/external-storage';
export { SqliteCallLog } from './storage/sqlite-call-log';
export { PostgresCallLog, type PostgresCallLogOptions } from './storage/postgres-call-log';
export { openCallLog } from './storage/open-call-log';
export { readLimitsFile } from './capacity/worker/limits-file';
export type { CapacityLimits, CapacityLimit, FairnessSettings } from './capacity/shapes';
export { verifySignature, signatureOf } from './notify/worker/signing';
export { readNotifyFile, notificationsFromEnv, type WorkerNotifications } from './notify/worker/settings-file';
export type { Webhook, NotifySettings, NotifyFormat } from './notify/settings';
export type { Announcement, NotifyEvent } from './notify/shapes';
export type { WebhookPayload } from './notify/payload';
export {
  summarizeRows,
  type CallLog,
  type CallLogRow,
  type CallFilter,
  type CallGrouping,
  type CallOrigin,
  type CallSummary,
} from './storage/call-log';
export { loadConfig, DEFAULT_TASK_QUEUE, type TreadleConfig } from './config';
export { treadleHome, HOME_ENV } from './config/home';
export { pipeline, PipelineBuilder } from './kinds/builder';
export { validatePipeline, parsePipeline } from './kinds/pipeline';
export { PipelineValidationError, type PipelineSpec, type StageSpec, type ReviewPolicy } from './model/pipeline';
export * from './model/shapes';
export {
  HIGHEST_PRIORITY,
  LOWEST_PRIORITY,
  DEFAULT_PRIORITY,
  MAX_FAIRNESS_KEY_BYTES,
  type ItemPriority,
} from './model/priority';
export type { StartOptions, TddStartOptions, EvalCaseTag } from './client/start';
export type { ForkListing, ForkOptions, ForkStarted } from './client/fork';
export { applyOverrides, combineOverrides, settingOverride, type SpecOverrides } from './model/spec-overrides';
export { EvalsClient, DEFAULT_REGRESSION_THRESHOLD } from './client/parts/evals';
export type { EvalRunOptions } from './client/eval-runner';
export type { EvalScorer, ScoredCase, ScorerChoice, JudgeOptions } from './client/eval-scorers';
export {
  parseDataset,
  compareRuns,
  summarizeVariant,
  type EvalCase,
  type EvalCaseRecord,
  type EvalVariant,
  type EvalVariantSummary,
  type EvalRunRecord,
  type EvalRunListing,
  type EvalComparison,
  type EvalVariantDelta,
  type EvalPolicy,
} from './model/evals';
export type * from './model/state';
export { startDevServer, type DevServer } from './server/dev-server';
export { defineActionType, ActionRegistry, type ActionType, type ActionContext } from './kinds/approval/actions';
export { idempotencyKey, inputHash } from './model/hashing';
export type { ApprovalRequest, ApprovalDecision, ApprovalStatus } from './kinds/approval/shapes';
export {
  createTracing,
  tracingFromEnv,
  WORKFLOW_TRACING_MODULE,
  type TreadleTracing,
  type TracingSpanProcessor,
} from './observability/tracing';
export type { AuditEntry } from './client/audit';
export {
  listPendingDecisions,
  listDecisionChanges,
  decisionsOf,
  type DecisionChange,
  type DecisionSource,
} from './client/decisions';
export { answerProblem } from './client/decide';
export { checkOutput, parseJsonText, JsonTextError, type SchemaProblem } from './agents/output-schema-checks';
export * from './model/decisions';
