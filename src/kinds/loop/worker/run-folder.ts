/**
 * Where a loop works on the worker: the workspace, the session's run folder under it, the plan every
 * iteration reads, and the seed's `state.json` in the run folder.
 */
import { mkdir, readFile, rename, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { LoopPlan, LoopWriteStateInput } from '../spec';
import type { Json } from '../../../model/shapes';
import { isRecord } from '../../../activities/sources';
import { homeLocation } from '../../../config/home';

/** The folder loops work in (agents act there; output paths are relative to it); default `<TREADLE_HOME>/workspace`. */
export const LOOP_WORKSPACE_ENV = 'TREADLE_LOOP_WORKSPACE';
/** The runs folder, relative to the workspace unless absolute; default `.treadle/pipeline-runs`. */
export const LOOP_RUNS_ENV = 'TREADLE_LOOP_RUNS';
export const DEFAULT_LOOP_RUNS = path.join('.treadle', 'pipeline-runs');

/** Everything an iteration needs, stored once per stage (prompt included). */
export interface StoredPlan extends LoopPlan {
  itemId: string;
  pipeline: string;
  stage: string;
  stageIndex: number;
  template: string;
  prompt: string;
  agent?: string;
  model?: string;
  verify: string[];
  /** `context.json`'s `inputs.from_stage`, session-relative. */
  fromStage: Record<string, string[]>;
  /** The scripted agent's replies (the work item's `agent_replies`), by reference. */
  repliesRef?: string;
  /** The output file also goes to the stage folder's `output.md` (when it lives elsewhere). */
  mirrorOutput: boolean;
}

/** The workspace (a relative one taken from the home) and the runs folder, absolute, as the worker's environment sets them. */
export function loopFolders(env: NodeJS.ProcessEnv): { workspace: string; runs: string } {
  const workspace = homeLocation(LOOP_WORKSPACE_ENV, env);
  return { workspace, runs: path.resolve(workspace, env[LOOP_RUNS_ENV] || DEFAULT_LOOP_RUNS) };
}

/** Writes the session's `state.json` (atomically): this stage's entry, and the top level the seed reads. */
export async function writeState(plan: StoredPlan, input: LoopWriteStateInput, workspace: string): Promise<void> {
  const file = path.resolve(workspace, plan.sessionDir, 'state.json');
  await mkdir(path.dirname(file), { recursive: true });
  const existing = await readFile(file, 'utf8').then(
    (t) => JSON.parse(t) as Record<string, Json>,
    () => ({}) as Record<string, Json>,
  );
  const stages = isRecord(existing.stages) ? existing.stages : {};
  const mine = {
    status: input.status,
    iteration: input.iteration,
    ...(input.stoppedBy ? { stopped_by: input.stoppedBy } : {}),
    ...(input.resume ? { resume: input.resume } : {}),
    updated_at: new Date().toISOString(),
  };
  // The seed's failure state is the top level: status, iteration, error, resume_from.
  const top = input.failure
    ? {
        status: 'failed',
        stage: plan.stage,
        iteration: input.failure.iteration,
        error: input.failure.error,
        resume_from: input.failure.resume_from,
      }
    : { status: input.status, stage: plan.stage, iteration: input.iteration };
  const state = { session: plan.session, pipeline: plan.pipeline, ...top, stages: { ...stages, [plan.stage]: mine } };
  const temporary = `${file}.${process.pid}.tmp`;
  await writeFile(temporary, `${JSON.stringify(state, null, 2)}\n`);
  await rename(temporary, file);
}

/** A path as the workspace-relative posix path agents are given, or absolute when it lies outside the workspace. */
export function relativeOrAbsolute(workspace: string, target: string): string {
  const relative = path.relative(workspace, target);
  return relative.startsWith('..') || path.isAbsolute(relative) ? target : relative.split(path.sep).join('/');
}

/** A work item id as a folder name. */
export function safeName(id: string): string {
  return id.replace(/[^A-Za-z0-9._-]/g, '_');
}

/** A file's size in bytes, 0 when it is missing. */
export async function sizeOf(file: string): Promise<number> {
  return stat(file).then(
    (s) => s.size,
    () => 0,
  );
}
