/**
 * A cancelled activity body (attempt timeout, item cancelled) that stops at once leaves no timer behind (issue 37
 * §5: Jest "did not exit one second after the test run" while the grace period's 10-s timer of the last cancelled
 * attempt was pending; a worker stopping after a cancellation waited for it too).
 */
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { CancelledFailure } from '@temporalio/common';
import { supervise } from '../../src/activities/supervision';
import { MemoryBlobStore } from '../../src/storage/blob-store';

/** The process's pending timers (what keeps it from exiting). */
function pendingTimers(): number {
  return process.getActiveResourcesInfo().filter((resource) => resource === 'Timeout').length;
}

it('clears the grace period once a cancelled body has stopped', async () => {
  const activity = new MockActivityEnvironment({ heartbeatTimeoutMs: 30_000 }, { logger: new DefaultLogger('ERROR') });
  const before = pendingTimers();
  let started!: () => void;
  const bodyStarted = new Promise<void>((resolve) => (started = resolve));
  const running = activity.run(() =>
    supervise(
      (s) =>
        new Promise<never>((_, reject) => {
          // As the scripted stage's sleep stops: at the abort, with its reason.
          s.signal.addEventListener('abort', () => reject(s.signal.reason), { once: true });
          started();
        }),
      { blobs: new MemoryBlobStore() },
    ),
  );
  await bodyStarted;
  activity.cancel('TIMED_OUT');
  await expect(running).rejects.toBeInstanceOf(CancelledFailure);
  expect(pendingTimers()).toBe(before);
});
