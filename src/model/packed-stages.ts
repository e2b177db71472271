/**
 * The canonical stages as the prepare activity hands them to the workflow: the first stage whole, every
 * other one as what differs from it. Canonical stages spell out every default (retry budget, activity
 * options, review policy), about 450 bytes a stage, and the activity's result is recorded in the work item's
 * history: ten stages of defaults were a quarter of a short item's history (BENCHMARKS.md). Pure and
 * zod-free, so the workflow bundle can unpack.
 */
import type { StageSpec } from './pipeline';

/** One stage after the first: the fields whose values differ from the first stage's, and those it lacks. */
export interface StageDelta {
  set: Record<string, unknown>;
  unset?: string[];
}

export interface PackedStages {
  first: StageSpec;
  others: StageDelta[];
}

type Fields = Record<string, unknown>;

/** JSON, as the history holds it: fields with `undefined` values are not there at all. */
const asFields = (stage: StageSpec): Fields => JSON.parse(JSON.stringify(stage)) as Fields;

export function packStages(stages: StageSpec[]): PackedStages | null {
  if (stages.length === 0) return null;
  const first = asFields(stages[0]!);
  const firstText = new Map(Object.entries(first).map(([key, value]) => [key, JSON.stringify(value)]));
  const others = stages.slice(1).map((stage): StageDelta => {
    const fields = asFields(stage);
    const set: Fields = {};
    for (const [key, value] of Object.entries(fields))
      if (firstText.get(key) !== JSON.stringify(value)) set[key] = value;
    const unset = Object.keys(first).filter((key) => !(key in fields));
    return unset.length > 0 ? { set, unset } : { set };
  });
  return { first: first as unknown as StageSpec, others };
}

/** The stages as `packStages` was given them (as JSON); no two share an object. */
export function unpackStages(packed: PackedStages): StageSpec[] {
  const first = packed.first as unknown as Fields;
  const others = packed.others.map((delta) => {
    const stage: Fields = { ...first, ...delta.set };
    for (const key of delta.unset ?? []) delete stage[key];
    return stage;
  });
  return [first, ...others].map((stage) => JSON.parse(JSON.stringify(stage)) as StageSpec);
}
