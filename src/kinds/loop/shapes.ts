/**
 * The loop stage's shapes shared by the `loopStage` workflow, its activities and the client: types and
 * constants only (no zod), so workflow code can import them. The files' schemas are in `spec.ts`.
 */
import type { Json, UsageTotals } from '../../model/shapes';

/** `run:` of a loop stage. */
export const LOOP_STAGE = 'loop';

/** Whether a pipeline spec as read (not yet validated) has a loop stage: `treadle start --wait` then shows its loops. */
export function hasLoopStages(spec: unknown): boolean {
  const stages = (spec as { stages?: unknown } | null)?.stages;
  return Array.isArray(stages) && stages.some((s) => (s as { run?: unknown } | null)?.run === LOOP_STAGE);
}

/** What an iteration's `status.json` may decide (the seed's universal format). */
export const LOOP_DECISIONS = ['continue', 'stop', 'error'] as const;
export type Decision = (typeof LOOP_DECISIONS)[number];

/** How a queue-terminated loop learns whether its queue is empty (`QueueProviderSchema` in spec.ts parses it). */
export type QueueProvider = { provider: 'command'; command: string } | { provider: 'signal' };

/** A loop's termination as `TerminationSchema` (spec.ts) parses it: the shape workflow code routes on. */
export interface Termination {
  type: 'judgment' | 'queue' | 'fixed';
  /** judgment: the consensus is checked from this iteration on. */
  min_iterations?: number;
  /** judgment: consecutive `stop` decisions needed. */
  consensus?: number;
  /** queue: where the queue is. */
  queue?: QueueProvider;
}

/** `context.json`, exactly the seed's fields. Paths in `paths` are relative to the workspace. */
export interface LoopContext {
  session: string;
  pipeline: string;
  stage: { id: string; index: number; template: string };
  iteration: number;
  paths: { session_dir: string; stage_dir: string; progress: string; output: string; status: string };
  inputs: {
    /** By stage: paths relative to the session folder (`stage-01-synthesize/output.md`). */
    from_stage: Record<string, string[]>;
    /** Paths relative to the stage folder (`iterations/001/output.md`). */
    from_previous_iterations: string[];
  };
  limits: { max_iterations: number; remaining_seconds: number };
  /** The note the person who resumed the loop left for the iteration it reruns (issue 40), and who they are. */
  resume?: { note: string; by?: string };
}

/** Why an iteration failed, as `state.json` and the state query give it (the seed's failure state). */
export interface LoopError {
  type: 'agent_crash' | 'missing_status' | 'invalid_status' | 'agent_error' | 'invalid_config';
  message: string;
  timestamp: string;
}

/** The `loopStage` workflow's input (and its continue-as-new carry). */
export interface LoopStageInput {
  /** The work item this loop is a stage of. */
  itemId: string;
  pipeline: string;
  /** The work item's stage name (the seed's stage id). */
  stage: string;
  /** The stage definition and paths, stored once by the prepare activity. */
  planRef: string;
  /** What the plan holds that the workflow routes on. */
  plan: LoopPlan;
  /** Correlation id of the run (seed 003), for the call log. */
  correlationId?: string;
  /** Carried across continue-as-new. */
  carry?: LoopCarry;
  /**
   * Set by engine-7 work items: a failure waiting for `resumeLoop` is listed like a review (the
   * `treadleReviews` memo, `TreadlePendingReviews`, `TreadleDecisionAt`). Kept across continue-as-new.
   */
  publishesDecisions?: boolean;
  /**
   * Set by work items that announce (engine 8 with a notifications file): a failure waiting to be resumed is
   * announced to webhooks (`decision_owed`, then `decided`). Kept across continue-as-new.
   */
  announces?: boolean;
}

