/**
 * Seed 002's example, offline: `treadle run discovery` (examples/discovery) takes explorer findings through
 * OpportunityPM → SolutionDesigner → FeasibilityDesigner → TPMAgent with a contract on each boundary. One
 * broad brief is rejected and revised into a concrete one; every solution passes; one spec is rejected
 * twice more and reaches the TPM agent with its warning, after the accepted specs.
 */
import path from 'node:path';
import { readFileSync } from 'node:fs';
import type { Json } from '../../src/model/shapes';
import { startHarness, type Harness } from '../support/harness';
import { runTreadle } from '../support/cli';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.shutdown();
});

test('the discovery pipeline validates each boundary as the seed describes, through the CLI', async () => {
  const id = h.id('discovery');
  const run = await runTreadle(h, ['run', 'discovery', '--id', id, '--wait']);
  expect(run.stderr).toBe('');
  expect(run.code).toBe(0);
  expect(run.stdout).toMatch(
    /InputValidation\s+opportunity_pm → solution_designer round 0: 3 validated, 2 accepted, 1 rejected\n/,
  );
  expect(run.stdout).toMatch(
    /InputValidation\s+feasibility_designer → tpm_agent round 2: 1 revised; 1 validated, 0 accepted, 1 rejected\n[\s\S]*InputValidation\s+feasibility_designer → tpm_agent: 2 accepted, 1 passed through with warnings\n/,
  );

  const result = await h.client.result(id);
  expect(result.status).toBe('completed');
  const upstreamOf = async (stage: string, from: string) => {
    const state = await h.client.getState(id);
    return h.client.readArtefact(state.stages[stage]!.validatedInputs![from]) as Promise<
      Record<string, Record<string, Json>[]>
    >;
  };
  const briefs = (await upstreamOf('solution_designer', 'opportunity_pm')).briefs!;
  expect(briefs.map((b) => b.affected_area)).toEqual(['checkout/payment-form', 'app', 'search/autocomplete']);
  expect(briefs[1]!.problem).toMatch(/re-renders every row on scroll/);
  const specs = (await upstreamOf('tpm_agent', 'feasibility_designer')).specs!;
  expect(specs.map((s) => [s.opportunity_id, s.validation_warnings ?? null])).toEqual([
    ['OPP-1', null],
    ['OPP-3', null],
    ['OPP-2', ['Rejected after 2 retries: risks is still empty after a second revision']],
  ]);
  const state = await h.client.getState(id);
  expect(Object.fromEntries(Object.entries(state.stages).map(([name, s]) => [name, s.qualityFlags ?? null]))).toEqual({
    opportunity_pm: null,
    solution_designer: { items_produced: 3, validation_rejections: 1, validation_retries: 1 },
    feasibility_designer: { items_produced: 3, validation_rejections: 0, validation_retries: 0 },
    tpm_agent: { items_produced: 3, validation_rejections: 3, validation_retries: 2 },
  });

  const status = await runTreadle(h, ['status', id]);
  expect(status.code).toBe(0);
  expect(status.stdout).toMatch(/Input validation \(quality contracts\):/);
  expect(status.stdout).toMatch(/tpm_agent\s+3\s+3\s+2/);
  // The example's input is what the catalog runs.
  const sample = JSON.parse(
    readFileSync(path.join(__dirname, '..', '..', 'examples', 'discovery', 'findings.json'), 'utf8'),
  ) as { findings: string[] };
  expect(sample.findings).toHaveLength(3);
}, 120_000);
