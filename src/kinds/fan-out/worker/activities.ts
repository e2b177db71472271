/**
 * The fan-out activities. Both prepare steps check a fan-out (a `fan_out` stage's config, or the artefact of a
 * stage that returned the `fan_out` outcome): the element stage is validated as a one-stage pipeline against
 * this worker's implementations and the pipeline is stored once, every child naming it by reference.
 *
 * - `treadle.fanOutStore` (engine 5 on) stores the elements in pages of 1,000; each element's work item reads
 *   its own out of its page (`treadle.fanOutElement`), so the fan-out's histories hold the same few bytes
 *   per element whatever it weighs. The fan-out workflow stores each run's results as a page
 *   (`treadle.fanOutStoreResults`) and joins them into the artefact at the end (`treadle.fanOutCollect`).
 * - `treadle.fanOutPrepare` (engines 1 to 4, kept for items started on them) returns the elements, those above
 *   a few hundred bytes by reference, for the work item to start one child each.
 */
import { ApplicationFailure } from '@temporalio/common';
import { checkFanOut, type FanOutConfig } from '../spec';
import {
  FAN_OUT_COLLECT_ACTIVITY,
  FAN_OUT_ELEMENT_ACTIVITY,
  FAN_OUT_INLINE_ELEMENT_BYTES,
  FAN_OUT_PAGE_ELEMENTS,
  FAN_OUT_PREPARE_ACTIVITY,
  FAN_OUT_RESULTS_ACTIVITY,
  FAN_OUT_STORE_ACTIVITY,
  MAX_FAN_OUT_ITEMS,
  MAX_INLINE_FAN_OUT_ITEMS,
  type FanOutArtefact,
  type FanOutElementRef,
  type FanOutItemResult,
  type FanOutPrepareInput,
  type FanOutPrepareResult,
  type FanOutStoreResult,
} from '../shapes';
import { DEFAULT_BLOB_THRESHOLD_BYTES } from '../../../model/limits';
import type { KnownImplementations } from '../../../model/pipeline';
import { validatePipeline } from '../../pipeline';
import type { Artefact, Json } from '../../../model/shapes';
import { offloadArtefact, readJson, resolveArtefact, storeJson, type BlobStore } from '../../../storage/blob-store';
import { resolveList } from '../../../activities/sources';

/** Element pages kept parsed by a worker: a fan-out's lanes move through the list in order, a page at a time. */
const CACHED_PAGES = 8;

/** What both prepare steps check and resolve: the config, the list, and the element pipeline (stored). */
type CheckedFanOut =
  | { ok: true; elements: Json[]; label: string; pipeline: Artefact; pipelineName: string; config: FanOutConfig }
  | { ok: false; problems: string[] };

/** What the fan-out activities are given by the worker. */
interface FanOutActivityDependencies {
  blobs: BlobStore;
  known: KnownImplementations;
}

/** The fan-out activities, over the worker's blob store and the implementations it registers. */
export function createFanOutActivities(
  deps: FanOutActivityDependencies,
): Record<string, (input: never) => Promise<unknown>> {
  const pageOf = elementPages(deps.blobs);
  const prepare = (input: FanOutPrepareInput): Promise<FanOutPrepareResult> => prepareElements(input, deps);
  const store = (input: FanOutPrepareInput): Promise<FanOutStoreResult> => storeElements(input, deps);
  const element = async ({ element }: { element: FanOutElementRef }): Promise<{ input: Json }> => {
    const page = await pageOf(element.page);
    if (!Number.isInteger(element.offset) || element.offset < 0 || element.offset >= page.length) {
      throw ApplicationFailure.nonRetryable(
        `element ${element.offset} is not in page ${element.page} (${page.length} elements)`,
        'InvalidFanOutElement',
      );
    }
    return { input: page[element.offset]! };
  };
  const storeResults = async ({
    results,
    label,
  }: {
    results: FanOutItemResult[];
    label: string;
  }): Promise<{ page: string }> => ({
    page: await storeJson(deps.blobs, results, label),
  });
  const collect = (input: CollectInput): Promise<{ artefact: Artefact }> => collectResults(input, deps.blobs);

  return {
    [FAN_OUT_PREPARE_ACTIVITY]: prepare as (input: never) => Promise<unknown>,
    [FAN_OUT_STORE_ACTIVITY]: store as (input: never) => Promise<unknown>,
    [FAN_OUT_ELEMENT_ACTIVITY]: element as (input: never) => Promise<unknown>,
    [FAN_OUT_RESULTS_ACTIVITY]: storeResults as (input: never) => Promise<unknown>,
    [FAN_OUT_COLLECT_ACTIVITY]: collect as (input: never) => Promise<unknown>,
  };
}

