/**
 * Changed settings of a pipeline spec, as `treadle fork --set stage.key=value` and an evaluation's variant file
 * (`--variant name=overrides.yaml`) give them: applied to the spec as written (snake_case keys, `stages` a list
 * named by `name`), before it is validated like any other. One shape for both:
 *
 * ```yaml
 * token_budget: 20000          # any pipeline key
 * stages:
 *   draft:                     # a stage by name
 *     with: { temperature: 0 } # objects merge key by key; lists and values replace; null removes the key
 * ```
 */
import type { Json } from './shapes';

/** Settings to change: pipeline keys, and under `stages` each stage's by name. */
export interface SpecOverrides {
  [key: string]: Json | undefined;
  stages?: { [stage: string]: { [key: string]: Json } };
}

type JsonObject = { [key: string]: Json };

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * One `stage.key.path=value` setting as overrides; the value is JSON when it parses as JSON (`3`, `true`,
 * `{"a":1}`, `"quoted"`), else the text itself. Throws an Error saying what is wrong with the setting.
 */
export function settingOverride(setting: string): SpecOverrides {
  const equals = setting.indexOf('=');
  const path = equals < 0 ? [] : setting.slice(0, equals).split('.');
  if (equals < 0 || path.length < 2 || path.some((part) => part.trim() === ''))
    throw new Error(`--set takes stage.key=value (a key may have dots: draft.with.model=…), got "${setting}"`);
  const text = setting.slice(equals + 1);
  let value: Json;
  try {
    value = JSON.parse(text) as Json;
  } catch {
    value = text;
  }
  const [stage, ...keys] = path as [string, ...string[]];
  let nested: Json = value;
  for (const key of keys.reverse()) nested = { [key]: nested };
  return { stages: { [stage]: nested as JsonObject } };
}

/** Several overrides as one; later ones win where they set the same key. */
export function combineOverrides(list: readonly SpecOverrides[]): SpecOverrides {
  // A null is kept here: it removes the key when the result is applied.
  return list.reduce<JsonObject>((all, next) => merged(all, next as JsonObject, true), {}) as SpecOverrides;
}

/** `base` with `change` merged in: objects key by key, anything else replaced, null removing the key. */
function merged(base: JsonObject, change: JsonObject, keepNull = false): JsonObject {
  const out: JsonObject = { ...base };
  for (const [key, value] of Object.entries(change)) {
    if (value === null && !keepNull) delete out[key];
    else if (isObject(value) && isObject(out[key])) out[key] = merged(out[key] as JsonObject, value, keepNull);
    else out[key] = value;
  }
  return out;
}

/**
 * The spec as written with `overrides` applied, or every problem (a stage the spec does not have, overrides that
 * are not an object, a stage's settings that are not one, a try to rename a stage). The result is validated
 * by the caller like any spec.
 */
export function applyOverrides(
  spec: unknown,
  overrides: SpecOverrides,
): { ok: true; spec: JsonObject } | { ok: false; problems: string[] } {
  if (!isObject(spec) || !Array.isArray(spec.stages))
    return { ok: false, problems: ['the pipeline spec is not an object with a list of stages'] };
  if (!isObject(overrides)) return { ok: false, problems: ['overrides must be an object (pipeline keys, stages)'] };
  const { stages: stageOverrides, ...pipelineKeys } = overrides as JsonObject;
  const problems: string[] = [];
  if (stageOverrides !== undefined && !isObject(stageOverrides))
    problems.push('overrides: `stages` must map stage names to their settings');
  const byStage = isObject(stageOverrides) ? stageOverrides : {};
  const names = spec.stages.map((stage) => (isObject(stage) ? stage.name : undefined));
  for (const [name, settings] of Object.entries(byStage)) {
    if (!names.includes(name))
      problems.push(`overrides: no stage named "${name}" (the stages: ${names.map(String).join(', ')})`);
    else if (!isObject(settings)) problems.push(`overrides: stages.${name} must be an object of settings`);
    else if ('name' in settings && settings.name !== name) problems.push(`overrides: stages.${name} cannot rename it`);
  }
  if (problems.length > 0) return { ok: false, problems };
  const stages = spec.stages.map((stage) => {
    const change = isObject(stage) && typeof stage.name === 'string' ? byStage[stage.name] : undefined;
    return change === undefined ? stage : merged(stage as JsonObject, change as JsonObject);
  });
  return { ok: true, spec: { ...merged(spec, pipelineKeys as JsonObject), stages } };
}

/** The stages `overrides` change, by name. */
export function overriddenStages(overrides: SpecOverrides): string[] {
  return isObject(overrides.stages) ? Object.keys(overrides.stages) : [];
}
