/**
 * Quality contracts (seed 002) without Temporal: the spec's contract checks (as YAML writes them and as the
 * builder does), and how the activities read a producer's list and its ids.
 */
import { readItems } from '../../src/kinds/contract/items';
import { pipeline } from '../../src/kinds/builder';
import { validatePipeline } from '../../src/kinds/pipeline';
import { BUILT_IN_IMPLEMENTATIONS } from '../../src/pipelines/catalog';
import type { ContractSpec } from '../../src/kinds/contract/spec';

const criteria = { criteria: 'one concrete surface' };
const yaml = (contract: Record<string, unknown>) => ({
  name: 'p',
  stages: [
    { name: 'pm', run: 'scripted' },
    { name: 'designer', run: 'scripted', depends_on: ['pm'] },
  ],
  contracts: [
    {
      from: 'pm',
      to: 'designer',
      items: 'briefs',
      item_id: 'affected_area',
      validate: { run: 'llm', with: criteria },
      revise: { run: 'llm', with: criteria },
      ...contract,
    },
  ],
});

describe('contracts in the spec', () => {
  test('the YAML form becomes the canonical contract, max_retries defaulting to the seed’s 2', () => {
    const result = validatePipeline(yaml({}), BUILT_IN_IMPLEMENTATIONS);
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.spec.contracts).toEqual([
      {
        from: 'pm',
        to: 'designer',
        items: 'briefs',
        itemId: 'affected_area',
        validate: { run: 'llm', with: criteria },
        revise: { run: 'llm', with: criteria },
        maxRetries: 2,
      },
    ]);
  });

  test('a pipeline without contracts has none in its canonical spec (so its histories do not change)', () => {
    const result = validatePipeline({ name: 'p', stages: [{ name: 'a', run: 'scripted' }] });
    expect(result.ok && 'contracts' in result.spec).toBe(false);
  });

  test('every problem at once: no such stages, no edge, two contracts on one edge, unknown implementations, no criteria, retries out of range', () => {
    const raw = yaml({});
    raw.contracts.push(
      {
        from: 'pm',
        to: 'designer',
        items: 'briefs',
        item_id: 'affected_area',
        validate: { run: 'judge', with: criteria },
        revise: { run: 'llm' },
        max_retries: 2,
      } as never,
      { from: 'designer', to: 'pm', items: '', item_id: 'id', validate: 'llm', revise: 'llm' } as never,
      { from: 'ghost', to: 'nobody', item_id: 'id', validate: 'llm', revise: 'llm' } as never,
    );
    const bad = validatePipeline(raw, BUILT_IN_IMPLEMENTATIONS);
    expect(bad.ok).toBe(false);
    if (bad.ok) return;
    expect(bad.problems).toEqual(
      expect.arrayContaining([
        'contracts[1] (pm → designer): a second contract on the same edge; give the edge one contract',
        'contracts[1] (pm → designer): validate: unknown validator "judge" (registered: llm)',
        'contracts[1] (pm → designer): revise.with.criteria: the llm reviser needs its criteria as text (what an acceptable item is)',
        'contracts[2] (designer → pm): stage pm does not depend on designer; add designer to its depends_on (a contract sits on a dependency edge)',
        'contracts[2] (designer → pm): validate.with.criteria: the llm validator needs its criteria as text (what an acceptable item is)',
        'contracts[3] (ghost → nobody): from: no stage named "ghost"; the stages are: pm, designer',
        'contracts[3] (ghost → nobody): to: no stage named "nobody"; the stages are: pm, designer',
        // A contract must say where its list is: "." when the artefact itself is the list.
        'contracts[3].items: required: where the list of items is in from\'s artefact, a dot path such as briefs; "." when the artefact itself is the list',
      ]),
    );
    const retries = validatePipeline(yaml({ max_retries: 9, item_id: '' }));
    expect(retries.ok).toBe(false);
    // Named as the YAML spells them.
    if (!retries.ok)
      expect(retries.problems).toEqual([
        'contracts[0].item_id: names the field that identifies each item (e.g. affected_area)',
        'contracts[0].max_retries: must be at most 5',
      ]);
  });

  test('the builder writes the same contract', () => {
    const spec = pipeline('p')
      .stage('pm', 'scripted')
      .stage('designer', 'scripted', { dependsOn: ['pm'] })
      .contract('pm', 'designer', {
        items: 'briefs',
        itemId: 'affected_area',
        validate: { run: 'llm', with: criteria },
        revise: { run: 'llm', with: criteria },
        maxRetries: 1,
      })
      .build(BUILT_IN_IMPLEMENTATIONS);
    expect(spec.contracts).toEqual([expect.objectContaining({ from: 'pm', to: 'designer', maxRetries: 1 })]);
  });
});

describe('reading the producer’s items', () => {
  const contract: ContractSpec = {
    from: 'pm',
    to: 'designer',
    items: 'out.briefs',
    itemId: 'meta.area',
    validate: { run: 'llm' },
    revise: { run: 'llm' },
    maxRetries: 2,
  };

  test('a nested list with nested ids, numbers allowed', () => {
    expect(readItems({ out: { briefs: [{ meta: { area: 'a' } }, { meta: { area: 7 } }] } }, contract)).toEqual({
      ok: true,
      items: [{ meta: { area: 'a' } }, { meta: { area: 7 } }],
      ids: ['a', '7'],
    });
  });

  test('the artefact itself as the list', () => {
    expect(readItems([{ meta: { area: 'x' } }], { ...contract, items: '' })).toMatchObject({ ok: true, ids: ['x'] });
  });

  test('no list, missing ids, duplicates and non-objects are each named', () => {
    expect(readItems({ out: {} }, contract)).toEqual({
      ok: false,
      problems: ['contract pm → designer: "out.briefs" in pm\'s artefact is not a list (it is missing)'],
    });
    expect(readItems('text', { ...contract, items: '' })).toEqual({
      ok: false,
      problems: ["contract pm → designer: pm's artefact is not a list (it is string)"],
    });
    const read = readItems(
      { out: { briefs: [{ meta: { area: 'a' } }, { meta: {} }, { meta: { area: 'a' } }, 3] } },
      contract,
    );
    expect(read).toEqual({
      ok: false,
      problems: [
        'contract pm → designer: item 1 has no "meta.area" (the contract\'s item_id)',
        'contract pm → designer: items 0 and 2 share the meta.area "a"; ids must be unique',
        'contract pm → designer: item 3 is not an object',
      ],
    });
  });

  test('at most ten problems are listed, then a count', () => {
    const read = readItems({ out: { briefs: Array.from({ length: 15 }, () => ({})) } }, contract);
    expect(read.ok).toBe(false);
    if (!read.ok) expect(read.problems).toHaveLength(11);
    if (!read.ok) expect(read.problems[10]).toBe('contract pm → designer: … and 5 more');
  });
});