/** Checks a fan-out's config (or outcome) and list against `limit`, and stores its element pipeline. */
async function checkFanOutInput(
  input: FanOutPrepareInput,
  limit: number,
  why: string,
  deps: FanOutActivityDependencies,
): Promise<CheckedFanOut> {
  const fromOutcome = input.outcome !== undefined;
  const raw = fromOutcome ? ((await resolveArtefact(input.outcome, deps.blobs)) ?? null) : input.config;
  const checked = checkFanOut(
    raw,
    (pipeline) => {
      const result = validatePipeline(pipeline, deps.known);
      return result.ok ? [] : result.problems;
    },
    fromOutcome ? 'outcome' : 'config',
  );
  const where = fromOutcome ? `the fan_out outcome of ${input.stage}` : `with`;
  if (!checked.ok) return { ok: false, problems: checked.problems.map((p) => `${where}.${p}`) };
  const config = checked.config;
  const list =
    config.list !== undefined
      ? { elements: config.list as Json[], label: 'items' }
      : await resolveList(config, input.upstream as Record<string, Json>, input.input, deps.blobs);
  if ('problem' in list) return { ok: false, problems: [`${where}.${list.problem}`] };
  if (list.elements.length > limit) {
    return {
      ok: false,
      problems: [
        `${list.label} has ${list.elements.length} elements; a fan_out takes at most ${limit} (${why}): split the list over several stages or items`,
      ],
    };
  }
  const pipelineName = `${input.pipeline}.${input.stage}`;
  const spec = {
    name: pipelineName,
    description: `the element stage of ${input.stage} (fan_out of ${input.pipeline})`,
    stages: [{ name: input.stage, ...config.stage }],
  };
  const validated = validatePipeline(spec, deps.known);
  if (!validated.ok)
    throw ApplicationFailure.nonRetryable(
      `the element pipeline of ${input.stage} is invalid: ${validated.problems.join('; ')}`,
      'InvalidConfig',
    );
  const stored = await deps.blobs.put(Buffer.from(JSON.stringify(validated.spec)), 'application/json', pipelineName);
  const pipeline = { ref: stored.ref, bytes: stored.bytes, mediaType: 'application/json', summary: pipelineName };
  return { ok: true, elements: list.elements, label: list.label, pipeline, pipelineName, config };
}

/** Engines 1 to 4: the elements themselves, those above a few hundred bytes by reference. */
async function prepareElements(
  input: FanOutPrepareInput,
  deps: FanOutActivityDependencies,
): Promise<FanOutPrepareResult> {
  const checked = await checkFanOutInput(input, MAX_INLINE_FAN_OUT_ITEMS, 'each is a child workflow', deps);
  if (!checked.ok) return checked;
  const elements: Json[] = [];
  for (const element of checked.elements)
    elements.push((await offloadArtefact(element as Artefact, deps.blobs, FAN_OUT_INLINE_ELEMENT_BYTES)) ?? null);
  const { pipeline, pipelineName, config } = checked;
  return {
    ok: true,
    pipeline,
    pipelineName,
    childStage: input.stage,
    elements,
    maxConcurrent: config.maxConcurrent,
    onItemFailure: config.onItemFailure,
  };
}

/** Engine 5 on: the elements in pages of {@link FAN_OUT_PAGE_ELEMENTS}, stored by reference. */
async function storeElements(input: FanOutPrepareInput, deps: FanOutActivityDependencies): Promise<FanOutStoreResult> {
  const checked = await checkFanOutInput(input, MAX_FAN_OUT_ITEMS, 'see docs/stages/fan-out.md', deps);
  if (!checked.ok) return checked;
  const { elements, pipeline, pipelineName, config } = checked;
  // A page holds small elements themselves and larger ones by reference, so reading one stays cheap.
  const pages: string[] = [];
  for (let first = 0; first < elements.length; first += FAN_OUT_PAGE_ELEMENTS) {
    const page: Json[] = [];
    for (const element of elements.slice(first, first + FAN_OUT_PAGE_ELEMENTS))
      page.push((await offloadArtefact(element as Artefact, deps.blobs, FAN_OUT_INLINE_ELEMENT_BYTES)) ?? null);
    pages.push(await storeJson(deps.blobs, page, `elements ${first}-${first + page.length - 1} of ${input.stage}`));
  }
  return {
    ok: true,
    pipeline,
    pipelineName,
    childStage: input.stage,
    total: elements.length,
    pages,
    maxConcurrent: config.maxConcurrent,
    onItemFailure: config.onItemFailure,
    ...(config.elementsPerRun !== undefined ? { elementsPerRun: config.elementsPerRun } : {}),
  };
}

/** Reads element pages through a small cache. */
function elementPages(blobs: BlobStore): (ref: string) => Promise<Json[]> {
  // Pages are content-addressed, so a parsed page never goes stale; the oldest is dropped first.
  const pageCache = new Map<string, Promise<Json[]>>();
  return (ref: string): Promise<Json[]> => {
    let page = pageCache.get(ref);
    if (page === undefined) {
      page = readJson<Json[]>(blobs, ref);
      page.catch(() => pageCache.delete(ref));
      pageCache.set(ref, page);
      if (pageCache.size > CACHED_PAGES) pageCache.delete(pageCache.keys().next().value!);
    }
    return page;
  };
}

/** What the fan-out workflow hands the collect step: its result pages and the counts. */
interface CollectInput {
  pages: string[];
  completed: number;
  failed: number;
  summary: string;
}

/** Joins the result pages into the fan-out's artefact, offloaded when large. */
async function collectResults(input: CollectInput, blobs: BlobStore): Promise<{ artefact: Artefact }> {
  const results: FanOutItemResult[] = [];
  for (const ref of input.pages) results.push(...(await readJson<FanOutItemResult[]>(blobs, ref)));
  const artefact: FanOutArtefact = { results, completed: input.completed, failed: input.failed };
  return {
    artefact:
      (await offloadArtefact(artefact as unknown as Json, blobs, DEFAULT_BLOB_THRESHOLD_BYTES, input.summary)) ?? null,
  };
}
