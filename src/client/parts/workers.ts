/**
 * `client.workers`: which workers poll a task queue, as Temporal reports them. `TreadleClient.workersPolling` and
 * `noWorkerPolls` are aliases.
 */
import { noWorkerPolls, pollersOf } from '../worker-presence';
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
}
