/**
 * The connection context every part of `TreadleClient` shares: the Temporal `Client`, the task queue, the blob
 * store and the time limits, plus the two ways of reaching a workflow (`call`, `ask`) that turn "not found" and
 * refused credentials into one clear error. One context per client, so the parts never disagree on settings.
 */
import type { Client, WorkflowHandle } from '@temporalio/client';
import type { BlobStore } from '../../storage/blob-store';
import { refusedCredentials, serverTrouble, type TemporalSettings } from '../../config/connection';
import type { KnownImplementations } from '../../model/pipeline';
import { isNotFound, TreadleError } from '../errors';
import type { StartContext } from '../start';
import { answeredByWorker } from '../worker-presence';
import type { ItemsClient } from './items';
import type { DecisionsClient } from './decisions';
import type { ApprovalsClient } from './approvals';
import type { LoopStagesClient } from './loop-stages';
import type { TreesClient } from './trees';
import type { WorkersClient } from './workers';
import type { LimitsClient } from './limits';
import type { EvalsClient } from './evals';
import type { SchedulesClient } from './schedules';

/** The settings a context is made from (resolved by `TreadleClient`'s constructor). */
export interface ClientContextSettings {
  taskQueue: string;
  known?: KnownImplementations;
  blobs: BlobStore;
  reviewTimeoutMs: number;
  answerWaitMs: number;
  blobThresholdBytes: number;
  temporal?: TemporalSettings;
}

/**
 * The parts of a client, as each part reaches the others (a loop stage's resume reads the item's events, a
 * decision is sent through the part that owns its kind). `TreadleClient` is one.
 */
export interface ClientParts {
  readonly items: ItemsClient;
  readonly decisions: DecisionsClient;
  readonly approvals: ApprovalsClient;
  readonly loopStages: LoopStagesClient;
  readonly trees: TreesClient;
  readonly workers: WorkersClient;
  readonly limits: LimitsClient;
  readonly evals: EvalsClient;
  readonly schedules: SchedulesClient;
}

/** The shared connection context of a client's parts. */
export class ClientContext {
  readonly taskQueue: string;
  readonly known?: KnownImplementations;
  readonly blobs: BlobStore;
  /** How long a review, approval or loop resume may take once a worker has answered. */
  readonly reviewTimeoutMs: number;
  /** How long a query or update waits for a worker to answer. */
  readonly answerWaitMs: number;
  readonly blobThresholdBytes: number;
  /** The settings the client connected with (none when made from a `Client`): a refused credential names them. */
  private readonly temporal?: TemporalSettings;

  constructor(
    readonly client: Client,
    settings: ClientContextSettings,
  ) {
    this.taskQueue = settings.taskQueue;
    if (settings.known) this.known = settings.known;
    this.blobs = settings.blobs;
    this.reviewTimeoutMs = settings.reviewTimeoutMs;
    this.answerWaitMs = settings.answerWaitMs;
    this.blobThresholdBytes = settings.blobThresholdBytes;
    if (settings.temporal) this.temporal = settings.temporal;
  }

  /** What the start functions need. */
  startContext(): StartContext {
    return {
      client: this.client,
      taskQueue: this.taskQueue,
      ...(this.known ? { known: this.known } : {}),
      blobs: this.blobs,
      blobThresholdBytes: this.blobThresholdBytes,
    };
  }

  /** A query: as {@link call}, `no_worker` when no worker answers within `timeoutMs` (default `answerWaitMs`). */
  ask<T>(id: string, fn: (handle: WorkflowHandle) => Promise<T>, timeoutMs?: number): Promise<T> {
    return this.call(id, (h) => answeredByWorker(this.client, id, () => fn(h), timeoutMs ?? this.answerWaitMs));
  }

  /** Runs a call on a work item's handle, turning "not found" into a clear error. */
  async call<T>(id: string, fn: (handle: WorkflowHandle) => Promise<T>): Promise<T> {
    try {
      return await fn(this.client.workflow.getHandle(id));
    } catch (error) {
      if (error instanceof TreadleError) throw error;
      if (isNotFound(error)) throw this.unknown(id);
      throw this.explainFailure(error);
    }
  }

  /** The error for an id no workflow in the namespace has. */
  unknown(id: string): TreadleError {
    return new TreadleError(`unknown work item "${id}" in namespace ${this.client.options.namespace}`, 'not_found');
  }

  /**
   * What a failed call should throw: when the server accepted the connection but refused the call for its
   * credentials (a proxy that lets the connection check through; a key without access to the namespace), the
   * one-line `config` error a refused connection gives; when it could not do the call now (restarting, its
   * database down), a `server_unavailable` error that says so; else `error` itself.
   */
  explainFailure(error: unknown): unknown {
    if (!this.temporal) return error;
    return refusedCredentials(error, this.temporal) ?? serverTrouble(error, this.temporal) ?? error;
  }

  /** {@link explainFailure}, thrown: for a promise's `catch`. */
  readonly rethrow = (error: unknown): never => {
    throw this.explainFailure(error);
  };
}

/** What every part holds: the shared context and the other parts. */
export abstract class ClientPart {
  constructor(
    protected readonly context: ClientContext,
    protected readonly parts: ClientParts,
  ) {}
}
