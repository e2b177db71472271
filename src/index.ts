/** Treadle's public API. */
export { TreadleClient, TreadleError, type PendingReviewListing, type ConnectOptions } from './client';
export { createWorker, runWorker, defaultRegistry, type TreadleWorkerOptions } from './worker';
export { Registry, type StageImplementation, type GateImplementation, type StageContext, type GateContext } from './activities/registry';
export { FileBlobStore, type BlobStore } from './storage/blob-store';
export { pipeline, PipelineBuilder } from './model/builder';
export { validatePipeline, parsePipeline, PipelineValidationError, type PipelineSpec, type StageSpec, type ReviewPolicy } from './model/pipeline';
export * from './model/shapes';
export type * from './model/state';
export { startDevServer, type DevServer } from './server/dev-server';
