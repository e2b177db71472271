/**
 * kinds/tdd/spec.ts: spec files, a Scaffold's child specs, and each node's exit schema. Cases:
 * - validateTddSpec: the example spec file; a spec without `tdd:` gets every default; partial `tdd:` settings
 *   keep the rest at their defaults; each problem alone names its field; every problem of one file at once;
 *   each limit's range;
 * - checkChildSpecs: no children; the depth limit; the child-count limit; duplicate ids; all together;
 * - exit schemas: a valid reply of every exit (and the example's scripted replies) parses; missing fields,
 *   wrong field types, non-whole `Int`s, unknown or foreign `exit` names, bad paths and enum values are
 *   refused; `Maybe` fields accept null and absence; CoverageReport's pairs are exactly two strings.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { SAMPLE_EXITS, exitNamesOf } from '../support/tdd-exits';
import {
  CoverageReportSchema,
  EXIT_SCHEMAS,
  SpecSchema,
  TDD_LIMITS,
  TDD_NODES,
  TddSettingsSchema,
  checkChildSpecs,
  validateTddSpec,
  type ChildSpec,
  type ExitName,
  type TddNodeName,
} from '../../src/kinds/tdd/spec';

const EXAMPLES = path.join(__dirname, '..', '..', 'examples', 'tdd');

/** A small valid spec file without `tdd:` settings. */
function specFile(): Record<string, unknown> {
  return {
    id: 'textkit',
    description: 'A tiny text toolkit.',
    acceptanceCriteria: [
      { id: 'TK1', text: 'wordCount(text) counts words' },
      { id: 'TK2', text: 'headline(text) capitalises every word' },
    ],
    targetPath: 'src/textkit.js',
    testPath: 'test/textkit.test.js',
  };
}

/** The settings a spec file without `tdd:` runs with. */
const DEFAULT_SETTINGS = {
  testCommand: ['node', '--test'],
  testTimeoutSeconds: 120,
  nudgeTimeoutSeconds: 60,
  maxDepth: 3,
  maxChildren: 8,
  maxReviewRounds: 3,
  maxScaffoldRuns: 4,
  maxInvalidReplies: 2,
};

/** The problems of `raw`, which must be refused. */
function problemsOf(raw: unknown): string[] {
  const checked = validateTddSpec(raw);
  if (checked.ok) throw new Error(`expected problems, the spec was accepted: ${JSON.stringify(raw)}`);
  return checked.problems;
}

/** The problems that name `field` (`field: …`). */
function naming(problems: string[], field: string): string[] {
  return problems.filter((p) => p.startsWith(`${field}: `));
}

// ---------------------------------------------------------------------------------------------------------
// validateTddSpec

describe('validateTddSpec: valid spec files', () => {
  test('the example spec file: its settings apply, the others keep their defaults', () => {
    const checked = validateTddSpec(parseYaml(readFileSync(path.join(EXAMPLES, 'textkit.yaml'), 'utf8')));
    expect(checked).toEqual({
      ok: true,
      spec: expect.objectContaining({ id: 'textkit', targetPath: 'src/textkit.js', testPath: 'test/textkit.test.js' }),
    });
    if (!checked.ok) return;
    expect(checked.spec.complexityConstraints).toEqual({ time: 'O(n) in the length of the text' });
    expect(checked.spec.tdd).toEqual({ ...DEFAULT_SETTINGS, testTimeoutSeconds: 60, maxDepth: 2, maxChildren: 4 });
  });

  test('without `tdd:` every setting has its default', () => {
    const checked = validateTddSpec(specFile());
    expect(checked).toEqual({ ok: true, spec: { ...specFile(), tdd: DEFAULT_SETTINGS } });
  });

  test("the defaults are the limits' defaults and the seed's 60 s nudge", () => {
    for (const [key, limit] of Object.entries(TDD_LIMITS))
      expect({ key, value: DEFAULT_SETTINGS[key as keyof typeof DEFAULT_SETTINGS] }).toEqual({
        key,
        value: limit.default,
      });
    expect(TddSettingsSchema.parse({})).toEqual(DEFAULT_SETTINGS);
  });

  test('empty `tdd:` settings are the defaults', () => {
    expect(validateTddSpec({ ...specFile(), tdd: {} })).toEqual({
      ok: true,
      spec: { ...specFile(), tdd: DEFAULT_SETTINGS },
    });
  });

  test('partial `tdd:` settings keep the rest at their defaults', () => {
    const tdd = {
      testCommand: ['npx', 'jest'],
      maxDepth: 1,
      agent: 'scripted',
      humanTtlSeconds: 86_400,
      baseBranch: 'main',
    };
    expect(validateTddSpec({ ...specFile(), tdd })).toEqual({
      ok: true,
      spec: { ...specFile(), tdd: { ...DEFAULT_SETTINGS, ...tdd } },
    });
  });

  test.each([
    ['absent', {}],
    ['null', { complexityConstraints: null }],
    ['with both bounds', { complexityConstraints: { time: 'O(n log n)', space: 'O(1)' } }],
    ['with null and absent bounds', { complexityConstraints: { time: null } }],
  ])('complexityConstraints %s (Maybe Constraints)', (_name, extra) => {
    expect(validateTddSpec({ ...specFile(), ...extra }).ok).toBe(true);
  });

  test.each(['a', 'textkit', 'text_kit-2', 'A9'])('spec id %j', (id) => {
    expect(validateTddSpec({ ...specFile(), id }).ok).toBe(true);
  });
});

