/**
 * Engine 1, kept only so items started on it replay: the scheduler as a loop that waits on a `condition`
 * (engine 2 made it event-driven, ../work-item-run.ts), and an attempt as an async function with an `await`
 * per step (engine 2 chained them).
 */
import { condition } from '@temporalio/workflow';
import type { AttemptOutcome } from '../../engine/stage-policy';
import type { PreparedAttempt } from '../stage-attempt';
import type { Scheduling } from '../stage-run';
import { runInlineFanOut } from '../../kinds/workflow-table';

/** Runs stages until every one has settled: a pass, then a wait until something touched the state. */
export async function scheduleByCondition(item: Scheduling): Promise<void> {
  for (;;) {
    // The runners just started touched the state before their first await; the publish below covers
    // that, so only skips (whose dependents may be skipped in turn) call for another pass at once.
    item.changed = item.startReady();
    item.publish();
    if (item.allSettled()) break;
    await condition(() => item.changed || item.cancellation !== undefined);
    if (item.cancellation !== undefined) throw item.cancellation;
    item.changed = false;
  }
}

/** Engine 1's attempt: execute, run the fan-out its outcome asks for, record, judge, each awaited. */
export async function attemptBeforeEventDriven(attempt: PreparedAttempt): Promise<AttemptOutcome> {
  const { execute, fansOut, kindRun, takeCalls, recordOutput, judgeOutput, judged } = attempt;
  const executed = await execute();
  const output = takeCalls(
    fansOut(executed) ? { ...(await runInlineFanOut(kindRun, executed.artefact)), calls: executed.calls } : executed,
  );
  const outcome = recordOutput(output);
  if (outcome !== null) return outcome;
  return judged(output, await judgeOutput(output));
}
