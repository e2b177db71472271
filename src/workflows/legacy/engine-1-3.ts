/**
 * Engines 1 to 3, kept only so items started on them replay: which model calls count. Before engine 4
 * (CALL_BATCH_ENGINE) only an activity's own calls did (its result's, or its failure's details); a stage kind's
 * totals, a timed-out activity's last heartbeat and a fanned-out stage's elements were left out, and TDD trees
 * and loops were not under the token budget, so these items' budget checks decide as they did.
 */
import { failureDetails } from '../../workflow-kit/common';
import { workflowKind } from '../../kinds/workflow-table';
import { agentBackedStage } from '../stage-attempt';
import type { EngineRules } from '../stage-run';

/** The call rules of engines 1 to 3. */
export const CALLS_BEFORE_BATCHES: Pick<
  EngineRules,
  'fanOutOutcome' | 'callsOfFailure' | 'reportsCalls' | 'usesAgent'
> = {
  fanOutOutcome: (run, kindRun, _record, executed, then) =>
    run.engine
      .fanOut(kindRun, executed.artefact)
      .then(({ calls: _elements, ...fanned }) =>
        then({ ...fanned, ...(executed.calls ? { calls: executed.calls } : {}) }),
      ),
  callsOfFailure: (error) => failureDetails(error, false)?.calls,
  // A stage kind's result reports totals these engines did not count.
  reportsCalls: (stage) => workflowKind(stage.run) === undefined,
  usesAgent: agentBackedStage,
};
