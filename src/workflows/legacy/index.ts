/**
 * The one place the work item branches on the engine version its item started on (recorded by the prepare
 * step; histories without it are version 1). Code kept only so items of older versions replay lives here,
 * one file per span of versions; delete a file when no open item of those versions is left past the
 * retention period (docs/versioning.md, `treadle engines`):
 *
 * - engine-1.ts      engine 1: the scheduler loop on a `condition`, the attempt awaited step by step
 * - engine-1-2.ts    engines 1–2: the stage runner with its attempt helper (its steps on other ticks than engine 3)
 * - engine-1-3.ts    engines 1–3: only an activity's own model calls count
 * - kinds/fan-out/engine-1-4.ts  engines 1–4: a fan-out's elements started from the work item itself
 *
 * Engines 1–5 returned a failed item's result instead of failing its workflow (`failsWorkflow: false`).
 *
 * Engines 1–6 did not publish their pending decisions' change time (`publishesDecisions: false`).
 *
 * Engines 1–7 ran no reviewer-attention commands (`reviewerAttention: false`).
 *
 * Engines 1–8 neither carried a fork's stages nor published a correlation id they made (`lineage: false`).
 *
 * Engine 9 (ENGINE_VERSION) is the live path: ../work-item-run.ts, ../stage-runner.ts, ../stage-attempt.ts.
 */
import {
  CALL_BATCH_ENGINE,
  CHAINED_STAGE_RUNNER_ENGINE,
  DECISIONS_ENGINE,
  LINEAGE_ENGINE,
  REVIEWER_ATTENTION_ENGINE,
  EVENT_DRIVEN_SCHEDULER_ENGINE,
  ENGINE_VERSION,
  FAILED_WORKFLOW_ENGINE,
  FAN_OUT_WORKFLOW_ENGINE,
} from '../../model/state';
import { runFanOutWorkflow, runInlineFanOut } from '../../kinds/workflow-table';
import { LIVE_ENGINE } from '../stage-runner';
import type { EngineRules } from '../stage-run';
import { attemptBeforeEventDriven, scheduleByCondition } from './engine-1';
import { chainedAttempt, runStageAsync, type AttemptWork } from './engine-1-2';
import { CALLS_BEFORE_BATCHES } from './engine-1-3';

/** The rules of every engine version this worker can replay, built once: the live one for ENGINE_VERSION. */
const RULES: readonly EngineRules[] = Array.from({ length: ENGINE_VERSION }, (_, i) => rulesOf(i + 1));

/** The rules for an item that started on `version` (1 when its history does not say). */
export function engineRules(version: number | undefined): EngineRules {
  return RULES[(version ?? 1) - 1] ?? LIVE_ENGINE;
}

/** The live rules with what each older version did differently laid over them, oldest change last. */
function rulesOf(version: number): EngineRules {
  if (version >= ENGINE_VERSION) return LIVE_ENGINE;
  let rules: EngineRules = { ...LIVE_ENGINE, version };
  if (version < LINEAGE_ENGINE) rules = { ...rules, lineage: false };
  if (version < REVIEWER_ATTENTION_ENGINE) rules = { ...rules, reviewerAttention: false };
  if (version < DECISIONS_ENGINE) rules = { ...rules, publishesDecisions: false };
  if (version < FAILED_WORKFLOW_ENGINE)
    rules = { ...rules, failsWorkflow: false, fanOut: (run, outcome) => runFanOutWorkflow(run, outcome, false) };
  if (version < FAN_OUT_WORKFLOW_ENGINE) rules = { ...rules, fanOut: runInlineFanOut };
  if (version < CALL_BATCH_ENGINE) rules = { ...rules, ...CALLS_BEFORE_BATCHES };
  if (version < CHAINED_STAGE_RUNNER_ENGINE) {
    const work: AttemptWork =
      version < EVENT_DRIVEN_SCHEDULER_ENGINE ? (attempt) => () => attemptBeforeEventDriven(attempt) : chainedAttempt;
    rules = { ...rules, runStage: (run) => void runStageAsync(run, work) };
  }
  if (version < EVENT_DRIVEN_SCHEDULER_ENGINE)
    rules = { ...rules, schedule: scheduleByCondition, trustsStartAttributes: false };
  return rules;
}
