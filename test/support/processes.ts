/** Process checks shared by tests that start and kill processes, and the worker-polling check they wait on. */
import type { ChildProcess } from 'node:child_process';
import type { Connection } from '@temporalio/client';

/** True while a process with this pid exists (signal 0 checks without sending anything). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Stops a child with SIGTERM and waits for it to exit; nothing when it has already. */
export async function stopProcess(child: ChildProcess): Promise<void> {
  if (!child.pid || child.exitCode !== null || child.signalCode !== null || !isAlive(child.pid)) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

/** How many workers poll a task queue for workflow tasks (1, the default) or activity tasks (2). */
export async function pollerCount(connection: Connection, taskQueue: string, type: 1 | 2 = 1): Promise<number> {
  const answer = await connection.workflowService.describeTaskQueue({
    namespace: 'default',
    taskQueue: { name: taskQueue },
    taskQueueType: type,
  });
  return (answer.pollers ?? []).length;
}
