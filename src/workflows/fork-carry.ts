/**
 * A fork's start (engine 9, `treadle fork`): the stages it carries from its original are completed as they
 * ended there, artefacts and all, without an activity or a model call; the rest run as in any item, the stage
 * it was forked from first among them.
 */
import type { PipelineSpec } from '../model/pipeline';
import type { ForkOrigin, WorkItemState } from '../model/state';
import { now } from '../workflow-kit/common';
import type { EventStream } from '../workflow-kit/publishing';
import type { EngineRules } from './stage-run';

/**
 * Marks `fork`'s carried stages completed in `state` and says so in the event stream; returns every problem
 * instead (a carried stage the spec does not have, or the stage forked from among the carried), changing nothing.
 */
export function carryStages(
  state: WorkItemState,
  spec: PipelineSpec,
  fork: ForkOrigin,
  emit: EventStream['emit'],
  engine: Pick<EngineRules, 'lineage' | 'version'>,
): string[] {
  if (!engine.lineage)
    return [
      `fork of ${fork.of}: the worker that prepared it starts items on engine ${engine.version}, which cannot carry stages (9 and later can)`,
    ];
  const names = new Set(spec.stages.map((stage) => stage.name));
  const carried = Object.keys(fork.carried);
  const problems = [
    ...carried
      .filter((name) => !names.has(name))
      .map((name) => `it carries stage ${name}, which its pipeline does not have`),
    ...(names.has(fork.from) ? [] : [`it is forked from stage ${fork.from}, which its pipeline does not have`]),
    ...(carried.includes(fork.from) ? [`it carries stage ${fork.from}, the stage it is forked from`] : []),
  ];
  if (problems.length > 0) return problems.map((problem) => `fork of ${fork.of}: ${problem}`);
  state.forkOf = { id: fork.of, from: fork.from };
  emit(
    'ItemForked',
    `forked from ${fork.of} at stage ${fork.from}; ${carried.length} stage${carried.length === 1 ? '' : 's'} carried`,
    { details: { of: fork.of, from: fork.from, carried } },
  );
  const at = now();
  for (const name of carried) {
    const { artefact, summary } = fork.carried[name]!;
    Object.assign(state.stages[name]!, {
      status: 'completed',
      carriedFrom: fork.of,
      startedAt: at,
      completedAt: at,
      ...(artefact !== undefined ? { artefact } : {}),
      ...(summary !== undefined ? { summary } : {}),
    });
    emit('StageCarried', `${name} carried from ${fork.of} (not run again)`, { stage: name });
  }
  return [];
}
