/**
 * A worker's Worker Deployment Version (docs/deploy.md, "Upgrading workers with Worker Deployment Versioning"):
 * the settings read, the SDK options they become, and the start line's note.
 */
import type { WorkerOptions } from '@temporalio/worker';
import {
  checkedDeployment,
  deploymentFromEnv,
  type WorkerDeployment,
  type WorkItemVersioning,
} from '../config/deployment';

/** The deployment a worker declares: the one given (null: none), else the environment's; checked either way. */
export function deploymentOf(options: {
  deployment?: { name: string; buildId: string; workItems?: WorkItemVersioning } | null;
}): WorkerDeployment | undefined {
  if (options.deployment === null) return undefined;
  return options.deployment === undefined ? deploymentFromEnv() : checkedDeployment(options.deployment);
}

/**
 * The SDK's deployment options for a versioned worker. The worker's default behaviour is the work items' (their
 * workflow types declare none): PINNED keeps an item, with its fan-outs, TDD nodes and loop stages, on the build
 * it started on, so that build's code may go once its version drains. The limiter and notifier declare
 * AUTO_UPGRADE themselves (src/capacity/workflow.ts, src/notify/workflow.ts).
 */
export function versioningOptions(deployment: WorkerDeployment | undefined): Partial<WorkerOptions> {
  if (!deployment) return {};
  return {
    workerDeploymentOptions: {
      useWorkerVersioning: true,
      version: { deploymentName: deployment.name, buildId: deployment.buildId },
      defaultVersioningBehavior: deployment.workItems,
    },
  };
}
