/** `checkOutput` and `parseJsonText` (src/agents/output-schema-checks.ts): a reviewer's edit checked before it is sent. */
import { checkOutput, JsonTextError, parseJsonText } from '../../src/agents/output-schema-checks';

const schema = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  required: ['title', 'tags'],
  additionalProperties: false,
  properties: {
    title: { type: 'string', minLength: 1 },
    tags: { type: 'array', items: { type: 'string' } },
    url: { type: 'string', format: 'uri' },
  },
};

it('accepts a conforming value, and anything without a schema', () => {
  expect(checkOutput(schema, { title: 't', tags: ['a'] })).toEqual([]);
  expect(checkOutput(undefined, 'any')).toEqual([]);
  expect(checkOutput(null, { x: 1 })).toEqual([]);
});

it('reports every problem with its path (allErrors), formats included', () => {
  expect(checkOutput(schema, { title: '', tags: ['a', 2], url: 'not a uri', extra: 1 })).toEqual(
    expect.arrayContaining([
      { path: '/title', message: 'must NOT have fewer than 1 characters' },
      { path: '/tags/1', message: 'must be string' },
      { path: '/url', message: 'must match format "uri"' },
      { path: '', message: 'must NOT have additional properties: extra' },
    ]),
  );
  expect(checkOutput(schema, { title: 'x' })).toEqual([{ path: '', message: "must have required property 'tags'" }]);
});

it('compiles a schema once whatever its key order, and says when a schema does not compile', () => {
  const reordered = {
    properties: schema.properties,
    type: 'object',
    additionalProperties: false,
    required: ['title', 'tags'],
  };
  expect(checkOutput(reordered, { title: 't', tags: [] })).toEqual([]);
  expect(() => checkOutput({ type: 'no-such-type' }, 1)).toThrow(/the output schema does not compile/);
});

it('says a schema whose $id is not a string does not compile, and checks against a false schema', () => {
  for (const $id of [5, true, {}])
    expect(() => checkOutput({ $id, type: 'object' }, {})).toThrow(/the output schema does not compile/);
  expect(checkOutput(false, {})).toEqual([{ path: '', message: 'boolean schema is false' }]);
});

it('parses JSON text and places a syntax error by line and column', () => {
  expect(parseJsonText('{"a": [1, 2]}')).toEqual({ a: [1, 2] });
  let error: unknown;
  try {
    parseJsonText('{\n  "a": 1,\n  "b": tru\n}');
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(JsonTextError);
  expect(error).toMatchObject({ line: 3, column: 11 });
  expect((error as Error).message).toMatch(/^not JSON at line 3, column 11: /);
});

it('places errors JSON.parse reports without a position: a missing comma, an unclosed string', () => {
  expect(() => parseJsonText('[1,\n 2\n 3]')).toThrow(/^not JSON at line 3, column 2: /);
  expect(() => parseJsonText('{"a": "open')).toThrow(/^not JSON at line 1, column 12: /);
});
