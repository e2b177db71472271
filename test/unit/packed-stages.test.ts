/**
 * Packed stages: the canonical spec's stages travel from the prepare activity to the workflow as the first
 * stage and differences from it; unpacking gives back exactly the canonical stages.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { type StageSpec } from '../../src/model/pipeline';
import { validatePipeline } from '../../src/kinds/pipeline';
import { packStages, unpackStages } from '../../src/model/packed-stages';

const known = { stages: ['draft', 'check', 'publish', 'scripted'], gates: ['check', 'scripted'] };

function canonical(spec: unknown): StageSpec[] {
  const result = validatePipeline(spec, known);
  if (!result.ok) throw new Error(result.problems.join('; '));
  return result.spec.stages;
}

const asJson = (value: unknown): unknown => JSON.parse(JSON.stringify(value));

it('gives back exactly the canonical stages of a pipeline whose stages differ in every kind of field', () => {
  const stages = canonical({
    name: 'varied',
    stages: [
      {
        name: 'draft',
        run: 'draft',
        description: 'first',
        with: { words: 100 },
        retry_budget: { max_attempts: 3, delay: '2s' },
        gate: 'check',
        review_policy: 'on_uncertain',
      },
      {
        name: 'check',
        run: 'check',
        depends_on: ['draft'],
        description: 'second',
        with: { words: 200, nested: { a: [1, 2] } },
      },
      {
        name: 'publish',
        run: 'publish',
        depends_on: ['draft', 'check'],
        review_policy: 'always',
        review_ttl: '1h',
        on_review_expired: 'approve',
      },
      {
        name: 'again',
        run: 'scripted',
        gate: { all: ['check', { any: ['scripted', 'check'] }] },
        retry_budget: { attempt_timeout: '30s' },
      },
    ],
  });
  const packed = packStages(stages)!;
  expect(unpackStages(asJson(packed) as typeof packed)).toEqual(asJson(stages));
  // A field the first stage has and a later one lacks (description, with, gate) is named, not guessed.
  expect(packed.others.some((d) => (d.unset ?? []).length > 0)).toBe(true);
});

it('makes a ten-stage line of defaults a fraction of its canonical size', () => {
  const stages = canonical({
    name: 'line',
    stages: Array.from({ length: 10 }, (_, i) => ({
      name: `s${i}`,
      run: 'scripted',
      ...(i > 0 ? { depends_on: [`s${i - 1}`] } : {}),
    })),
  });
  const packed = JSON.stringify(packStages(stages));
  const whole = JSON.stringify(stages);
  expect(unpackStages(JSON.parse(packed))).toEqual(asJson(stages));
  expect(packed.length).toBeLessThan(whole.length / 3);
});

it('unpacks into stages that share no object, so changing one cannot change another', () => {
  const stages = canonical({
    name: 'two',
    stages: [
      { name: 'a', run: 'scripted' },
      { name: 'b', run: 'scripted' },
    ],
  });
  const [a, b] = unpackStages(packStages(stages)!);
  a!.retryBudget.maxAttempts = 99;
  expect(b!.retryBudget.maxAttempts).toBe(stages[1]!.retryBudget.maxAttempts);
});

it('has nothing to pack for no stages', () => {
  expect(packStages([])).toBeNull();
});

it('round-trips the review demo pipeline', () => {
  const result = validatePipeline(parse(readFileSync(path.join(__dirname, '../../examples/review-demo.yaml'), 'utf8')));
  if (!result.ok) throw new Error(result.problems.join('; '));
  expect(result.spec.stages.length).toBeGreaterThan(1);
  expect(unpackStages(asJson(packStages(result.spec.stages)) as never)).toEqual(asJson(result.spec.stages));
});
