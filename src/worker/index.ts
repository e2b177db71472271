/**
 * Builds and runs a Treadle worker: the `workItem` workflow plus one activity per registered stage and
 * gate implementation. Its defaults are the generic registries; `treadle worker` (or `node lib/worker/index.js`)
 * runs it with the bundled examples on top (src/cli/bundled-examples.ts).
 */
import { idempotencyKey, inputHash } from '../model/hashing';
import { correlationInterceptors } from '../observability';
import { tracingFromEnv, type TreadleTracing } from '../observability/tracing';
import { NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import { createActivities } from '../activities';
import { kindActivities } from '../kinds';
import { createContractActivities } from '../kinds/contract/worker/activities';
import { createApprovalActivities, type ActionCatalog } from '../kinds/approval/worker/activities';
import type { CallLog } from '../storage/call-log';
import { openCallLog } from '../storage/open-call-log';
import { defaultAgentProviders } from '../agents';
import type { AgentProviders } from '../agents/providers';
import type { CallThrottle } from '../agents/call-throttle';
import type { CapacityLimits } from '../capacity/shapes';
import { GatedThrottle, limitsFromEnv } from './capacity';
import { Client } from '@temporalio/client';
import { createNotifyActivities } from '../notify/worker/activities';
import { notificationsFromEnv, type WorkerNotifications } from '../notify/worker/settings-file';
import type { BlobStore } from '../storage/blob-store';
import { createBlobStore } from '../storage';
import { treadleExternalStorage } from '../storage/external-storage';
import type { Registry } from '../activities/registry';
import { defaultActionRegistry, defaultRegistry } from './registries';
import { loadConfig } from '../config';
import {
  connectClient,
  connectFailure,
  refusedCredentials,
  temporalSettings,
  type TemporalSettings,
} from '../config/connection';
import { engineForAttributes, ensureSearchAttributes } from '../server/search-attributes';
import { SEARCH_ATTRIBUTE_DEFINITIONS } from '../model/search-attributes';
import { workflowCodeForWorker } from './workflow-bundle';
import type { WorkItemVersioning } from '../config/deployment';
import { deploymentOf, versioningOptions } from './deployment';
import { notesOf } from './start-line';
import { installPrometheusMetrics, prometheusAddressFromEnv } from './metrics';
import { load } from './lazy-modules';
import {
  CoreQueueRegistrationError,
  implementationActivityTypes,
  namesBeyond,
  type RegisteredNames,
} from './task-queues';

export { defaultRegistry } from './registries';

/** The longest a heartbeat (and so a cancellation) waits in the worker before it goes to the server. */
const HEARTBEAT_THROTTLE = '1s';

/** Options for {@link createWorker}. */
export interface TreadleWorkerOptions {
  connection: NativeConnection;
  namespace?: string;
  /**
   * A queue of this worker's own for the workflows and its registrations (a test, an isolated deployment):
   * items must then be started on it, and every worker on it must register the same. Without it the worker
   * polls the core queue (`TREADLE_TASK_QUEUE`, default `treadle`), where it registers exactly what Treadle
   * ships: a `registry` or `approvalActions` with names of its own is refused there (see `implementationsQueue`).
   */
  taskQueue?: string;
  /** Implementations, gates, validators and revisers of your own: on the core queue only with `implementationsQueue` (runWorker). */
  registry?: Registry;
  blobs?: BlobStore;
  blobThresholdBytes?: number;
  /** Agent providers by name (default: anthropic, scripted, claude-code). */
  agents?: AgentProviders;
  /**
   * Model capacity shared by every worker (docs/configuration.md "Model capacity"): the limits of a limits file
   * (default: the file `TREADLE_LIMITS` names; null for none). With limits, the default agents' calls wait for
   * grants from a limiter workflow per scope on this worker's task queue; without, each process throttles
   * only itself after a 429.
   */
  limits?: CapacityLimits | null;
  /** Where the default agents' calls wait for capacity: overrides `limits` (runWorker shares one between its workers). */
  throttle?: CallThrottle;
  /**
   * Webhooks told about decisions and failures (docs/notifications.md): a notifications file's (default: the file
   * `TREADLE_NOTIFY` names, with `TREADLE_UI_URL`; null for none).
   */
  notifications?: WorkerNotifications | null;
  /** The cross-run call log (default: `TREADLE_CALL_LOG`, a SQLite file or a PostgreSQL URL; null for none). */
  callLog?: CallLog | null;
  /** The action types approval stages may request (default: none, `defaultActionRegistry()`). */
  approvalActions?: ActionCatalog;
  /**
   * OpenTelemetry tracing (`createTracing`, or `tracingFromEnv` for `treadle worker`). A prebuilt bundle
   * must include `WORKFLOW_TRACING_MODULE` as a workflow interceptor module for workflow spans.
   */
  tracing?: TreadleTracing;
  /**
   * The engine version this worker starts items on (default `TREADLE_ENGINE_VERSION`, else the newest): pin
   * it to the old version while a deploy that raises it rolls out (docs/versioning.md). A function is asked
   * at every item's start.
   */
  engineVersion?: number | (() => number);
  /**
   * A workflow bundle of your own (tests, benchmarks); otherwise the one `npm run build` prebuilt, or the workflows
   * bundled at start when their files changed since (src/worker/workflow-bundle.ts).
   */
  workflowBundle?: WorkerOptions['workflowBundle'];
  /**
   * Anything else Temporal's worker takes (concurrency limits, ...); `maxCachedWorkflows` here wins over
   * `TREADLE_WORKFLOW_CACHE`.
   */
  worker?: Partial<WorkerOptions>;
  /**
   * The Worker Deployment Version of every queue this worker polls (docs/deploy.md, "Upgrading workers with
   * Worker Deployment Versioning"): default `TREADLE_DEPLOYMENT`, `TREADLE_BUILD_ID` and
   * `TREADLE_VERSIONING_BEHAVIOR`; null (or nothing set) for an unversioned worker. `workItems` (default
   * `PINNED`) is how work items and their children move between builds.
   */
  deployment?: { name: string; buildId: string; workItems?: WorkItemVersioning } | null;
  /**
   * runWorker: also poll this queue (default `TREADLE_IMPLEMENTATIONS_QUEUE`) with the `registry`'s stages, gates,
   * validators and revisers and the action types that Treadle does not ship, in a second, activities-only Temporal
   * worker; pipelines name it as `task_queue`.
   */
  implementationsQueue?: string;
}

/** What the core queue registers: the generic registries and the bundled examples, loaded only when needed. */
function shippedRegistrations(): { registry: Registry; approvalActions: ActionCatalog } {
  return load.bundledExamples().bundledWorkerOptions();
}

/** Every name a registry and an action catalog hold, for comparing a worker's set with the shipped one. */
function registeredNames(registry: Registry, actions: ActionCatalog | undefined): RegisteredNames {
  return { ...registry.names(), ...(actions?.names ? { actions: actions.names() } : {}) };
}

/**
 * The registrations a worker runs: on its own queue, what it was given; on the core queue, the shipped set,
 * after making sure it was given nothing beyond it.
 */
function registrationsOf(options: TreadleWorkerOptions): { registry: Registry; actions: ActionCatalog } {
  if (options.taskQueue !== undefined)
    return {
      registry: options.registry ?? defaultRegistry(),
      actions: options.approvalActions ?? defaultActionRegistry(),
    };
  const shipped = shippedRegistrations();
  const given = registeredNames(options.registry ?? shipped.registry, options.approvalActions);
  const extras = namesBeyond(given, registeredNames(shipped.registry, shipped.approvalActions));
  if (extras.length > 0) throw new CoreQueueRegistrationError(loadConfig().taskQueue, extras);
  return { registry: shipped.registry, actions: shipped.approvalActions };
}

/** Creates a worker (not yet running). */
export async function createWorker(options: TreadleWorkerOptions): Promise<Worker> {
  const config = loadConfig();
  const { registry, actions } = registrationsOf(options);
  const blobs = options.blobs ?? createBlobStore(config.blobStore);
  const callLog = callLogFor(options, config.callLog);
  const namespace = options.namespace ?? temporalSettings().namespace;
  const taskQueue = options.taskQueue ?? config.taskQueue;
  const throttle = options.throttle ?? capacityThrottle({ ...options, namespace, taskQueue });
  const agents = options.agents ?? defaultAgentProviders(throttle ? { throttle } : {});
  const notifications = options.notifications === undefined ? notificationsFromEnv() : options.notifications;
  let client: Client | undefined;
  return Worker.create({
    connection: options.connection,
    namespace,
    taskQueue,
    // The bundle `npm run build` made, unless the files changed since (then bundled here, 5-6 s).
    ...(options.workflowBundle
      ? { workflowBundle: options.workflowBundle }
      : workflowCodeForWorker(options.tracing ? 'traced' : 'plain')),
    activities: {
      ...createActivities({
        registry,
        blobs,
        blobThresholdBytes: options.blobThresholdBytes ?? config.blobThresholdBytes,
        agents,
        ...(callLog ? { callLog } : {}),
        engineVersion: options.engineVersion ?? config.engineVersion,
        ...(actions.names ? { actionTypes: actions.names() } : {}),
        ...(notifications ? { notifies: true } : {}),
      }),
      // Quality contracts (seed 002): validation rounds, revisions, the final list.
      ...createContractActivities({
        blobs,
        agents,
        ...(callLog ? { callLog } : {}),
        ...registry.contractImplementations(),
        blobThresholdBytes: options.blobThresholdBytes ?? config.blobThresholdBytes,
      }),
      // Every stage kind's activities, from the table of kinds (src/kinds/index.ts).
      ...kindActivities({
        blobs,
        agents,
        ...(callLog ? { callLog } : {}),
        blobThresholdBytes: options.blobThresholdBytes ?? config.blobThresholdBytes,
        registry,
        actions,
      }),
      // Notifications (docs/notifications.md): items announce, the notifier workflow delivers.
      ...createNotifyActivities({
        notifications: notifications ?? undefined,
        taskQueue,
        client: () => (client ??= new Client({ connection: options.connection, namespace })),
      }),
    },
    // Bounded: items waiting for people stay cached until evicted (252 KiB each, BENCHMARKS.md).
    maxCachedWorkflows: config.workflowCache,
    ...workerPlumbing(options, blobs),
  });
}

/**
 * The limiter-backed throttle of a worker given limits (or, by default, a `TREADLE_LIMITS` file): its limiters
 * run on `taskQueue`, which every worker polls for workflows. Undefined without limits.
 */
function capacityThrottle(
  options: Pick<TreadleWorkerOptions, 'limits' | 'connection' | 'namespace' | 'taskQueue'>,
): GatedThrottle | undefined {
  const limits = options.limits === undefined ? limitsFromEnv() : options.limits;
  if (!limits || limits.limits.length === 0) return undefined;
  const namespace = options.namespace ?? temporalSettings().namespace;
  const taskQueue = options.taskQueue ?? loadConfig().taskQueue;
  return new GatedThrottle({ connection: options.connection, namespace, taskQueue, limits });
}

/**
 * What every Treadle worker shares: blob references for large payloads, heartbeats, the deployment version,
 * correlation ids, tracing.
 */
function workerPlumbing(options: TreadleWorkerOptions, blobs: BlobStore): Partial<WorkerOptions> {
  return {
    // Both workers of a process (the core queue and an implementations queue) declare the same version, so a
    // pinned item's activities go to the build that runs its workflow.
    ...versioningOptions(deploymentOf(options)),
    // The safety net under Treadle's own references: any payload that still reaches 256 KiB (a large spec,
    // an inline edit, a big query answer) travels through the same blob store by reference.
    dataConverter: { externalStorage: treadleExternalStorage(blobs) },
    // Core throttles heartbeats to 0.8 × the heartbeat timeout (24 s by default), and a cancellation (an
    // attempt timeout) reaches an activity only with a heartbeat's answer: unthrottled, an attempt ends
    // within one heartbeat interval (5 s at most) of its timeout instead of up to 24 s later.
    maxHeartbeatThrottleInterval: HEARTBEAT_THROTTLE,
    defaultHeartbeatThrottleInterval: HEARTBEAT_THROTTLE,
    ...options.worker,
    // The work item's correlation id on every activity log line (and span).
    interceptors: {
      ...options.worker?.interceptors,
      activity: [...(options.worker?.interceptors?.activity ?? []), correlationInterceptors],
    },
    ...(options.tracing ? { plugins: [...(options.worker?.plugins ?? []), options.tracing.plugin] } : {}),
  };
}

/**
 * Creates the activities-only worker of an implementations queue: the `registry`'s stages, gates, contract
 * validators and revisers and the `approvalActions`' action types that Treadle does not ship, on `queue`.
 * Pipelines send them there with `task_queue: <queue>` (on the pipeline, a stage or a contract).
 */
export async function createImplementationsWorker(
  options: TreadleWorkerOptions & { implementationsQueue: string },
): Promise<Worker> {
  const config = loadConfig();
  const registry = options.registry ?? defaultRegistry();
  const actions = options.approvalActions ?? defaultActionRegistry();
  const shippedSet = shippedRegistrations();
  const types = implementationActivityTypes(
    options.implementationsQueue,
    registeredNames(registry, actions),
    registeredNames(shippedSet.registry, shippedSet.approvalActions),
  );
  const blobs = options.blobs ?? createBlobStore(config.blobStore);
  const callLog = callLogFor(options, config.callLog);
  const namespace = options.namespace ?? temporalSettings().namespace;
  // The limiters run on the core queue (workflows), whichever queue this worker's calls come from.
  const throttle = options.throttle ?? capacityThrottle({ ...options, namespace });
  const agents = options.agents ?? defaultAgentProviders(throttle ? { throttle } : {});
  const all = createActivities({
    registry,
    blobs,
    blobThresholdBytes: options.blobThresholdBytes ?? config.blobThresholdBytes,
    agents,
    ...(callLog ? { callLog } : {}),
    reportsOutputSchemas: true,
  });
  const approvals = createApprovalActivities({
    blobs,
    actions,
    blobThresholdBytes: options.blobThresholdBytes ?? config.blobThresholdBytes,
    idempotencyKey,
    inputHash,
  });
  // Validate and revise calls routed here check the names against this worker's validators and revisers.
  const contracts = createContractActivities({
    blobs,
    agents,
    ...(callLog ? { callLog } : {}),
    ...registry.contractImplementations(),
    blobThresholdBytes: options.blobThresholdBytes ?? config.blobThresholdBytes,
  });
  return Worker.create({
    connection: options.connection,
    namespace,
    taskQueue: options.implementationsQueue,
    activities: Object.fromEntries(
      Object.entries({ ...all, ...approvals, ...contracts }).filter(([type]) => types.has(type)),
    ),
    ...workerPlumbing(options, blobs),
  });
}

/**
 * Connects to Temporal as configured (the environment and `temporal.toml` profiles: src/config/connection.ts) and
 * runs a worker until SIGINT/SIGTERM. With `TREADLE_METRICS_PROMETHEUS` set it first serves the SDK's metrics
 * there (src/worker/metrics.ts).
 */
export async function runWorker(options: Partial<TreadleWorkerOptions> = {}): Promise<void> {
  const config = loadConfig();
  const settings = temporalSettings();
  const namespace = options.namespace ?? settings.namespace;
  const metrics = prometheusAddressFromEnv();
  const { limits, notifications, deployment } = settingsFiles(options); // a bad one: exit 2, before connecting
  // Before the first connection, which would make the process's runtime without the exporter.
  if (metrics !== undefined) installPrometheusMetrics(metrics);
  // One call log for both workers, closed when they stop (an open PostgreSQL pool would keep the process alive).
  // It and tracing come before the connection: a setting that cannot work (a package not installed) leaves none open.
  const callLog = options.callLog === undefined && config.callLog !== null ? openCallLog(config.callLog) : undefined;
  const tracing = options.tracing ?? tracingFromEnv();
  const connection = options.connection ?? (await connectWorker(settings));
  // Off the critical path: the worker needs no search attribute to poll, only listings and engine 7 do;
  // until they are confirmed it starts items on the engine that does not name TreadleDecisionAt.
  const setting = options.engineVersion ?? config.engineVersion;
  const configured = (): number => (typeof setting === 'function' ? setting() : setting);
  let confirmed: boolean | undefined;
  const engineVersion = (): number => engineForAttributes(configured(), confirmed);
  const searchAttributes = registerSearchAttributes(settings, namespace, engineForAttributes(configured(), false)).then(
    (ok) => void (confirmed = ok),
  );
  const implementationsQueue = options.implementationsQueue ?? (process.env.TREADLE_IMPLEMENTATIONS_QUEUE || undefined);
  const owned = options.throttle ? undefined : capacityThrottle({ ...options, limits, connection, namespace });
  const base = {
    ...options,
    namespace,
    connection,
    engineVersion,
    notifications,
    ...(owned ? { throttle: owned } : {}),
    ...(tracing ? { tracing } : {}),
    ...(callLog ? { callLog } : {}),
  };
  const core = coreQueueOptions(base, implementationsQueue);
  let failure: unknown;
  try {
    let workers: Worker[];
    try {
      workers = [
        await createWorker(core),
        ...(implementationsQueue !== undefined
          ? [await createImplementationsWorker({ ...base, implementationsQueue })]
          : []),
      ];
    } catch (error) {
      // Creating a worker describes the namespace: a credential refused after the connection check fails here.
      throw refusedCredentials(error, settings) ?? error;
    }
    const taskQueue = options.taskQueue ?? config.taskQueue;
    const also = implementationsQueue !== undefined ? ` and implementations queue ${implementationsQueue}` : '';
    process.stderr.write(
      `treadle worker: task queue ${taskQueue}${also} on ${settings.summary}${tracing ? ', tracing to OTLP' : ''}` +
        `${notesOf(options, { metrics, callLog: config.callLog, limits, notifications, deployment })}\n`,
    );
    // One stopping (a signal stops both; a fatal error one) takes the other down with it.
    const running = workers.map((worker) =>
      worker.run().finally(() => {
        for (const other of workers) if (other.getState() === 'RUNNING') other.shutdown();
      }),
    );
    // Ready once the engine items start on is settled, so what starts after the line gets the live engine.
    await searchAttributes;
    await reportReady(workers, running);
    await Promise.all(running);
  } catch (error) {
    failure = error;
    throw error;
  } finally {
    // Calls still holding capacity give it back now rather than when their leases expire.
    await owned?.close();
    await tracing?.shutdown();
    await callLog?.close();
    // A worker built but never run (the other one failed to build) keeps the connection: closing it then throws
    // "Cannot close connection while Workers hold a reference to it", which must not hide the failure itself.
    await connection.close().catch((error: unknown) => {
      if (failure === undefined) throw error;
    });
  }
}

/** The limits and notifications files' settings (`TREADLE_LIMITS`, `TREADLE_NOTIFY`) and the deployment, unless given. */
function settingsFiles(options: Partial<TreadleWorkerOptions>) {
  return {
    deployment: deploymentOf(options),
    limits: options.limits === undefined ? limitsFromEnv() : options.limits,
    notifications: options.notifications === undefined ? notificationsFromEnv() : options.notifications,
  };
}

/** With an implementations queue the registry's own names go there; the core queue keeps the shipped set. */
function coreQueueOptions<T extends Partial<TreadleWorkerOptions>>(
  base: T,
  implementationsQueue: string | undefined,
): T {
  const core = { ...base };
  if (implementationsQueue !== undefined) {
    delete core.registry;
    delete core.approvalActions;
  }
  return core;
}

/** The line deployments and health checks wait for: printed once the worker polls (or never, if it fails first). */
export const WORKER_READY_LINE = 'treadle worker: ready';

/**
 * Prints {@link WORKER_READY_LINE} once every worker polls; `run()` sets a worker's state at once, plugins may
 * defer it. Nothing is printed when one stops first.
 */
async function reportReady(workers: readonly Worker[], running: readonly Promise<void>[]): Promise<void> {
  let settled = false;
  for (const run of running)
    void run.then(
      () => (settled = true),
      () => (settled = true),
    );
  while (!settled && workers.some((worker) => worker.getState() === 'INITIALIZED'))
    await new Promise((resolve) => setTimeout(resolve, 10));
  if (workers.every((worker) => worker.getState() === 'RUNNING')) process.stderr.write(`${WORKER_READY_LINE}\n`);
}

/**
 * Makes sure the namespace has Treadle's search attributes; a server that refuses is reported, not fatal.
 * Resolves to whether they are all there.
 */
async function registerSearchAttributes(
  settings: TemporalSettings,
  namespace: string,
  engineWithout: number,
): Promise<boolean> {
  try {
    const connection = await connectClient(settings);
    try {
      const added = await ensureSearchAttributes(connection, namespace);
      if (added.length)
        process.stderr.write(
          `treadle worker: registered search attributes ${added.join(', ')} in namespace ${namespace}\n`,
        );
    } finally {
      await connection.close();
    }
    return true;
  } catch (error) {
    process.stderr.write(
      `treadle worker: could not check search attributes (${(error as Error).message.split('\n')[0]}); listing reviews, approvals and decisions needs ${Object.keys(SEARCH_ATTRIBUTE_DEFINITIONS).join(', ')}; items start on engine ${engineWithout} until a restart finds them\n`,
    );
    return false;
  }
}

/** The call log a worker appends to: the one passed (null: none), else the one `TREADLE_CALL_LOG` names. */
function callLogFor(options: { callLog?: CallLog | null }, configured: string | null): CallLog | undefined {
  if (options.callLog !== undefined) return options.callLog ?? undefined;
  return configured !== null ? openCallLog(configured) : undefined;
}

/** Connects a worker (`NativeConnection`), or throws one line naming the setting to fix. */
export async function connectWorker(settings: TemporalSettings = temporalSettings()): Promise<NativeConnection> {
  try {
    return await NativeConnection.connect(settings.options);
  } catch (error) {
    throw await connectFailure(error, settings);
  }
}

if (require.main === module) {
  // `node lib/worker/index.js` is the CLI's worker, examples included; lazily, so an SDK import never loads them.
  const { bundledWorkerOptions } = load.bundledExamples();
  runWorker(bundledWorkerOptions()).catch((error: unknown) => {
    process.stderr.write(`treadle worker: ${(error as Error).message}\n`);
    process.exit((error as { code?: string }).code === 'config' ? 2 : 1);
  });
}