describe('validateTddSpec: each problem names its field', () => {
  const criterion = { id: 'TK1', text: 'counts words' };
  test.each([
    { problem: 'missing description', patch: { description: undefined }, field: 'description' },
    { problem: 'empty description', patch: { description: '' }, field: 'description' },
    { problem: 'empty acceptance criteria', patch: { acceptanceCriteria: [] }, field: 'acceptanceCriteria' },
    { problem: 'missing acceptance criteria', patch: { acceptanceCriteria: undefined }, field: 'acceptanceCriteria' },
    {
      problem: 'a criterion without an id',
      patch: { acceptanceCriteria: [{ id: '', text: 'x' }] },
      field: 'acceptanceCriteria.0.id',
    },
    {
      problem: 'duplicate criterion ids',
      patch: { acceptanceCriteria: [criterion, { ...criterion, text: 'again' }] },
      field: 'acceptanceCriteria',
      says: /"TK1"/,
    },
    { problem: 'testPath equal to targetPath', patch: { testPath: 'src/textkit.js' }, field: 'testPath' },
    { problem: 'absolute targetPath', patch: { targetPath: '/etc/textkit.js' }, field: 'targetPath' },
    { problem: 'absolute Windows testPath', patch: { testPath: 'C:\\test\\textkit.js' }, field: 'testPath' },
    { problem: '".." in testPath', patch: { testPath: '../test/textkit.test.js' }, field: 'testPath' },
    { problem: '".." inside targetPath', patch: { targetPath: 'src/../../textkit.js' }, field: 'targetPath' },
    { problem: 'empty targetPath', patch: { targetPath: '' }, field: 'targetPath' },
    { problem: 'spaces and punctuation in the id', patch: { id: 'text kit!' }, field: 'id' },
    { problem: 'an id starting with "-"', patch: { id: '-textkit' }, field: 'id' },
    { problem: 'a "." in the id (it joins node paths)', patch: { id: 'text.kit' }, field: 'id' },
    { problem: 'an id of 61 characters', patch: { id: 'a'.repeat(61) }, field: 'id' },
    {
      problem: 'an unknown key in `tdd:`',
      patch: { tdd: { testComand: ['node', '--test'] } },
      field: 'tdd',
      says: /testComand/,
    },
    { problem: 'an empty test command', patch: { tdd: { testCommand: [] } }, field: 'tdd.testCommand' },
    {
      problem: 'a test timeout of 1.5 s',
      patch: { tdd: { testTimeoutSeconds: 1.5 } },
      field: 'tdd.testTimeoutSeconds',
    },
    { problem: 'a human TTL of 0', patch: { tdd: { humanTtlSeconds: 0 } }, field: 'tdd.humanTtlSeconds' },
    { problem: 'an unknown top-level key', patch: { maxDepth: 2 }, field: '(spec)', says: /maxDepth/ },
  ])('$problem', ({ patch, field, says }) => {
    const problems = problemsOf({ ...specFile(), ...patch });
    expect(problems).toHaveLength(1);
    expect(naming(problems, field)).toHaveLength(1);
    if (says) expect(problems[0]).toMatch(says);
  });

  test.each([null, 'textkit', 42, []])('a spec file that is not an object: %j', (raw) => {
    expect(problemsOf(raw)).toEqual([expect.stringMatching(/^\(spec\): /)]);
  });
});

