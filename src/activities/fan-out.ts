/**
 * `treadle.fanOutPrepare`: turns a fan-out (a `fan_out` stage's config, or the artefact of a stage that
 * returned the `fan_out` outcome) into its children's inputs. The element stage is validated as a one-stage
 * pipeline against this worker's implementations; the pipeline is stored once and every child names it by
 * reference; elements above a few hundred bytes are stored too, so the parent's history holds one small
 * reference per child whatever the elements weigh.
 */
import { ApplicationFailure } from '@temporalio/common';
import { checkFanOut } from '../model/fan-out-config';
import { FAN_OUT_INLINE_ELEMENT_BYTES, FAN_OUT_PREPARE_ACTIVITY, MAX_FAN_OUT_ITEMS, type FanOutPrepareInput, type FanOutPrepareResult } from '../model/fan-out';
import { validatePipeline, type KnownImplementations } from '../model/pipeline';
import type { Artefact, Json } from '../model/shapes';
import { offloadArtefact, resolveArtefact, type BlobStore } from '../storage/blob-store';
import { resolveList } from './sources';

export function createFanOutActivities(deps: { blobs: BlobStore; known: KnownImplementations }): Record<string, (input: never) => Promise<unknown>> {
  const prepare = async (input: FanOutPrepareInput): Promise<FanOutPrepareResult> => {
    const fromOutcome = input.outcome !== undefined;
    const raw = fromOutcome ? ((await resolveArtefact(input.outcome, deps.blobs)) ?? null) : input.config;
    const checked = checkFanOut(raw, (pipeline) => {
      const result = validatePipeline(pipeline, deps.known);
      return result.ok ? [] : result.problems;
    }, fromOutcome ? 'outcome' : 'config');
    const where = fromOutcome ? `the fan_out outcome of ${input.stage}` : `with`;
    if (!checked.ok) return { ok: false, problems: checked.problems.map((p) => `${where}.${p}`) };
    const config = checked.config;
    const list = config.list !== undefined ? { elements: config.list as Json[], label: 'items' } : await resolveList(config, input.upstream as Record<string, Json>, input.input, deps.blobs);
    if ('problem' in list) return { ok: false, problems: [`${where}.${list.problem}`] };
    if (list.elements.length > MAX_FAN_OUT_ITEMS) {
      return { ok: false, problems: [`${list.label} has ${list.elements.length} elements; a fan_out takes at most ${MAX_FAN_OUT_ITEMS} (each is a child workflow): split the list over several stages or items`] };
    }
    const pipelineName = `${input.pipeline}.${input.stage}`;
    const spec = { name: pipelineName, description: `the element stage of ${input.stage} (fan_out of ${input.pipeline})`, stages: [{ name: input.stage, ...config.stage }] };
    const validated = validatePipeline(spec, deps.known);
    if (!validated.ok) throw ApplicationFailure.nonRetryable(`the element pipeline of ${input.stage} is invalid: ${validated.problems.join('; ')}`, 'InvalidConfig');
    const stored = await deps.blobs.put(Buffer.from(JSON.stringify(validated.spec)), 'application/json', pipelineName);
    const elements: Json[] = [];
    for (const element of list.elements) elements.push((await offloadArtefact(element as Artefact, deps.blobs, FAN_OUT_INLINE_ELEMENT_BYTES)) ?? null);
    return {
      ok: true,
      pipeline: { ref: stored.ref, bytes: stored.bytes, mediaType: 'application/json', summary: pipelineName },
      pipelineName,
      childStage: input.stage,
      elements,
      maxConcurrent: config.maxConcurrent,
      onItemFailure: config.onItemFailure,
    };
  };
  return { [FAN_OUT_PREPARE_ACTIVITY]: prepare as (input: never) => Promise<unknown> };
}