/** What the workflow needs of the stage's plan (the whole plan, prompt included, is in the blob store). */
export interface LoopPlan {
  session: string;
  /** `stage-NN-<id>`, relative to the session folder. */
  stageDir: string;
  /** The session folder, relative to the workspace (or absolute when the runs directory is outside it). */
  sessionDir: string;
  termination: Termination;
  maxIterations: number;
  maxRuntimeSeconds: number;
  /** Epoch ms after which the pipeline guardrail stops the loop, if there is one. */
  pipelineDeadlineMs: number | null;
  delaySeconds: number;
  iterationsPerRun: number;
  /** The output file, relative to the workspace. */
  output: string;
  /**
   * Iterations already in the stage folder (an earlier attempt's, or a reused session's): this loop numbers
   * its iterations after them and never overwrites one.
   */
  startIteration?: number;
}

/** One iteration as the workflow keeps it: small, whatever the files hold. */
export interface IterationRecord {
  iteration: number;
  decision: Decision;
  reason: string;
  summary: string;
  filesTouched: number;
  itemsCompleted: number;
  verify: { ran: boolean; passed: boolean; summary: string } | null;
  /** `sha256:` of the output after the iteration (none when the agent wrote none). */
  outputRef?: string;
  outputBytes: number;
  calls: number;
}

export interface LoopCarry {
  /** Iterations completed (across runs). */
  iteration: number;
  consecutiveStops: number;
  startedAtMs: number;
  /** The last iterations (at most {@link KEPT_ITERATIONS}); all of them are in the session's files. */
  recent: IterationRecord[];
  decisions: Record<Decision, number>;
  runs: number;
  /** Set while the loop is failed and waiting to be resumed. */
  failure?: LoopFailure;
  /** The last report of a signal-fed queue. */
  queuePending?: number;
  lastOutputRef?: string;
  lastOutputBytes?: number;
  verifyFailures: number;
  /** How the last failure was answered (kept across continue-as-new). */
  lastResume?: LoopResume;
  /** Iteration activities run (reruns after a resume included). */
  iterationRuns?: number;
  /** The totals of every iteration's model calls (reruns included), for the work item's usage and token budget. */
  usage?: UsageTotals;
}

/** Iterations kept in workflow state (the rest are on disk). */
export const KEPT_ITERATIONS = 20;

export interface LoopFailure {
  status: 'failed';
  iteration: number;
  error: LoopError;
  resume_from: number;
  /**
   * `sha256:` of `progress.md` as the failed iteration left it (text/markdown), for the review inbox: the only
   * copy stored, since only a failed loop waits for a person (absent: no file, or a worker before 0.x).
   */
  progressRef?: string;
}

/** The `state` query of a loop stage; also the work item's stage details. */
export interface LoopState {
  itemId: string;
  stage: string;
  session: string;
  status: 'running' | 'waiting_queue' | 'failed' | 'completed' | 'stopped' | 'cancelled';
  iteration: number;
  maxIterations: number;
  termination: Termination;
  consecutiveStops: number;
  decisions: Record<Decision, number>;
  recent: IterationRecord[];
  /** The seed's failure state while failed (also in `state.json`). */
  failure?: LoopFailure;
  /** How the last failure was resumed or abandoned, and by whom. */
  lastResume?: LoopResume;
  stoppedBy?: { by: 'termination' | 'guardrail'; reason: string };
  queuePending?: number;
  runs: number;
  paths: { session_dir: string; stage_dir: string; output: string };
}

/** What a finished loop stage hands the work item: the stage's artefact. */
export interface LoopArtefact {
  session: string;
  stage: string;
  stageDir: string;
  iterations: number;
  stoppedBy: { by: 'termination' | 'guardrail'; reason: string };
  decisions: Record<Decision, number>;
  /** The output file (workspace-relative) and its final content by reference. */
  output: string;
  outputRef: string | null;
  outputBytes: number;
  /** Session-relative: `stage-NN-id/output.md` and every `stage-NN-id/iterations/NNN/output.md`. */
  latest: string;
  snapshots: string;
  /**
   * The final output's text, so templates (`{{ upstream.<stage>.text }}`) and gates read it as they read any
   * artefact; the whole artefact goes to the blob store when large, like every artefact.
   */
  text?: string;
}

