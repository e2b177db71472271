/**
 * A stage's `output_schema:` in the pipeline spec (issue 27): checked with every other problem, kept as the
 * schema's own spelling, and a registered implementation's schema (or an `llm` stage's reply schema) copied
 * into stages that give none.
 */
import Ajv2020 from 'ajv/dist/2020';
import { Registry } from '../../src/activities/registry';
import { checkOutput, outputSchemaProblem } from '../../src/agents/output-schema-checks';
import { outputSchemaChecks } from '../../src/agents/output-schema-checks-lazy';
import { pipeline } from '../../src/kinds/builder';
import { validatePipeline } from '../../src/kinds/pipeline';
import { MAX_OUTPUT_SCHEMA_CHARS } from '../../src/model/limits';
import { BUILT_IN_IMPLEMENTATIONS } from '../../src/pipelines/catalog';

// The real lazy accessor, counted: a merged registry must not check its schemas again.
jest.mock('../../src/agents/output-schema-checks-lazy', () => {
  const actual = jest.requireActual('../../src/agents/output-schema-checks-lazy');
  return { outputSchemaChecks: jest.fn(actual.outputSchemaChecks) };
});

const known = { stages: ['draft', 'publish'], gates: [], outputSchemaProblem };
const schema = {
  type: 'object',
  required: ['first_name'],
  properties: { first_name: { type: 'string' }, email: { type: 'string', format: 'email' } },
};

it('keeps a stage output_schema in the canonical spec, its property names as written', () => {
  const result = validatePipeline({ name: 'p', stages: [{ name: 'a', run: 'draft', output_schema: schema }] }, known);
  expect(result.ok && result.spec.stages[0]!.outputSchema).toEqual(schema);
});

it('lists a schema that does not compile with every other problem of the spec', () => {
  // The CLI's built-ins check schemas too (`treadle validate`, `treadle run`).
  const builtIn = validatePipeline(
    { name: 'p', stages: [{ name: 'a', run: 'scripted', output_schema: { type: 'objekt' } }] },
    BUILT_IN_IMPLEMENTATIONS,
  );
  expect(builtIn.ok ? [] : builtIn.problems).toEqual([
    expect.stringMatching(/^stage a: output_schema: does not compile: schema is invalid: \/type must be/),
  ]);
  const result = validatePipeline(
    {
      name: 'p',
      stages: [
        { name: 'a', run: 'draft', output_schema: { type: 'object', requird: ['x'] } },
        { name: 'b', run: 'drfat', output_schema: { type: 'strin' } },
        { name: 'c', run: 'draft', output_schema: { $ref: 'https://example.com/schema.json' } },
        { name: 'd', run: 'draft', output_schema: ['not', 'an', 'object'] },
      ],
    },
    known,
  );
  expect(result.ok).toBe(false);
  const problems = result.ok ? [] : result.problems;
  expect(problems).toEqual(
    expect.arrayContaining([
      expect.stringMatching(/^stage a: output_schema: does not compile: unknown keyword: "requird"/),
      expect.stringMatching(
        /^stage b: output_schema: does not compile: schema is invalid: \/type must be equal to one of/,
      ),
      expect.stringMatching(
        /^stage c: output_schema: can't resolve reference https:\/\/example.com\/schema.json.*not fetched: put the definition under \$defs/,
      ),
      'stages[3] (d).output_schema: must be a JSON Schema object (draft 2020-12)',
      expect.stringMatching(/^stage b: unknown stage implementation "drfat"/),
    ]),
  );
  const found = result.ok ? [] : result.found.filter((p) => p.text.includes('output_schema'));
  expect(found.map((p) => p.at)).toEqual(
    expect.arrayContaining([
      ['stages', 0, 'outputSchema'],
      ['stages', 1, 'outputSchema'],
      ['stages', 2, 'outputSchema'],
    ]),
  );
});

it('refuses a schema larger than the bound without compiling it', () => {
  const huge = { type: 'object', description: 'x'.repeat(MAX_OUTPUT_SCHEMA_CHARS) };
  const result = validatePipeline({ name: 'p', stages: [{ name: 'a', run: 'draft', output_schema: huge }] }, known);
  expect(result.ok ? [] : result.problems).toEqual([
    `stages[0] (a).output_schema: must be at most ${MAX_OUTPUT_SCHEMA_CHARS} characters of JSON; keep the schema to what a reviewer's edit must hold`,
  ]);
});

it("copies a registered implementation's schema into stages that give none; a spec's own schema wins", () => {
  const registered = { type: 'object', required: ['body'] };
  const registry = new Registry()
    .stage('draft', async () => ({ outcome: 'completed' }), { outputSchema: registered })
    .stage('publish', async () => ({ outcome: 'completed' }));
  const result = validatePipeline(
    {
      name: 'p',
      stages: [
        { name: 'a', run: 'draft' },
        { name: 'b', run: 'draft', output_schema: schema },
        { name: 'c', run: 'publish' },
      ],
    },
    registry.names(),
  );
  expect(result.ok).toBe(true);
  const stages = result.ok ? result.spec.stages : [];
  expect(stages.map((s) => s.outputSchema)).toEqual([registered, schema, undefined]);
  // A merged registry keeps the schema.
  expect(new Registry().merge(registry).names().outputSchemas).toEqual({ draft: registered });
});

