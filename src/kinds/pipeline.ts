/**
 * The pipeline spec's validation over every stage kind: what every spec has is checked by src/model/ (the
 * bottom layer, which imports no kind); the checks a kind makes itself, with or without a worker's names,
 * are added here, where the kinds are visible. `validatePipeline` and `parsePipeline` are public API.
 */
import {
  PipelineValidationError,
  validatePipelineWith,
  type KindSpecChecks,
  type KnownImplementations,
  type PipelineSpec,
  type ValidationResult,
} from '../model/pipeline';
import { isRecord } from '../model/pipeline-checks';
import { workerKinds } from './index';

/**
 * The kinds' own spec checks, for the kinds whose row in the table has any (the fan-out's: its element stage, its
 * weight in the item's history; the approval's: the action type it requests). Read at each validation, so a kind
 * registered later (a test's, a fork's) is checked too.
 */
function allSpecChecks(): KindSpecChecks[] {
  return workerKinds().flatMap((kind) => (kind.specChecks ? [kind.specChecks] : []));
}

/** The spec checks of the kind a stage's `run:` names, if it has any (the worker's task-queue routing reads them). */
export function kindSpecChecks(run: string): KindSpecChecks | undefined {
  return workerKinds().find((kind) => kind.name === run)?.specChecks;
}

/**
 * Validates a pipeline spec written in any accepted form (builder output, parsed YAML with snake_case keys,
 * or an already canonical spec) and reports every problem at once: the schema (unknown fields, required ones,
 * bad durations), the graph (duplicates, unknown dependencies, cycles), the contracts, each stage's `with:` by
 * its kind, and, when `known` is given, the names a worker registers (implementations, validators, revisers,
 * action types) and their config checks. History and activity limits are checked once the schema holds.
 */
export function validatePipeline(raw: unknown, known?: KnownImplementations): ValidationResult {
  return validatePipelineWith(raw, known, allSpecChecks());
}

/** Like {@link validatePipeline} but throws a {@link PipelineValidationError}. */
export function parsePipeline(raw: unknown, known?: KnownImplementations): PipelineSpec {
  const result = validatePipeline(raw, known);
  if (!result.ok) {
    const named = isRecord(raw) && typeof raw.name === 'string' ? raw.name : '(unnamed)';
    throw new PipelineValidationError(named, result.problems);
  }
  return result.spec;
}
