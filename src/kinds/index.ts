/**
 * The worker side of the table of stage kinds (DESIGN.md "Stage kinds", docs/stage-kinds.md): each kind's
 * config check, which the spec validation consults (through `defaultRegistry`, and the CLI's names in
 * src/pipelines/catalog.ts), its own spec checks, which the spec validation makes with or without a worker's
 * names (src/kinds/pipeline.ts), and its activities, which the worker registers. The CLI loads this table to
 * check specs, so a row loads its `with:` schema and its activities on first use, never when it is registered.
 * The workflow side (how an attempt runs, its messages) is src/kinds/workflow-table.ts: apart, because that one
 * is bundled into the workflow bundle and this one loads Node built-ins. Both list the same kinds
 * (test/unit/stage-kind-table.test.ts).
 */
import type { Registry } from '../activities/registry';
import type { AgentProviders } from '../agents/providers';
import type { KindSpecChecks } from '../model/pipeline-shapes';
import type { Json } from '../model/shapes';
import type { BlobStore } from '../storage/blob-store';
import type { CallLog } from '../storage/call-log';
import type { ActionCatalog } from './approval/worker/activities';
import { approvalWorkerKind } from './approval/worker/kind';
import { fanOutWorkerKind } from './fan-out/worker/kind';
import { humanWorkerKind } from './human/worker/kind';
import { loopWorkerKind } from './loop/worker/kind';
import { tddWorkerKind } from './tdd/worker/kind';

/** What a kind's activities are made from: the worker's own stores, providers and registrations. */
export interface KindWorkerContext {
  blobs: BlobStore;
  agents: AgentProviders;
  callLog?: CallLog;
  /** Artefacts above this size go to the blob store (the worker's `TREADLE_BLOB_THRESHOLD`). */
  blobThresholdBytes: number;
  /** The worker's stage and gate implementations (a fan-out checks its element stage against them). */
  registry: Registry;
  /** The approval action types the worker executes. */
  actions: ActionCatalog;
}

/** An activity function as the worker registers it. */
export type KindActivity = (input: never) => Promise<unknown>;

/**
 * A stage kind as the worker sees it: register one with {@link registerWorkerKind}. Its module should load
 * nothing heavy (no zod schema, no worker code): `treadle validate` reads every row to check a spec.
 */
export interface WorkerStageKind {
  /** The `run:` that names the kind; the same as its workflow side's. */
  readonly name: string;
  /** Problems with a stage's `with:`, one line each (none: valid); the spec validation lists them. */
  readonly checkConfig?: (config: Json | undefined) => string[];
  /** Whether its attempts call models (the token budget applies); the same as its workflow side's. */
  readonly callsModels: boolean;
  /**
   * Its own checks of a spec, made with or without a worker's names (a fan-out's element stage and weight in the
   * history, the action type an approval asks for); `name` is the row's.
   */
  readonly specChecks?: KindSpecChecks;
  /** Its activities by registered name, over the worker's context. */
  activities(context: KindWorkerContext): Record<string, KindActivity>;
}

const TABLE = new Map<string, WorkerStageKind>();

/** Adds a stage kind's worker side; its workflow side goes to `registerWorkflowKind` in the bundle. */
export function registerWorkerKind(kind: WorkerStageKind): void {
  if (TABLE.has(kind.name)) throw new Error(`stage kind "${kind.name}" is already registered`);
  if (kind.specChecks && kind.specChecks.name !== kind.name)
    throw new Error(`stage kind "${kind.name}" has the spec checks of "${kind.specChecks.name}"`);
  TABLE.set(kind.name, kind);
}

/** Every registered kind's worker side, in registration order. */
export function workerKinds(): WorkerStageKind[] {
  return [...TABLE.values()];
}

/**
 * Registers the kinds' names and config checks on `registry`, so specs naming a kind validate: every kind,
 * or those `only` names.
 */
export function registerKinds(registry: Registry, only?: readonly string[]): Registry {
  for (const kind of TABLE.values()) {
    if (only !== undefined && !only.includes(kind.name)) continue;
    registry.kind(kind.name, {
      usesAgent: kind.callsModels,
      ...(kind.checkConfig ? { checkConfig: kind.checkConfig } : {}),
    });
  }
  return registry;
}

/** The activities of every kind, for the worker. */
export function kindActivities(context: KindWorkerContext): Record<string, KindActivity> {
  return Object.assign({}, ...workerKinds().map((kind) => kind.activities(context))) as Record<string, KindActivity>;
}

// The table: one line per kind.
registerWorkerKind(tddWorkerKind);
registerWorkerKind(approvalWorkerKind);
registerWorkerKind(fanOutWorkerKind);
registerWorkerKind(loopWorkerKind);
registerWorkerKind(humanWorkerKind);