it("gives an llm stage without output_schema: its reply's with.output_schema as its edit schema, when it compiles (issue 37 §5)", () => {
  const llm = (extra: Record<string, unknown>, replySchema: unknown = schema) => ({
    name: 'p',
    stages: [{ name: 'a', run: 'llm', with: { prompt: 'x', output_schema: replySchema }, ...extra }],
  });
  const edit = (raw: unknown) => {
    const result = validatePipeline(raw, BUILT_IN_IMPLEMENTATIONS);
    if (!result.ok) throw new Error(result.problems.join('\n'));
    return result.spec.stages[0]!.outputSchema;
  };
  expect(edit(llm({}))).toEqual(schema);
  // The stage's own output_schema wins; a reply schema the strict rules refuse checks replies only.
  const own = { type: 'object', required: ['summary'] };
  expect(edit(llm({ output_schema: own }))).toEqual(own);
  expect(edit(llm({}, { type: 'object', requird: ['x'] }))).toBeUndefined();
  // Not an llm stage: its with: is its implementation's business.
  const scripted = { name: 'p', stages: [{ name: 'a', run: 'scripted', with: { output_schema: schema } }] };
  expect(edit(scripted)).toBeUndefined();
});

it('refuses to register a schema that would not pass a spec', () => {
  expect(() =>
    new Registry().stage('draft', async () => ({ outcome: 'completed' }), { outputSchema: { type: 'objekt' } }),
  ).toThrow(/stage implementation "draft": outputSchema does not compile: schema is invalid/);
  expect(() => new Registry().stage('draft', async () => ({ outcome: 'completed' }), { outputSchema: [] })).toThrow(
    'stage implementation "draft": outputSchema must be a JSON Schema object (draft 2020-12)',
  );
});

it("the builder's outputSchema is the spec's output_schema", () => {
  const spec = pipeline('p').stage('a', 'draft').outputSchema('a', schema).build(known);
  expect(spec.stages[0]!.outputSchema).toEqual(schema);
  expect(() => pipeline('p').stage('a', 'draft').outputSchema('b', schema).build(known)).toThrow(
    'outputSchema("b", …): no stage named "b"',
  );
});

it('checks values against schemas that share an $id, one after the other', () => {
  const v1 = { $id: 'https://example.com/post', type: 'object', required: ['title'] };
  const v2 = { $id: 'https://example.com/post', type: 'object', required: ['body'] };
  expect(checkOutput(v1, { title: 't' })).toEqual([]);
  expect(checkOutput(v2, { title: 't' })).toEqual([{ path: '', message: "must have required property 'body'" }]);
  // The spec check does not keep schemas by $id either.
  const spec = (s: object) =>
    validatePipeline({ name: 'p', stages: [{ name: 'a', run: 'draft', output_schema: s }] }, known);
  expect(spec(v1).ok && spec(v2).ok).toBe(true);
});

it('lists a schema whose $id is not a string as a problem instead of throwing (a spec is untrusted input)', () => {
  for (const $id of [5, true, {}]) {
    const result = validatePipeline(
      { name: 'p', stages: [{ name: 'a', run: 'draft', output_schema: { $id, type: 'object' } }] },
      known,
    );
    expect(result.ok ? [] : result.problems).toEqual([
      expect.stringMatching(/^stage a: output_schema: does not compile: schema is invalid: \/\$id must be string/),
    ]);
  }
});

it("compiles a spec's output schema once however often the spec is validated (every prepare step, start, child)", () => {
  const compile = jest.spyOn(Ajv2020.prototype, 'compile');
  try {
    const good = { type: 'object', description: 'validated three times' };
    const bad = { type: 'object', requird: ['validated twice'] };
    const validate = (s: object) =>
      validatePipeline({ name: 'p', stages: [{ name: 'a', run: 'draft', output_schema: s }] }, known);
    for (const s of [good, { ...good }, { description: good.description, type: 'object' }])
      expect(validate(s).ok).toBe(true);
    const problems = [validate(bad), validate({ ...bad })].map((result) => (result.ok ? [] : result.problems));
    expect(problems[1]).toEqual(problems[0]);
    expect(problems[0]).toEqual([expect.stringMatching(/unknown keyword: "requird"/)]);
    expect(compile).toHaveBeenCalledTimes(2);
  } finally {
    compile.mockRestore();
  }
});

it('a merged registry keeps the schemas the other one checked, without checking them again', () => {
  const registered = { type: 'object', required: ['body'] };
  const other = new Registry().stage('draft', async () => ({ outcome: 'completed' }), { outputSchema: registered });
  const checks = jest.mocked(outputSchemaChecks);
  checks.mockClear();
  expect(new Registry().merge(other).names().outputSchemas).toEqual({ draft: registered });
  expect(checks).not.toHaveBeenCalled();
  expect(() => new Registry().merge(other).merge(other)).toThrow('stage implementation "draft" is already registered');
});