describe('validateTddSpec: limits', () => {
  const ranges = [
    ...Object.entries(TDD_LIMITS).map(([key, limit]) => ({ key, min: 1, max: limit.max })),
    { key: 'testTimeoutSeconds', min: 1, max: 3_600 },
    { key: 'nudgeTimeoutSeconds', min: 1, max: 3_600 },
  ];

  test.each(ranges)('tdd.$key accepts $min..$max', ({ key, min, max }) => {
    for (const value of [min, max]) {
      const checked = validateTddSpec({ ...specFile(), tdd: { [key]: value } });
      expect(checked.ok && checked.spec.tdd[key as keyof typeof DEFAULT_SETTINGS]).toBe(value);
    }
  });

  test.each(ranges)('tdd.$key refuses below $min, above $max, fractions and strings', ({ key, min, max }) => {
    for (const value of [min - 1, max + 1, min + 0.5, String(min)]) {
      expect({ value, problems: naming(problemsOf({ ...specFile(), tdd: { [key]: value } }), `tdd.${key}`) }).toEqual({
        value,
        problems: [expect.any(String)],
      });
    }
  });
});

describe('validateTddSpec: every problem at once', () => {
  test('every field problem of one file, each naming its field', () => {
    const problems = problemsOf({
      id: 'text kit!',
      acceptanceCriteria: [],
      targetPath: '/src/textkit.js',
      testPath: '../test/textkit.test.js',
      tdd: {
        testComand: ['node'],
        maxDepth: 7,
        maxChildren: 0,
        maxReviewRounds: 11,
        maxScaffoldRuns: 0,
        maxInvalidReplies: 6,
      },
    });
    for (const field of [
      'id',
      'description',
      'acceptanceCriteria',
      'targetPath',
      'testPath',
      'tdd',
      'tdd.maxDepth',
      'tdd.maxChildren',
      'tdd.maxReviewRounds',
      'tdd.maxScaffoldRuns',
      'tdd.maxInvalidReplies',
    ]) {
      expect({ field, problems: naming(problems, field) }).toEqual({ field, problems: [expect.any(String)] });
    }
    expect(problems).toHaveLength(11);
  });

  test('duplicate criterion ids and testPath == targetPath together', () => {
    const problems = problemsOf({
      ...specFile(),
      acceptanceCriteria: [
        { id: 'TK1', text: 'a' },
        { id: 'TK1', text: 'b' },
        { id: 'TK2', text: 'c' },
        { id: 'TK2', text: 'd' },
      ],
      testPath: 'src/textkit.js',
    });
    expect(naming(problems, 'acceptanceCriteria')).toEqual([
      expect.stringContaining('"TK1"'),
      expect.stringContaining('"TK2"'),
    ]);
    expect(naming(problems, 'testPath')).toHaveLength(1);
    expect(problems).toHaveLength(3);
  });

  test('duplicate criterion ids and testPath == targetPath are listed with the field problems, not after them', () => {
    const problems = problemsOf({
      ...specFile(),
      description: undefined,
      acceptanceCriteria: [
        { id: 'TK1', text: 'a' },
        { id: 'TK1', text: 'b' },
      ],
      testPath: 'src/textkit.js',
      tdd: { maxDepth: 99 },
    });
    for (const field of ['description', 'tdd.maxDepth', 'acceptanceCriteria', 'testPath']) {
      expect({ field, problems: naming(problems, field) }).toEqual({ field, problems: [expect.any(String)] });
    }
  });
});

// ---------------------------------------------------------------------------------------------------------
// checkChildSpecs

function child(id: string): ChildSpec {
  return {
    id,
    description: `the ${id}`,
    acceptanceCriteria: [{ id: `${id}-1`, text: 'works' }],
    targetPath: `src/${id}.js`,
    testPath: `test/${id}.test.js`,
  };
}
const children = (n: number) => Array.from({ length: n }, (_, i) => child(`c${i + 1}`));
const limits = { depth: 0, maxDepth: 3, maxChildren: 8 };

