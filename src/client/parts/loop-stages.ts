/**
 * `client.loopStages`: the loop stages of work items (seed 004) — list them, read one's state, resume a failed
 * one, report a signal-fed queue. `TreadleClient.loops`, `getLoopState`, `resumeLoop` and `reportLoopQueue` are
 * aliases. (Named `loopStages` because `client.loops(id)` has long been the listing.)
 */
import type { LoopState } from '../../kinds/loop/shapes';
import { loopQueueSignal, loopStateQuery } from '../../kinds/loop/messages';
import { resumeFailedLoop, type LoopResumeOptions } from '../loop-resume';
import { ClientPart } from './context';

/** A loop stage's workflow id and its state. */
export interface LoopStageListing {
  workflowId: string;
  state: LoopState;
}

/** The loop stages part of `TreadleClient` (`client.loopStages`). */
export class LoopStagesClient extends ClientPart {
  /**
   * The loop stages of a work item (seed 004), newest attempt of each stage last: their workflow ids and
   * `loopState`. `id` may also name a loop stage's own workflow.
   */
  async list(id: string): Promise<LoopStageListing[]> {
    const type = await this.parts.items.workflowType(id);
    const ids =
      type === 'loopStage'
        ? [id]
        : [
            ...new Set(
              (await this.parts.items.events(id))
                .filter((e) => e.type === 'LoopStarted' && typeof e.details?.workflowId === 'string')
                .map((e) => e.details!.workflowId as string),
            ),
          ];
    return Promise.all(
      ids.map(async (workflowId) => ({
        workflowId,
        state: await this.context.ask(workflowId, (h) => h.query(loopStateQuery)),
      })),
    );
  }

  /** A loop stage's state: iterations, decisions, the failure waiting for a resume (`timeoutMs`: see items.state). */
  async state(loopWorkflowId: string, timeoutMs?: number): Promise<LoopState> {
    return this.context.ask(loopWorkflowId, (h) => h.query(loopStateQuery), timeoutMs);
  }

  /**
   * Resumes a failed loop stage from the iteration that failed (or gives it up: `abandon`). `id` is the work
   * item (then `stage` picks the loop when several are failed) or the loop's own workflow. Rejects with the
   * reason when no loop is failed. `by` (default `$TREADLE_REVIEWER` or `$USER`) is recorded as who decided.
   */
  async resume(
    id: string,
    options: LoopResumeOptions = {},
  ): Promise<{ workflowId: string; stage: string; from: number; resumed: boolean }> {
    const { client, reviewTimeoutMs, answerWaitMs } = this.context;
    return resumeFailedLoop(client, id, await this.list(id), options, reviewTimeoutMs, answerWaitMs);
  }

  /** Reports a signal-fed queue's length to a loop stage (its `queue: { provider: signal }`). */
  async reportQueue(loopWorkflowId: string, pending: number): Promise<void> {
    await this.context.call(loopWorkflowId, (h) => h.signal(loopQueueSignal, { pending }));
  }

  /**
   * Whether one of these loop stages failed and waits for a resume (a loop that has ended waits for nothing);
   * `items.watch` asks it for `untilLoopFails`.
   */
  async anyFailed(loopIds: ReadonlySet<string>): Promise<boolean> {
    const states = await Promise.all([...loopIds].map((loopId) => this.state(loopId).catch(() => undefined)));
    return states.some((state) => state?.status === 'failed');
  }
}
