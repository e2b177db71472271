/**
 * What the spec validation asks of a `human` stage without a worker: its `with:` ({instructions, reviewers}) and
 * an `output_schema`, which the person's output must satisfy (the inbox's form is generated from it).
 */
import type { KindSpecChecks } from '../../model/pipeline-shapes';
import { HUMAN_STAGE, checkHumanStageConfig } from './shapes';

/** The human kind's spec checks (its worker row's `specChecks`, read by src/kinds/pipeline.ts). */
export const humanSpecChecks: KindSpecChecks = {
  name: HUMAN_STAGE,
  configProblems: (config) => checkHumanStageConfig(config).map((line) => ({ layer: 'config', line })),
  stageProblems: (stage) =>
    stage.output_schema === undefined && stage.outputSchema === undefined
      ? [
          "output_schema: required for run: human (the JSON Schema the person's output must satisfy, e.g. output_schema: {type: object, required: [approved], properties: {approved: {type: boolean}}})",
        ]
      : [],
  attemptEvents: 2,
};