describe('checkChildSpecs', () => {
  test('no children: no problems, whatever the depth', () => {
    expect(checkChildSpecs([], limits)).toEqual([]);
    expect(checkChildSpecs([], { depth: 6, maxDepth: 3, maxChildren: 1 })).toEqual([]);
  });

  test('children within every limit', () => {
    expect(checkChildSpecs(children(8), { depth: 2, maxDepth: 3, maxChildren: 8 })).toEqual([]);
  });

  test('depth limit: the new children would be deeper than maxDepth', () => {
    expect(checkChildSpecs(children(1), { depth: 2, maxDepth: 3, maxChildren: 8 })).toEqual([]);
    expect(checkChildSpecs(children(1), { depth: 3, maxDepth: 3, maxChildren: 8 })).toEqual([
      expect.stringMatching(/^childSpecs: .*depth 3.*maxDepth is 3/),
    ]);
    expect(checkChildSpecs(children(1), { depth: 0, maxDepth: 0, maxChildren: 8 })).toEqual([
      expect.stringMatching(/^childSpecs: .*maxDepth is 0/),
    ]);
  });

  test('child-count limit', () => {
    expect(checkChildSpecs(children(8), limits)).toEqual([]);
    expect(checkChildSpecs(children(9), limits)).toEqual([
      expect.stringMatching(/^childSpecs: 9 children.*maxChildren is 8/),
    ]);
  });

  test('duplicate ids, each named once', () => {
    expect(checkChildSpecs([child('a'), child('b'), child('a'), child('a'), child('b'), child('c')], limits)).toEqual([
      expect.stringMatching(/^childSpecs: child id "a"/),
      expect.stringMatching(/^childSpecs: child id "b"/),
    ]);
  });

  test('all problems together', () => {
    const problems = checkChildSpecs([...children(3), child('c1')], { depth: 2, maxDepth: 2, maxChildren: 3 });
    expect(problems).toEqual([
      expect.stringMatching(/maxDepth/),
      expect.stringMatching(/maxChildren/),
      expect.stringMatching(/"c1"/),
    ]);
  });
});

// ---------------------------------------------------------------------------------------------------------
// Exit schemas

const VALID_REPLIES = SAMPLE_EXITS;

/** The `Maybe` fields of exits (absent or null); every other field is required. */
const MAYBE_FIELDS: Partial<Record<ExitName, string[]>> = { InitWork: ['childSpecs', 'interfaces'] };

const EVERY_EXIT = TDD_NODES.flatMap((node) => exitNamesOf(node).map((exit) => ({ node, exit })));
const reply = (exit: ExitName): Record<string, unknown> =>
  structuredClone(VALID_REPLIES[exit]) as Record<string, unknown>;
/** A value of another type than `value`'s. */
const wrongTypeFor = (value: unknown): unknown => (typeof value === 'string' ? 42 : 'not the right type');

describe('exit schemas: valid replies', () => {
  test.each(EVERY_EXIT)('$node accepts a valid $exit', ({ node, exit }) => {
    expect(EXIT_SCHEMAS[node].parse(reply(exit))).toEqual(reply(exit));
  });

  test("every scripted reply of the example parses with its node's schema", () => {
    const replies = parseYaml(readFileSync(path.join(EXAMPLES, 'textkit.replies.yaml'), 'utf8')) as Record<
      string,
      unknown[] | null
    >;
    let parsed = 0;
    for (const [key, list] of Object.entries(replies)) {
      const node = key.split('.').pop() as TddNodeName;
      expect(TDD_NODES).toContain(node);
      for (const r of list ?? []) {
        const result = EXIT_SCHEMAS[node].safeParse(r);
        expect({ key, issues: result.error?.issues ?? [] }).toEqual({ key, issues: [] });
        parsed++;
      }
    }
    expect(parsed).toBeGreaterThan(0);
  });
});

