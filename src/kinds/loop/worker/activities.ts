/**
 * The loop stage's activities (seed 004): every file the seed names, in its layout, under the session's run
 * folder on the worker (`<workspace>/.treadle/pipeline-runs/<session>/`):
 *
 * ```
 * state.json                     the seed's pipeline state (and failure state)
 * inputs/                        upstream artefacts of ordinary stages, the work item's input
 * stage-NN-<id>/
 *   progress.md                  append-only learnings
 *   output.md                    the current output (a copy when the output lives elsewhere)
 *   iterations/NNN/              context.json, status.json, output.md (snapshot), verify.log
 * ```
 *
 * - `loopPrepare` (prepare.ts) checks the stage's config, makes the folders, writes the inputs and stores the plan once.
 * - `loopIteration` (iteration.ts) runs one iteration: writes `context.json`, renders the prompt with `${CTX}`,
 *   `${PROGRESS}`, `${OUTPUT}`, `${STATUS}` (and `${SESSION}`), runs a **fresh** agent (no conversation),
 *   reads and validates `status.json`, snapshots the output, makes sure `progress.md` has the iteration,
 *   and runs the `verify` commands. An agent that fails or reports an error is a *result* (fail fast: the
 *   workflow stops and waits for a resume), never a thrown error Temporal would retry blindly; what is
 *   thrown (a full disk, a lost worker) is infrastructure, Temporal's to retry, and a retried iteration first
 *   puts `progress.md` and the output back as they were before it.
 * - `loopQueueCheck` asks a command-based queue whether it is empty (commands.ts); `loopWriteState` writes
 *   `state.json` (run-folder.ts).
 *
 * A spec never names a file the worker reads: prompts come inline, paths are checked to stay inside the
 * workspace, and commands must be on the worker's allow-list (`TREADLE_LOOP_COMMANDS`).
 */
import { checkQueue } from './commands';
import { iterate } from './iteration';
import { prepare } from './prepare';
import { loopFolders, writeState, type StoredPlan } from './run-folder';
import type { QueueReading } from '../termination';
import type { AgentProviders } from '../../../agents/providers';
import {
  LOOP_ARTEFACT_ACTIVITY,
  LOOP_CHECK_QUEUE_ACTIVITY,
  LOOP_ITERATION_ACTIVITY,
  LOOP_PREPARE_ACTIVITY,
  LOOP_WRITE_STATE_ACTIVITY,
} from '../../../model/activity-types';
import { DEFAULT_BLOB_THRESHOLD_BYTES } from '../../../model/limits';
import type {
  LoopArtefact,
  LoopIterationInput,
  LoopIterationResult,
  LoopPrepareInput,
  LoopPrepareResult,
  LoopWriteStateInput,
} from '../spec';
import type { Artefact, Json } from '../../../model/shapes';
import { offloadArtefact, readJson, type BlobStore } from '../../../storage/blob-store';
import { callLogWriter, type CallLog } from '../../../storage/call-log';
import { supervise, withHeartbeats } from '../../../activities/supervision';

/** What the loop activities are given by the worker. */
export interface LoopActivityDependencies {
  blobs: BlobStore;
  agents: AgentProviders;
  callLog?: CallLog;
  env?: NodeJS.ProcessEnv;
  /** Artefacts above this size go to the blob store (the worker's `TREADLE_BLOB_THRESHOLD`). */
  blobThresholdBytes?: number;
}

/** The loop stage's activities, registered under their `LOOP_*_ACTIVITY` names. */
export function createLoopActivities(deps: LoopActivityDependencies) {
  const env = deps.env ?? process.env;
  // Plans and scripted replies are read by every iteration of a loop: once per worker is enough (content-addressed).
  const stored = new Map<string, unknown>();
  const jsonOf = async <T>(ref: string): Promise<T> => {
    if (stored.has(ref)) return stored.get(ref) as T;
    const value = await readJson<T>(deps.blobs, ref);
    if (stored.size > 100) stored.clear();
    stored.set(ref, value);
    return value;
  };
  const planOf = (ref: string): Promise<StoredPlan> => jsonOf<StoredPlan>(ref);
  const where = (): { workspace: string; runs: string } => loopFolders(env);
  return {
    // Every loop activity heartbeats: their heartbeat timeout is how soon a lost worker is noticed.
    [LOOP_PREPARE_ACTIVITY]: async (input: LoopPrepareInput): Promise<LoopPrepareResult> =>
      withHeartbeats(() => prepare(input, deps, env, where())),
    [LOOP_ITERATION_ACTIVITY]: async (input: LoopIterationInput): Promise<LoopIterationResult> => {
      const plan = await planOf(input.planRef);
      const replies = plan.repliesRef ? await jsonOf<Json>(plan.repliesRef) : undefined;
      return supervise(
        (supervision) => iterate({ plan, replies, input, deps, env, workspace: where().workspace, supervision }),
        {
          blobs: deps.blobs,
          onCalls: callLogWriter(deps.callLog, { pipeline: plan.pipeline, stage: plan.stage }),
        },
      );
    },
    [LOOP_CHECK_QUEUE_ACTIVITY]: async (input: { planRef: string }): Promise<QueueReading> => {
      const plan = await planOf(input.planRef);
      return withHeartbeats(() => checkQueue(plan, env, where().workspace));
    },
    // The stage's artefact for the work item: the loop's result with the final output's text, offloaded when large.
    [LOOP_ARTEFACT_ACTIVITY]: async (input: { artefact: LoopArtefact }): Promise<Artefact> => {
      const { artefact } = input;
      return withHeartbeats(async () => {
        const text = artefact.outputRef ? (await deps.blobs.get(artefact.outputRef)).toString('utf8') : undefined;
        const full = { ...artefact, ...(text !== undefined ? { text } : {}) } as unknown as Json;
        return (await offloadArtefact(
          full,
          deps.blobs,
          deps.blobThresholdBytes ?? DEFAULT_BLOB_THRESHOLD_BYTES,
          `loop ${artefact.stage}: ${artefact.iterations} iterations, ${artefact.outputBytes} bytes of output`,
        ))!;
      });
    },
    [LOOP_WRITE_STATE_ACTIVITY]: async (input: LoopWriteStateInput): Promise<void> => {
      const plan = await planOf(input.planRef);
      await withHeartbeats(() => writeState(plan, input, where().workspace));
    },
  };
}
