/**
 * One rule per task queue (docs/deploy.md, "Task queues"): the core queue runs the workflows and exactly
 * what Treadle ships, and implementations of your own run on queues their spec names. This module holds
 * whether a core worker's registrations are the shipped set and the commands that start a worker on a queue;
 * which activities of a spec leave the item's queue is implementation-routing.ts (it reads the kinds' spec
 * checks, which load zod: the client loads this module and must not).
 */
import { DEFAULT_TASK_QUEUE } from '../config';
import { CONTRACT_REVISE_ACTIVITY, CONTRACT_VALIDATE_ACTIVITY, gateActivityType } from '../model/activity-types';
import { APPROVAL_CREATE_ACTIVITY, APPROVAL_EXECUTE_ACTIVITY } from '../kinds/approval/shapes';

/** The names a worker registers, as a Registry's `names()` and the action registry give them. */
export interface RegisteredNames {
  stages: readonly string[];
  gates: readonly string[];
  validators?: readonly string[];
  revisers?: readonly string[];
  actions?: readonly string[];
}

/** Names one registry adds to another, by kind (`stage summarize`, `gate tone`, `action type notify`). */
export function namesBeyond(given: RegisteredNames, shipped: RegisteredNames): string[] {
  const extra = (kind: string, names: readonly string[] | undefined, known: readonly string[] | undefined) =>
    beyond(names, known).map((name) => `${kind} ${name}`);
  return [
    ...extra('stage', given.stages, shipped.stages),
    ...extra('gate', given.gates, shipped.gates),
    ...extra('validator', given.validators, shipped.validators),
    ...extra('reviser', given.revisers, shipped.revisers),
    ...extra('action type', given.actions, shipped.actions),
  ];
}

/**
 * The activity types an implementations queue serves: the stages, gates (`gate:<name>`), approval actions
 * and contract validators and revisers (`treadle.contractValidate`, `treadle.contractRevise`) that `own`
 * adds to what Treadle ships. Throws (a `config` error) when `own` adds nothing at all.
 */
export function implementationActivityTypes(
  queue: string,
  own: RegisteredNames,
  shipped: RegisteredNames,
): Set<string> {
  const types = new Set([
    ...beyond(own.stages, shipped.stages),
    ...beyond(own.gates, shipped.gates).map(gateActivityType),
    ...(beyond(own.actions, shipped.actions).length > 0 ? [APPROVAL_CREATE_ACTIVITY, APPROVAL_EXECUTE_ACTIVITY] : []),
    ...(beyond(own.validators, shipped.validators).length > 0 ? [CONTRACT_VALIDATE_ACTIVITY] : []),
    ...(beyond(own.revisers, shipped.revisers).length > 0 ? [CONTRACT_REVISE_ACTIVITY] : []),
  ]);
  if (types.size === 0)
    // A setting to fix, as a CoreQueueRegistrationError is: `treadle worker` and the SDK's callers exit 2.
    throw Object.assign(
      new Error(
        `the implementations queue ${queue} would serve nothing: the registry and approvalActions add no stage, gate, validator, reviser or action type to what Treadle ships`,
      ),
      { code: 'config' },
    );
  return types;
}

/** The names in `names` that `known` lacks. */
function beyond(names: readonly string[] | undefined, known: readonly string[] | undefined): string[] {
  return (names ?? []).filter((name) => !(known ?? []).includes(name));
}

/** Thrown when a worker on the core queue would register more than Treadle ships. */
export class CoreQueueRegistrationError extends Error {
  readonly code = 'config';
  constructor(
    readonly taskQueue: string,
    readonly extras: string[],
  ) {
    super(
      `the core task queue ${taskQueue} runs only what Treadle ships, so every worker on it registers the same; ` +
        `this worker adds ${extras.join(', ')}. Give those implementations a queue of their own: ` +
        `runWorker({ registry, implementationsQueue: 'my-queue' }) (or TREADLE_IMPLEMENTATIONS_QUEUE), and name ` +
        'it as task_queue in the pipeline, the stage or the contract',
    );
    this.name = 'CoreQueueRegistrationError';
  }
}

/**
 * The line `run` and `validate` add under problems that a `task_queue` would solve (a stage, gate, validator
 * or reviser Treadle does not ship, not a typo of one, named with no queue); empty when there is none.
 */
export function missingQueueHint(problems: readonly string[]): string {
  // A name close to a shipped one is a typo, and its problem already says so.
  const unshipped = problems.some((p) =>
    /unknown (stage implementation|gate implementation|validator|reviser) "[^"]*"(?! \(did you mean)/.test(p),
  );
  return unshipped
    ? '\nImplementations Treadle does not ship run on a queue of their own: name the task_queue their worker polls ' +
        '(on the stage or the contract, or on the pipeline for all of them; docs/stages/code.md#writing-implementations).'
    : '';
}

/** The command that starts a worker polling `taskQueue`. */
export function workerCommandFor(taskQueue: string): string {
  // `treadle worker` alone polls the default queue, or TREADLE_TASK_QUEUE: on another queue it would not help.
  return taskQueue === DEFAULT_TASK_QUEUE ? 'treadle worker' : `TREADLE_TASK_QUEUE=${taskQueue} treadle worker`;
}