describe('exit schemas: refused replies', () => {
  const requiredFields = EVERY_EXIT.flatMap(({ node, exit }) =>
    Object.keys(reply(exit))
      .filter((field) => field !== 'exit' && !(MAYBE_FIELDS[exit] ?? []).includes(field))
      .map((field) => ({ node, exit, field })),
  );

  test.each(requiredFields)('$exit without $field', ({ node, exit, field }) => {
    const r = reply(exit);
    delete r[field];
    const result = EXIT_SCHEMAS[node].safeParse(r);
    expect(result.success).toBe(false);
    expect(result.error?.issues.map((i) => i.path.join('.'))).toContain(field);
  });

  test.each(requiredFields)('$exit with a $field of the wrong type', ({ node, exit, field }) => {
    const r = reply(exit);
    r[field] = wrongTypeFor(r[field]);
    expect(EXIT_SCHEMAS[node].safeParse(r).success).toBe(false);
  });

  test.each([
    { node: 'impl', exit: 'TestsPassed', at: 'iterations', value: 1.5 },
    { node: 'impl', exit: 'Stuck', at: 'attempts', value: 1.5 },
    { node: 'impl', exit: 'Stuck', at: 'attempts', value: '3' },
    { node: 'tddReviewImpl', exit: 'MoreTests', at: 'critiques.0.line', value: 1.5 },
  ] as const)('$exit refuses $value as the Int at $at', ({ node, exit, at, value }) => {
    const r = reply(exit);
    const keys = at.split('.');
    const parent = keys.slice(0, -1).reduce<Record<string, unknown>>((o, k) => o[k] as Record<string, unknown>, r);
    parent[keys.at(-1)!] = value;
    const result = EXIT_SCHEMAS[node].safeParse(r);
    expect(result.error?.issues.map((i) => i.path.join('.'))).toEqual([at]);
  });

  test.each(TDD_NODES)("%s refuses an unknown exit, a missing exit, and another node's exit", (node) => {
    const own = reply(exitNamesOf(node)[0]!);
    expect(EXIT_SCHEMAS[node].safeParse({ ...own, exit: 'Teleport' }).success).toBe(false);
    expect(EXIT_SCHEMAS[node].safeParse({ ...own, exit: undefined }).success).toBe(false);
    expect(EXIT_SCHEMAS[node].safeParse({ ...own, exit: own.exit!.toString().toLowerCase() }).success).toBe(false);
    for (const other of TDD_NODES.filter((n) => n !== node).flatMap(exitNamesOf))
      expect({ other, ok: EXIT_SCHEMAS[node].safeParse(reply(other)).success }).toEqual({ other, ok: false });
  });

  test.each([
    { exit: 'InitWork', field: 'interfaceFile' },
    { exit: 'InitWork', field: 'contractSuite' },
    { exit: 'InvalidScaffold', field: 'expectedLocation' },
    { exit: 'BlockedDependency', field: 'expectedImportPath' },
    { exit: 'RebaseConflict', field: 'conflictFile' },
  ] as const)('$exit refuses an absolute or ".." $field', ({ exit, field }) => {
    const schema = EXIT_SCHEMAS[EVERY_EXIT.find((e) => e.exit === exit)!.node];
    for (const bad of ['/etc/passwd', '../outside.js', 'src/../../outside.js', 'C:\\x.js', '', 'a\0b'])
      expect({ bad, ok: schema.safeParse({ ...reply(exit), [field]: bad }).success }).toEqual({ bad, ok: false });
  });

  test('paths inside lists are checked too (test files, critiques, interfaces, child specs)', () => {
    expect(
      EXIT_SCHEMAS.tddWriteTests.safeParse({ ...reply('TestsReady'), testFiles: ['test/ok.js', '/abs.js'] }).success,
    ).toBe(false);
    expect(
      EXIT_SCHEMAS.tddReviewImpl.safeParse({
        ...reply('MoreTests'),
        critiques: [{ file: '../x.js', line: 1, issue: 'i', requiredFix: 'f' }],
      }).success,
    ).toBe(false);
    expect(
      EXIT_SCHEMAS.scaffold.safeParse({ ...reply('InitWork'), interfaces: [{ path: '/abs.js', exports: [] }] }).success,
    ).toBe(false);
    expect(
      EXIT_SCHEMAS.scaffold.safeParse({ ...reply('InitWork'), childSpecs: [{ ...child('a'), targetPath: '../a.js' }] })
        .success,
    ).toBe(false);
  });

  test('enumerations refuse values the seed does not list', () => {
    expect(EXIT_SCHEMAS.merger.safeParse({ ...reply('MergeRejected'), reason: 'Other' }).success).toBe(false);
    expect(EXIT_SCHEMAS.merger.safeParse({ ...reply('MergeComplete'), impactLevel: 'Huge' }).success).toBe(false);
    expect(
      EXIT_SCHEMAS.merger.safeParse({
        ...reply('MergeComplete'),
        changes: [{ symbol: 's', changeType: 'Rename', reason: 'r' }],
      }).success,
    ).toBe(false);
    for (const reason of ['ContractViolation', 'BuildFailure', 'IntegrationFailure'])
      expect(EXIT_SCHEMAS.merger.safeParse({ ...reply('MergeRejected'), reason }).success).toBe(true);
    for (const impactLevel of ['Trivial', 'Additive', 'Breaking'])
      expect(EXIT_SCHEMAS.merger.safeParse({ ...reply('MergeComplete'), impactLevel }).success).toBe(true);
    for (const changeType of ['SignatureChange', 'NewExport', 'RemovedExport', 'BehaviorChange']) {
      expect(
        EXIT_SCHEMAS.merger.safeParse({
          ...reply('MergeComplete'),
          changes: [{ symbol: 's', changeType, reason: 'r' }],
        }).success,
      ).toBe(true);
    }
  });
});

