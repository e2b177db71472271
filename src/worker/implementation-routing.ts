/**
 * Which activities of a spec leave the item's queue (docs/deploy.md, "Task queues"): the prepare step routes
 * the implementations, gates, action types, validators and revisers a worker lacks to the queues the spec names.
 */
import { CONTRACT_REVISE_ACTIVITY, CONTRACT_VALIDATE_ACTIVITY, gateActivityType } from '../model/activity-types';
import { gateLeaves } from '../model/gate-ref';
import type { PipelineSpec, StageSpec } from '../model/pipeline';
import { kindSpecChecks } from '../kinds/pipeline';
import { LLM_CONTRACT_IMPLEMENTATION, type ContractSpec } from '../kinds/contract/shapes';
import type { RegisteredNames } from './task-queues';

/**
 * The spec with each stage's `queues`: its activity types (implementation, `gate:<name>`) that this worker
 * does not register, on the stage's `task_queue`, else the pipeline's; and each contract's `queues`: its
 * validate and revise activities whose validator or reviser this worker does not register, on the contract's
 * `task_queue`, else its consuming stage's, else the pipeline's. Validation has made sure each of them has
 * one; a stage or contract with nothing to route is returned as it was, so old specs schedule as before.
 */
export function routeImplementations(spec: PipelineSpec, registered: RegisteredNames): PipelineSpec {
  const stages = spec.stages.map((stage): StageSpec => {
    const queue = stage.taskQueue ?? spec.taskQueue;
    if (queue === undefined) return stage;
    const kind = kindSpecChecks(stage.run);
    const action = kind?.actionOf?.(stage.with);
    const types = [
      ...(registered.stages.includes(stage.run) ? [] : [stage.run]),
      ...(action !== undefined && !(registered.actions ?? []).includes(action) ? (kind?.actionActivities ?? []) : []),
      ...gateLeaves(stage.gate)
        .map((g) => g.run)
        .filter((gate) => !registered.gates.includes(gate))
        .map(gateActivityType),
    ];
    return types.length > 0 ? { ...stage, queues: Object.fromEntries(types.map((type) => [type, queue])) } : stage;
  });
  if (spec.contracts === undefined) return { ...spec, stages };
  const contracts = spec.contracts.map((contract) => routeContract(contract, spec, registered));
  return { ...spec, stages, contracts };
}

/** A contract with its `queues` when its validator or reviser is not this worker's (see routeImplementations). */
function routeContract(contract: ContractSpec, spec: PipelineSpec, registered: RegisteredNames): ContractSpec {
  const consumer = spec.stages.find((stage) => stage.name === contract.to);
  const queue = contract.taskQueue ?? consumer?.taskQueue ?? spec.taskQueue;
  if (queue === undefined) return contract;
  // A registry always holds the built-in llm validator and reviser.
  const known = (names: readonly string[] | undefined) => names ?? [LLM_CONTRACT_IMPLEMENTATION];
  const types = [
    ...(known(registered.validators).includes(contract.validate.run) ? [] : [CONTRACT_VALIDATE_ACTIVITY]),
    ...(known(registered.revisers).includes(contract.revise.run) ? [] : [CONTRACT_REVISE_ACTIVITY]),
  ];
  return types.length > 0 ? { ...contract, queues: Object.fromEntries(types.map((type) => [type, queue])) } : contract;
}
