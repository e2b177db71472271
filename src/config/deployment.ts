/**
 * Worker Deployment Versioning settings (docs/deploy.md, "Upgrading workers with Worker Deployment Versioning"):
 * the deployment a worker belongs to, its build id, and how work items move between builds. Read from the
 * environment with the worker's other settings; no SDK import, so the CLI can read it cheaply.
 */
import { configError } from './errors';

/** How a work item (and its children) moves between builds: the worker's default versioning behaviour. */
export type WorkItemVersioning = 'PINNED' | 'AUTO_UPGRADE';

/** A worker's deployment version: every task queue it polls takes it. */
export interface WorkerDeployment {
  /** The deployment's name (`TREADLE_DEPLOYMENT`): one per Treadle installation and namespace. */
  name: string;
  /** This build's id (`TREADLE_BUILD_ID`): a release tag or commit, unique within the deployment. */
  buildId: string;
  /**
   * How work items, fan-outs, TDD nodes and loop stages move between builds (`TREADLE_VERSIONING_BEHAVIOR`,
   * default `PINNED`). The limiter and notifier workflows always auto-upgrade (src/capacity/workflow.ts).
   */
  workItems: WorkItemVersioning;
}

/** Work items finish on the build they started on unless an operator says otherwise. */
export const DEFAULT_WORK_ITEM_VERSIONING: WorkItemVersioning = 'PINNED';

/** The spellings `TREADLE_VERSIONING_BEHAVIOR` takes (case and `-`/`_` do not matter). */
const BEHAVIOURS: Readonly<Record<string, WorkItemVersioning>> = { pinned: 'PINNED', auto_upgrade: 'AUTO_UPGRADE' };

/**
 * The worker's deployment from `TREADLE_DEPLOYMENT`, `TREADLE_BUILD_ID` and `TREADLE_VERSIONING_BEHAVIOR`;
 * undefined when neither of the first two is set (an unversioned worker, as before). Throws a `config` error
 * (exit 2) when only one of them is set, or the behaviour is neither `pinned` nor `auto-upgrade`.
 */
export function deploymentFromEnv(env: NodeJS.ProcessEnv = process.env): WorkerDeployment | undefined {
  const name = env.TREADLE_DEPLOYMENT?.trim() || undefined;
  const buildId = env.TREADLE_BUILD_ID?.trim() || undefined;
  const behaviour = env.TREADLE_VERSIONING_BEHAVIOR?.trim() || undefined;
  if (name === undefined && buildId === undefined) {
    if (behaviour !== undefined)
      throw configError(
        'TREADLE_VERSIONING_BEHAVIOR applies only to a versioned worker: set TREADLE_DEPLOYMENT and TREADLE_BUILD_ID too',
      );
    return undefined;
  }
  return checkedDeployment({ name, buildId, workItems: behaviour });
}

/**
 * A deployment as given to `createWorker({ deployment })` or read from the environment, checked: a name and a
 * build id both, without `:` or surrounding spaces, and a known behaviour. Throws a `config` error naming the
 * setting to fix.
 */
export function checkedDeployment(given: {
  name?: string | undefined;
  buildId?: string | undefined;
  workItems?: string | undefined;
}): WorkerDeployment {
  const { name, buildId } = given;
  if (!name)
    throw configError(
      `a build id (TREADLE_BUILD_ID=${buildId}) needs the deployment it belongs to: set TREADLE_DEPLOYMENT (the same name on every worker of this Treadle)`,
    );
  if (!buildId)
    throw configError(
      `the deployment ${name} (TREADLE_DEPLOYMENT) needs this worker's build id: set TREADLE_BUILD_ID (a release tag or commit, new for every build)`,
    );
  for (const [setting, value] of [
    ['TREADLE_DEPLOYMENT', name],
    ['TREADLE_BUILD_ID', buildId],
  ] as const)
    if (value.includes(':') || value !== value.trim() || value.length > 255)
      throw configError(`${setting} must be at most 255 characters without ":" or surrounding spaces, got "${value}"`);
  return { name, buildId, workItems: versioningOf(given.workItems) };
}

/** `pinned` / `auto-upgrade` (any case, `-` or `_`) as the SDK's behaviour; the default when unset. */
function versioningOf(given: string | undefined): WorkItemVersioning {
  if (given === undefined || given === '') return DEFAULT_WORK_ITEM_VERSIONING;
  const behaviour = BEHAVIOURS[given.toLowerCase().replace(/-/g, '_')];
  if (behaviour === undefined)
    throw configError(`TREADLE_VERSIONING_BEHAVIOR must be "pinned" or "auto-upgrade", got "${given}"`);
  return behaviour;
}