describe('Maybe fields accept null and absence', () => {
  test.each(['childSpecs', 'interfaces'])('InitWork.%s: absent, null, or a list', (field) => {
    const list = field === 'childSpecs' ? [child('tokenizer')] : [{ path: 'src/tokenizer.js', exports: ['tokenize'] }];
    for (const value of [undefined, null, [], list]) {
      const r = { ...reply('InitWork'), [field]: value };
      if (value === undefined) delete r[field];
      expect({ value, ok: EXIT_SCHEMAS.scaffold.safeParse(r).success }).toEqual({ value, ok: true });
    }
    expect(EXIT_SCHEMAS.scaffold.safeParse({ ...reply('InitWork'), [field]: 'not a list' }).success).toBe(false);
  });

  test('Spec.complexityConstraints and its time and space', () => {
    const spec = specFile();
    for (const complexityConstraints of [
      undefined,
      null,
      {},
      { time: null, space: null },
      { time: 'O(n)' },
      { space: 'O(1)' },
    ]) {
      expect({ complexityConstraints, ok: SpecSchema.safeParse({ ...spec, complexityConstraints }).success }).toEqual({
        complexityConstraints,
        ok: true,
      });
    }
    expect(SpecSchema.safeParse({ ...spec, complexityConstraints: { time: 3 } }).success).toBe(false);
  });
});

describe('CoverageReport', () => {
  test.each([
    ['no tests yet', { criteriaWithTests: [], criteriaMissing: ['TK1'] }],
    [
      '(criterionId, testName) pairs',
      {
        criteriaWithTests: [
          ['TK1', 'counts words'],
          ['TK1', 'counts spaces'],
          ['TK2', 'capitalises'],
        ],
        criteriaMissing: [],
      },
    ],
  ])('accepts %s', (_name, report) => {
    expect(CoverageReportSchema.parse(report)).toEqual(report);
  });

  test.each([
    ['a lone id', { criteriaWithTests: ['TK1'], criteriaMissing: [] }],
    ['a one-element pair', { criteriaWithTests: [['TK1']], criteriaMissing: [] }],
    ['a three-element pair', { criteriaWithTests: [['TK1', 'a', 'b']], criteriaMissing: [] }],
    ['a number for the test name', { criteriaWithTests: [['TK1', 2]], criteriaMissing: [] }],
    [
      'an object instead of a pair',
      { criteriaWithTests: [{ criterionId: 'TK1', testName: 'a' }], criteriaMissing: [] },
    ],
    ['no criteriaMissing', { criteriaWithTests: [] }],
    ['criteriaMissing of numbers', { criteriaWithTests: [], criteriaMissing: [1] }],
  ])('refuses %s', (_name, report) => {
    expect(CoverageReportSchema.safeParse(report).success).toBe(false);
    expect(EXIT_SCHEMAS.tddReviewImpl.safeParse({ ...reply('Approved'), coverageReport: report }).success).toBe(false);
  });
});