/** What the loop workflow returns: its artefact, and the totals of its model calls (kept out of the artefact). */
export type LoopResult = LoopArtefact & { usage?: UsageTotals };

/** Update name to resume a failed loop (or give it up). */
export const RESUME_LOOP_UPDATE = 'resumeLoop';
/** Signal name a signal-fed queue's owner reports its length with. */
export const LOOP_QUEUE_SIGNAL = 'loopQueue';

/** What `treadle resume` sends. */
export interface ResumeRequest {
  action?: 'resume' | 'abandon';
  reason?: string;
  /** Who resumed or abandoned the loop (the CLI sends `$TREADLE_REVIEWER` or `$USER`; the inbox its reviewer). */
  by?: string;
  /** With a resume: what the rerun iteration should do differently (at most 4096 characters); it reads it in `context.json`. */
  note?: string;
}

/** How the last failure of a loop was answered: kept in its state, so who decided is known after a resume. */
export interface LoopResume {
  action: 'resume' | 'abandon';
  /** The failed iteration it answered. */
  iteration: number;
  at: string;
  by?: string;
  reason?: string;
  /** The resume's note for the iteration it reruns. */
  note?: string;
}

/** `iterations/NNN`. */
export function iterationDir(iteration: number): string {
  return `iterations/${String(iteration).padStart(3, '0')}`;
}

/** `stage-NN-<id>`. */
export function stageDirName(index: number, id: string): string {
  return `stage-${String(index).padStart(2, '0')}-${id}`;
}

/** One iteration to run (`treadle.loopIteration`). */
export interface LoopIterationInput {
  planRef: string;
  iteration: number;
  correlationId?: string;
  /** `limits.remaining_seconds` of `context.json`, as the workflow computed it. */
  remainingSeconds: number;
  /** Iterations run so far, failed ones and reruns included, plus one: the scripted agent's reply number. */
  run?: number;
  /** The note of the resume this iteration reruns after, and who resumed (`context.json`'s `resume`). */
  note?: string;
  noteBy?: string;
}

export type LoopIterationResult = (
  | ({ ok: true } & IterationRecord)
  | {
      ok: false;
      iteration: number;
      error: LoopError;
      calls: number;
      /** `sha256:` of `progress.md` as the failed iteration left it (absent: no file, or recorded before 0.x). */
      progressRef?: string;
    }
) & {
  /** The totals of the iteration's model calls (absent: none, or a worker before totals); the records are in the call log. */
  usage?: UsageTotals;
};

export interface LoopWriteStateInput {
  planRef: string;
  status: 'running' | 'failed' | 'completed' | 'stopped';
  iteration: number;
  failure?: LoopFailure;
  stoppedBy?: { by: 'termination' | 'guardrail'; reason: string };
  /** A resume's note (and who resumed), recorded in `state.json` with the stage's entry. */
  resume?: { note: string; by?: string };
}

/** `loopPrepare`'s input: the stage as the work item has it. */
export interface LoopPrepareInput {
  itemId: string;
  pipeline: string;
  stage: string;
  /** Position of the stage in the pipeline (`NN` of `stage-NN-<id>` unless the config sets `index`). */
  stageIndex: number;
  config: Json | null;
  /** The work item's input (a reference when large). */
  input: Json;
  /** Artefacts of the stages this one depends on. */
  upstream: Record<string, Json>;
  /** When the work item started (the pipeline runtime guardrail counts from it). */
  itemStartedAtMs: number;
  /** The stage's attempt, and the gate's feedback on the one before (written to progress.md for the agents). */
  attempt?: number;
  feedback?: { summary: string; failed: string[] } | null;
}

export type LoopPrepareResult = { ok: true; planRef: string; plan: LoopPlan } | { ok: false; problems: string[] };
