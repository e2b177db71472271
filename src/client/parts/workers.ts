/**
 * `client.workers`: which workers poll a task queue, as Temporal reports them, and the worker deployments' versions
 * (docs/deploy.md). `TreadleClient.workersPolling` and `noWorkerPolls` are aliases.
 */
import { noWorkerPolls, pollersOf } from '../worker-presence';
import { deploymentNames, describeDeployment, setCurrentVersion, type DeploymentListing } from '../deployments';
import { ClientPart } from './context';

/** The workers part of `TreadleClient` (`client.workers`). */
export class WorkersClient extends ClientPart {
  /**
   * The identities of the workers that polled `taskQueue` (default: this client's) for workflow tasks in the
   * last minute or so; empty when none did, so work started there waits until one does.
   */
  async polling(taskQueue: string = this.context.taskQueue): Promise<string[]> {
    return pollersOf(this.context.client, taskQueue);
  }

  /**
   * Whether no worker polls `taskQueue` (default: this client's), checked a few times over two seconds: right
   * after a server restart a queue's pollers take a moment to show, so one empty answer proves nothing.
   */
  async nonePolls(taskQueue: string = this.context.taskQueue): Promise<boolean> {
    return noWorkerPolls(this.context.client, taskQueue);
  }

  /**
   * The versions of `deployment` (default: every deployment in the namespace), newest first: current, ramping,
   * draining or drained, and how many open work items each holds. A `not_found` error for an unknown name.
   */
  async deployments(deployment?: string): Promise<DeploymentListing[]> {
    const names = deployment !== undefined ? [deployment] : await deploymentNames(this.context.client);
    return Promise.all(names.map((name) => describeDeployment(this.context.client, name)));
  }

  /**
   * Makes `buildId` the current version of `deployment`: new items start on it, pinned items stay on theirs.
   * Answers the build that was current before (null: none, unversioned).
   */
  async setCurrentVersion(deployment: string, buildId: string): Promise<{ previous: string | null }> {
    return setCurrentVersion(this.context.client, deployment, buildId);
  }
}
