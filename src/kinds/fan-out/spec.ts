/**
 * The `with:` of a `fan_out` stage (and the artefact of a stage returning the `fan_out` outcome):
 *
 *   - name: classify
 *     type: fan_out
 *     depends_on: [extract]
 *     with:
 *       from: extract            # default: the only dependency (none: the work item's input)
 *       items: emails            # a dotted path to the list (default: the artefact itself)
 *       stage:                   # what runs for each element: any stage, without name and depends_on
 *         run: llm
 *         with: { prompt: "Classify: {{ input | json }}" }
 *         gate: llm-judge
 *         retry_budget: { max_attempts: 2 }
 *       max_concurrent: 10
 *       on_item_failure: continue   # continue (default): failures are reported in the results; fail: the stage fails
 *       elements_per_run: 500       # optional: the fan-out workflow continues as new after this many elements
 *                                   # (default: when its history passes 1 MB)
 *
 * The element stage is checked as a one-stage pipeline, so it takes everything a stage takes and reports
 * its problems the same way.
 */
import { z } from 'zod';
import { DEFAULT_FAN_OUT_CONCURRENCY, FAN_OUT_STAGE, MAX_FAN_OUT_CONCURRENCY } from './shapes';
import type { KindSpecChecks, KindSpecProblem } from '../../model/pipeline-shapes';
import { describeConfigIssues } from '../../model/spec-problems';

const fieldPath = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*$/, 'must be a dotted path such as emails or result.items');

const FanOutSettings = z
  .object({
    from: z.string().min(1, 'must not be empty').optional(),
    items: fieldPath.optional(),
    stage: z.record(z.string(), z.unknown(), { error: 'must be a stage: {run, with?, gate?, retry_budget?, ...}' }),
    max_concurrent: z
      .number()
      .int('must be a whole number')
      .min(1, 'must be at least 1')
      .max(MAX_FAN_OUT_CONCURRENCY, `must be at most ${MAX_FAN_OUT_CONCURRENCY}`)
      .default(DEFAULT_FAN_OUT_CONCURRENCY),
    on_item_failure: z.enum(['continue', 'fail']).default('continue'),
    elements_per_run: z.number().int('must be a whole number').min(1, 'must be at least 1').optional(),
  })
  .strict();
/** What a stage returning the `fan_out` outcome gives: the list itself instead of `from`/`items`. */
const FanOutOutcome = FanOutSettings.omit({ from: true, items: true }).extend({
  items: z.array(z.unknown(), { error: 'must be the list of elements' }),
});

export interface FanOutConfig {
  from?: string;
  items?: string;
  stage: Record<string, unknown>;
  maxConcurrent: number;
  onItemFailure: 'continue' | 'fail';
  elementsPerRun?: number;
}

/**
 * Checks a fan-out config; `checkStage` validates the element stage as a one-stage pipeline and returns its
 * problems (the caller passes `validatePipeline` with the worker's implementations, avoiding an import cycle).
 */
export function checkFanOut(
  config: unknown,
  checkStage: (pipeline: unknown) => string[],
  form: 'config' | 'outcome' = 'config',
): { ok: true; config: FanOutConfig & { list?: unknown[] } } | { ok: false; problems: string[] } {
  const parsed = (form === 'config' ? FanOutSettings : FanOutOutcome).safeParse(config ?? {});
  const fields = Object.keys((form === 'config' ? FanOutSettings : FanOutOutcome).shape);
  const fieldsAt = (path: readonly PropertyKey[]) => (path.length === 0 ? fields : undefined);
  const problems = parsed.success ? [] : describeConfigIssues(parsed.error.issues, config ?? {}, { fieldsAt });
  // The element stage is checked even when the settings around it are wrong: every problem at once.
  const given = (config as { stage?: unknown } | null | undefined)?.stage;
  const readable = typeof given === 'object' && given !== null && !Array.isArray(given) ? given : undefined;
  const stage = parsed.success ? parsed.data.stage : (readable as Record<string, unknown> | undefined);
  if (stage === undefined) return { ok: false, problems };
  if ('name' in stage || 'depends_on' in stage || 'dependsOn' in stage)
    problems.push(
      'stage: takes no name or depends_on (the element stage is named after the fan_out stage and has no dependencies)',
    );
  if (stage.run === FAN_OUT_STAGE || stage.type === FAN_OUT_STAGE)
    problems.push(
      'stage: a fan_out cannot fan out again directly; give the element stage a pipeline of its own instead',
    );
  const { name: _n, depends_on: _d, dependsOn: _dd, ...rest } = stage;
  problems.push(
    ...checkStage({ name: 'fan-out-element', stages: [{ name: 'element', ...rest }] }).map((p) =>
      p.replace(/^stages\[0\] \(element\)/, 'stage').replace(/^stage element: /, 'stage: '),
    ),
  );
  if (problems.length > 0 || !parsed.success) return { ok: false, problems };
  const data = parsed.data as z.output<typeof FanOutSettings> & { items?: unknown };
  return {
    ok: true,
    config: {
      ...(typeof data.from === 'string' ? { from: data.from } : {}),
      ...(typeof data.items === 'string' ? { items: data.items } : {}),
      ...(Array.isArray(data.items) ? { list: data.items } : {}),
      stage: rest,
      maxConcurrent: data.max_concurrent,
      onItemFailure: data.on_item_failure,
      ...(data.elements_per_run !== undefined ? { elementsPerRun: data.elements_per_run } : {}),
    },
  };
}

/**
 * The fan-out's own check in the spec validation (its `specChecks`, worker/kind.ts), with or without a worker's
 * names: its `with:`, and its element stage as a one-stage pipeline; the element's implementation names are the
 * worker's to confirm (`registry`), like the stage's own (run --custom-worker).
 */
export const fanOutConfigProblems: KindSpecChecks['configProblems'] = (config, validate) => {
  const registry: string[] = [];
  const checked = checkFanOut(config, (element) => {
    const result = validate(element);
    if (result.ok) return [];
    const names = result.found.filter((p) => p.layer === 'registry');
    registry.push(...names.map((p) => p.text.replace(/^stage element: /, 'stage: ')));
    return result.found.filter((p) => p.layer !== 'registry').map((p) => p.text);
  });
  const problems: KindSpecProblem[] = checked.ok ? [] : checked.problems.map((line) => ({ layer: 'config', line }));
  return [...problems, ...registry.map((line): KindSpecProblem => ({ layer: 'registry', line }))];
};
