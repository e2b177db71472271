/**
 * kinds/tdd/prompt-templates.ts and tdd-prompts.ts: the seed's six templates, their rendering, and the reply
 * format. Cases:
 * - templates: each is the seed's ```jinja block character for character (SHA-256 of the block, computed
 *   from seed 001), with a few distinctive lines checked in the clear;
 * - rendering: twelve realistic inputs render exactly as Jinja2 3.1.6 renders them (SHA-256 of Jinja2's
 *   output, computed with `jinja2.Environment().from_string(t).render(**vars)`), and the lines that matter
 *   are checked in the clear: criteria, test plan, covered criteria, child merges through `map`, the attempt
 *   line, critiques, the reviewer's diff left as is, the Merger's coverage pairs, the Rebaser's three impact
 *   branches; empty or null optional inputs (`[]`, `{}`, null, absent) render no section;
 * - the Jinja2 pieces nunjucks lacks: Python truthiness, the `map` filter, the condition rewrite and what it
 *   refuses;
 * - exitJsonSchema: plain JSON, no `$schema` or `$ref`, one `const` per exit, `files` allowed, and usable by
 *   the agents' JSON Schema compiler;
 * - replyInstructions: every exit and every field of every node, generated from the schemas;
 * - parseNodeReply / parseNodeOutput: a valid reply for every exit of every node; fences, prose, stray braces;
 *   unknown, foreign, missing and non-string exits; wrong, missing and non-whole fields; bad file paths;
 *   `files` null values, wrong types, absence; replies with no JSON, broken JSON, arrays; the five-issue cap;
 * - invalidReplyFeedback and nudgeMessage.
 */
import { createHash } from 'node:crypto';
import {
  exitJsonSchema,
  exitNames,
  invalidReplyFeedback,
  nudgeMessage,
  parseNodeOutput,
  parseNodeReply,
  replyInstructions,
} from '../../src/kinds/tdd/worker/prompts';
import {
  jinjaConditions,
  jinjaMap,
  jinjaTruthy,
  renderNodeTemplate,
  type NodeTemplateVars,
} from '../../src/kinds/tdd/worker/node-templates';
import { TDD_TEMPLATES } from '../../src/kinds/tdd/prompt-templates';
import { compileOutputSchema } from '../../src/agents/output-schema';
import { EXIT_SCHEMAS, TDD_NODES, type ExitName, type Spec, type TddNodeName } from '../../src/kinds/tdd/spec';

const sha256 = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');

/** SHA-256 of each ```jinja block of seed 001: the lines between the fences, joined by "\n". */
const SEED_TEMPLATE_SHA256: Record<TddNodeName, string> = {
  scaffold: '71cf012c5ecf39191c187ec16f6753e1b1acec60da89c85d6db82ff26fcea242',
  tddWriteTests: '28c84c08195b86b48d970cd1298aab22a1bad03a599112483fae28d15004c2fa',
  tddReviewImpl: '786598ecdb14edb3547e7407821efdb01032aa71927a976ae97857c9b524ffd4',
  impl: '5deb3468a4057596d0c03919e99efb5bca7f87a9525e359473b4fe6e8d7a83d5',
  merger: '3f4dd3a1a0e3c42e927ba263029cfe1a39a31f9a8477e6f331de0130dcb74abd',
  rebaser: '0acdf1326c43915ca0cdbb54c0f80ca609e2ff964d3f62e2a635407af40adb64',
};

// ---------------------------------------------------------------------------------------------------------
// Realistic inputs

const spec: Spec = {
  id: 'calc',
  description: 'A calculator.',
  acceptanceCriteria: [
    { id: 'C1', text: 'adds' },
    { id: 'C2', text: 'subtracts' },
  ],
  targetPath: 'src/calc.ts',
  testPath: 'test/calc.test.ts',
};
const childSpec: Spec = {
  id: 'lexer',
  description: 'Tokenizer for the calculator.',
  acceptanceCriteria: [
    { id: 'L1', text: 'tokenize splits numbers and operators' },
    { id: 'L2', text: 'tokenize rejects unknown characters' },
  ],
  targetPath: 'src/lexer.ts',
  testPath: 'test/lexer.test.ts',
  complexityConstraints: { time: 'O(n)', space: 'O(1)' },
};
const scaffold = {
  scaffoldCommit: '1a2b3c',
  interfaceFile: 'src/types.ts',
  contractSuite: 'test/contract.test.ts',
  testPlan: [
    { criterionId: 'C1', plannedTestName: 'adds two numbers', approach: 'unit test on add' },
    { criterionId: 'C2', plannedTestName: 'subtracts', approach: 'property test' },
  ],
};
const testsReady = {
  testsCommit: '4d5e6f',
  testFiles: ['test/calc.test.ts', 'test/parse.test.ts'],
  pendingCriteria: ['C1', 'C2', 'C3'],
};
const node = { nodeId: 'calc/parser', branch: 'treadle/calc/parser' };
const rebaseInput = (impactLevel: 'Trivial' | 'Additive' | 'Breaking'): NodeTemplateVars['rebaser'] => ({
  node,
  parentBranch: 'treadle/calc',
  newParentHead: 'c0ffee',
  mergeEvent: {
    author: 'calc/lexer',
    impactLevel,
    changes:
      impactLevel === 'Trivial'
        ? []
        : [
            { symbol: 'tokenize', changeType: 'SignatureChange', reason: 'now takes options' },
            { symbol: 'Token', changeType: 'RemovedExport', reason: 'replaced by Lexeme' },
          ],
  },
});

type Case = { [N in TddNodeName]: [N, NodeTemplateVars[N]] }[TddNodeName];

/** Inputs rendered by both Jinja2 and nunjucks; the hashes are of Jinja2 3.1.6's output. */
const CASES: Record<string, { input: Case; jinja2Sha256: string }> = {
  scaffoldChild: {
    input: [
      'scaffold',
      {
        spec: childSpec,
        parentContext: {
          interface: "export type Token = { kind: 'num' | 'op'; text: string };",
          assignedCriteria: 'C1, C2',
        },
      },
    ],
    jinja2Sha256: '56c5db69443c9f2b87b98099a3be390653a6dccfdf369de6e9e33d0bd48c363a',
  },
  scaffoldRootEmptyConstraints: {
    input: ['scaffold', { spec: { ...spec, complexityConstraints: {} }, parentContext: null }],
    jinja2Sha256: 'ed6bd57f21df665a20906830262b8a6a1e08327581e59d3f9f2063443490285e',
  },
  scaffoldTimeOnly: {
    input: ['scaffold', { spec: { ...spec, complexityConstraints: { time: 'O(n log n)', space: null } } }],
    jinja2Sha256: '26e85ad5038bb7554b05dc56d8631abb920e9a454e381de6e93ab31baf05eb7f',
  },
  tddWriteTests: {
    input: ['tddWriteTests', { spec, scaffold, coveredCriteria: ['C1'] }],
    jinja2Sha256: '7b2ec48e61029cf4bfab7fe042d2115ec86705f280ffb53938760f4715cda54d',
  },
  tddWriteTestsNoneCovered: {
    input: ['tddWriteTests', { spec, scaffold: { ...scaffold, testPlan: [] }, coveredCriteria: [] }],
    jinja2Sha256: '540158c7de7b81333d6e233a5c5f09576de0308557d87e56b2c06043df560b0f',
  },
  implFull: {
    input: [
      'impl',
      {
        spec,
        scaffold,
        testsReady,
        childMerges: [
          {
            mergeCommit: 'aaa111',
            author: 'lexer',
            impactLevel: 'Additive',
            changes: [
              { symbol: 'tokenize', changeType: 'NewExport', reason: 'entry point' },
              { symbol: 'Token', changeType: 'NewExport', reason: 'type' },
            ],
          },
          { mergeCommit: 'bbb222', author: 'parser', impactLevel: 'Trivial', changes: [] },
        ],
        attemptCount: 3,
        critiqueList: [
          {
            file: 'src/calc.ts',
            line: 42,
            issue: 'division by zero returns Infinity',
            requiredFix: 'throw a RangeError',
          },
          { file: 'src/parse.ts', line: 7, issue: 'ignores whitespace', requiredFix: 'skip spaces' },
        ],
      },
    ],
    jinja2Sha256: '8d41002aaf2fe595d600fb820b5a6d501ea8607b1a59fb862e0fc1256b3f8452',
  },
  implEmptyLists: {
    input: [
      'impl',
      {
        spec,
        scaffold,
        testsReady: { ...testsReady, testFiles: ['test/calc.test.ts'], pendingCriteria: [] },
        childMerges: [],
        attemptCount: 1,
        critiqueList: [],
      },
    ],
    jinja2Sha256: '92d0cb6c4b1fec1da63532c28cdd49d8b3f1b19c274ab67a21804cf92578d56e',
  },
  implNulls: {
    input: ['impl', { spec, scaffold, testsReady, childMerges: null, attemptCount: 5, critiqueList: null }],
    jinja2Sha256: '43f434edde1205eade64c6b571e90064c8bb69b51439f3c649d606d5207f8be0',
  },
  tddReviewImpl: {
    input: [
      'tddReviewImpl',
      {
        spec,
        scaffold,
        implResult: { commitHash: '9f8e7d', iterations: 2, passedTests: ['adds two numbers', 'subtracts'] },
        diff: "diff --git a/src/calc.ts b/src/calc.ts\n--- a/src/calc.ts\n+++ b/src/calc.ts\n@@ -1 +1 @@\n-export const add = (a: number, b: number): number => { throw new Error('todo'); };\n+export const add = (a: number, b: number): number => a + b; // {{ not a tag }} <b>&</b>",
      },
    ],
    jinja2Sha256: 'f40e00929c157199805b1e56ab85d1b36eea8ad172e7632755e92987417386e0',
  },
  merger: {
    input: [
      'merger',
      {
        parentNode: { nodeId: 'calc', branch: 'treadle/calc' },
        childNode: { nodeId: 'calc/lexer', branch: 'treadle/calc/lexer' },
        tddApproval: {
          signOff: 'All criteria covered; code is clear.',
          coverageReport: {
            criteriaWithTests: [
              ['L1', 'splits numbers'],
              ['L2', 'rejects unknown'],
            ],
            criteriaMissing: [],
          },
        },
        contractSuite: 'test/contract.test.ts',
      },
    ],
    jinja2Sha256: '7ecd5da4ac2f2f154717c9476db54a04c1e5dc24911b42a2e34d70a83cdee3e9',
  },
  rebaserTrivial: {
    input: ['rebaser', rebaseInput('Trivial')],
    jinja2Sha256: '746cd76efb616c622d8a23755f05b1254b13839c6eaa4cdb0687c115dbe85fb5',
  },
  rebaserAdditive: {
    input: ['rebaser', rebaseInput('Additive')],
    jinja2Sha256: '11d622f895e94f6a367930e11184f81e47db766a1aea2a51336c266b6b88d0ea',
  },
  rebaserBreaking: {
    input: ['rebaser', rebaseInput('Breaking')],
    jinja2Sha256: 'a8debc816aca9080779112c850d2ae781b292bb3590d8ac0cf38abd5e1ba985e',
  },
};

const render = (name: keyof typeof CASES): string => {
  const [n, vars] = CASES[name]!.input;
  return renderNodeTemplate(n, vars as never);
};
const lines = (text: string): string[] => text.split('\n');

describe('the seed templates', () => {
  it.each(TDD_NODES)('%s is the seed text, character for character', (n) => {
    expect(sha256(TDD_TEMPLATES[n])).toBe(SEED_TEMPLATE_SHA256[n]);
  });

  it('keeps the distinctive lines, fences and Jinja constructs', () => {
    expect(Object.keys(TDD_TEMPLATES).sort()).toEqual([...TDD_NODES].sort());
    expect(lines(TDD_TEMPLATES.scaffold)[0]).toBe('# Scaffold: {{ spec.description }}');
    expect(lines(TDD_TEMPLATES.impl)).toContain(
      '- {{ m.author }}: {{ m.changes | map(attribute=\'symbol\') | join(", ") }}',
    );
    expect(lines(TDD_TEMPLATES.impl)).toContain('## Attempt {{ attemptCount }} of 5');
    expect(lines(TDD_TEMPLATES.tddReviewImpl)).toEqual(expect.arrayContaining(['```diff', '{{ diff }}', '```']));
    expect(lines(TDD_TEMPLATES.merger)).toContain('- {{ item[0] }}: `{{ item[1] }}` ✓');
    expect(lines(TDD_TEMPLATES.merger)).toContain('git commit -m "feat({{ childNode.nodeId }}): implement"');
    expect(lines(TDD_TEMPLATES.rebaser)).toContain('{% elif mergeEvent.impactLevel == "Additive" %}');
    expect(lines(TDD_TEMPLATES.rebaser).at(-1)).toBe('- **RebaseConflict**: Cannot resolve → escalate to Scaffold');
    for (const text of Object.values(TDD_TEMPLATES)) expect(text.endsWith('\n')).toBe(false);
  });
});

describe('rendering', () => {
  it.each(Object.keys(CASES))('%s renders exactly as Jinja2 does', (name) => {
    expect(sha256(render(name))).toBe(CASES[name]!.jinja2Sha256);
  });

  it('Scaffold: criteria, constraints and the parent context of a child', () => {
    const out = lines(render('scaffoldChild'));
    expect(out).toEqual(
      expect.arrayContaining([
        '# Scaffold: Tokenizer for the calculator.',
        '**ID:** `lexer`',
        '- L1: tokenize splits numbers and operators',
        '- L2: tokenize rejects unknown characters',
      ]),
    );
    expect(out).toEqual(expect.arrayContaining(['### Complexity Constraints', '- Time: O(n)', '- Space: O(1)']));
    expect(out).toEqual(
      expect.arrayContaining([
        '## Parent Context',
        "export type Token = { kind: 'num' | 'op'; text: string };",
        'You must satisfy: C1, C2',
        "Parent's interface files are **read-only**.",
      ]),
    );
  });

  it('Scaffold: no parent context and empty constraints render no section; one constraint renders one line', () => {
    const root = render('scaffoldRootEmptyConstraints');
    expect(root).not.toContain('Parent Context');
    expect(root).not.toContain('Complexity Constraints');
    const timeOnly = render('scaffoldTimeOnly');
    expect(lines(timeOnly)).toContain('- Time: O(n log n)');
    expect(timeOnly).not.toContain('Space');
    expect(timeOnly).not.toContain('Parent Context');
  });

  it('TDDWriteTests: criteria, the test plan and the covered criteria', () => {
    const out = lines(render('tddWriteTests'));
    expect(out).toEqual(
      expect.arrayContaining([
        '- C1: adds',
        '- C2: subtracts',
        '- C1: `adds two numbers` — unit test on add',
        '- C2: `subtracts` — property test',
        '- C1 ✓',
      ]),
    );
    expect(out).not.toContain('- C2 ✓');
    const none = render('tddWriteTestsNoneCovered');
    expect(none).toContain('## Already Covered\n\n\n\n---');
    expect(none).not.toContain('✓');
  });

  it('Impl: test files, criteria, child merges through map, the attempt and the critiques', () => {
    const out = lines(render('implFull'));
    expect(out).toEqual(
      expect.arrayContaining(['- test/calc.test.ts', '- test/parse.test.ts', 'Criteria: C1, C2, C3']),
    );
    expect(out).toEqual(
      expect.arrayContaining([
        '## Child Subsystems Available',
        '- lexer: tokenize, Token',
        '- parser: ',
        "Use these subsystems - don't reimplement.",
      ]),
    );
    expect(out).toContain('## Attempt 3 of 5');
    expect(out).toEqual(
      expect.arrayContaining([
        '### TDD Feedback',
        '- **src/calc.ts:42** — division by zero returns Infinity',
        '  Fix: throw a RangeError',
        '- **src/parse.ts:7** — ignores whitespace',
        '  Fix: skip spaces',
      ]),
    );
  });

  it('Impl: empty lists and nulls render no child or feedback section (Jinja2 truthiness, not JavaScript)', () => {
    for (const name of ['implEmptyLists', 'implNulls'] as const) {
      const out = render(name);
      expect(out).not.toContain('Child Subsystems');
      expect(out).not.toContain('TDD Feedback');
    }
    expect(lines(render('implEmptyLists'))).toEqual(expect.arrayContaining(['Criteria: ', '## Attempt 1 of 5']));
    expect(lines(render('implNulls'))).toContain('## Attempt 5 of 5');
  });

  it('TDDReviewImpl: the impl result and the diff, verbatim (no escaping, no re-rendering)', () => {
    const out = render('tddReviewImpl');
    expect(lines(out)).toEqual(
      expect.arrayContaining(['Commit: `9f8e7d`', 'Iterations: 2', '- `adds two numbers`', '- `subtracts`']),
    );
    expect(out).toContain('```diff\ndiff --git a/src/calc.ts b/src/calc.ts\n');
    expect(out).toContain('=> a + b; // {{ not a tag }} <b>&</b>\n```');
  });

  it('Merger: coverage pairs through item[0] and item[1], and the squash commands', () => {
    const out = lines(render('merger'));
    expect(out).toEqual(
      expect.arrayContaining([
        '# Merge: calc/lexer',
        'Parent: `calc` on `treadle/calc`',
        'Child: `calc/lexer` on `treadle/calc/lexer`',
        'All criteria covered; code is clear.',
      ]),
    );
    expect(out).toEqual(expect.arrayContaining(['- L1: `splits numbers` ✓', '- L2: `rejects unknown` ✓']));
    expect(out).toEqual(
      expect.arrayContaining(['git merge --squash treadle/calc/lexer', 'git commit -m "feat(calc/lexer): implement"']),
    );
  });

  it("Rebaser: one branch per impact level, the changes and the parent's branch", () => {
    const trivial = render('rebaserTrivial');
    expect(trivial).toContain('Auto-resolve expected. No semantic changes.');
    expect(trivial).not.toContain('Sibling added new exports');
    expect(trivial).not.toContain('BREAKING');
    const additive = render('rebaserAdditive');
    expect(additive).toContain('Sibling added new exports. You may use them.');
    expect(additive).not.toContain('Auto-resolve');
    expect(additive).not.toContain('BREAKING');
    const breaking = lines(render('rebaserBreaking'));
    expect(breaking).toEqual(
      expect.arrayContaining([
        '**BREAKING** — Sibling changed APIs you may depend on.',
        '**Impact:** Breaking',
        '- tokenize (SignatureChange): now takes options',
        '- Token (RemovedExport): replaced by Lexeme',
      ]),
    );
    expect(breaking).toEqual(
      expect.arrayContaining([
        'Your Node: `calc/parser`',
        'New Parent HEAD: `c0ffee`',
        'git fetch origin treadle/calc',
        'git rebase origin/treadle/calc',
      ]),
    );
    expect(breaking.join('\n')).not.toContain('Auto-resolve');
  });
});

describe('the Jinja2 pieces nunjucks lacks', () => {
  it('tests conditions with Python truthiness', () => {
    for (const falsy of [null, undefined, '', 0, false, [], {}, new Map()]) expect(jinjaTruthy(falsy)).toBe(false);
    for (const truthy of [
      'x',
      1,
      -1,
      true,
      [0],
      { a: null },
      Object.assign(Object.create(null) as object, { a: 1 }),
      new Set([1]),
      new Date(0),
    ])
      expect(jinjaTruthy(truthy)).toBe(true);
  });

  it("map(attribute=…) takes each item's attribute, with dotted paths, indices and a default", () => {
    const kw = (o: Record<string, unknown>) => ({ ...o, __keywords: true });
    expect(jinjaMap([{ symbol: 'a' }, { symbol: 'b' }], kw({ attribute: 'symbol' }))).toEqual(['a', 'b']);
    expect(jinjaMap([{ a: { b: 1 } }, { a: [7, 8] }], kw({ attribute: 'a.b' }))).toEqual([1, undefined]);
    expect(jinjaMap([{ a: [7, 8] }], kw({ attribute: 'a.1' }))).toEqual([8]);
    expect(jinjaMap([{ symbol: 'a' }, {}], kw({ attribute: 'symbol', default: '?' }))).toEqual(['a', '?']);
    expect(jinjaMap([{}], kw({ attribute: 'constructor' }))).toEqual([undefined]);
    expect(jinjaMap(null, kw({ attribute: 'x' }))).toEqual([]);
    expect(() => jinjaMap([1], 'upper')).toThrow(/only map\(attribute/);
  });

  it('rewrites if/elif conditions for truthiness and refuses conditions beyond the subset', () => {
    expect(jinjaConditions('{% if a.b %}x{% elif a == "T" %}y{% endif %}')).toBe(
      '{% if (a.b) | jinja_truthy %}x{% elif (a == "T") | jinja_truthy %}y{% endif %}',
    );
    expect(jinjaConditions('{%- if a -%}')).toBe('{%- if (a) | jinja_truthy -%}');
    for (const bad of ['{% if not a %}', '{% if a and b %}', '{% if a or b %}', '{% if a | length %}'])
      expect(() => jinjaConditions(bad)).toThrow(/beyond the Jinja2 subset/);
    for (const n of TDD_NODES) {
      const ifs = (TDD_TEMPLATES[n].match(/\{% (?:if|elif) /g) ?? []).length;
      expect((jinjaConditions(TDD_TEMPLATES[n]).match(/\| jinja_truthy %\}/g) ?? []).length).toBe(ifs);
    }
  });
});

// ---------------------------------------------------------------------------------------------------------
// Replies

/** One valid reply per exit (as the agent would send it, `files` aside). */
const VALID: Record<ExitName, Record<string, unknown>> = {
  InitWork: {
    exit: 'InitWork',
    scaffoldCommit: 'pending',
    interfaceFile: 'src/types.ts',
    contractSuite: 'test/contract.test.ts',
    testPlan: [{ criterionId: 'C1', plannedTestName: 'adds', approach: 'unit' }],
    childSpecs: null,
  },
  ClarificationNeeded: {
    exit: 'ClarificationNeeded',
    question: 'Integers or floats?',
    ambiguityReference: 'C1',
    specSentence: 'adds',
  },
  TestsReady: { exit: 'TestsReady', testsCommit: 'pending', testFiles: ['test/calc.test.ts'], pendingCriteria: ['C1'] },
  InvalidScaffold: { exit: 'InvalidScaffold', missingType: 'Token', expectedLocation: 'src/types.ts' },
  TestsPassed: { exit: 'TestsPassed', commitHash: 'pending', iterations: 2, passedTests: ['adds'] },
  RequestRetry: {
    exit: 'RequestRetry',
    diagnosis: 'off by one',
    strategyFrom: 'loop',
    strategyTo: 'reduce',
    failingTests: ['adds'],
  },
  BlockedDependency: { exit: 'BlockedDependency', missingSymbol: 'tokenize', expectedImportPath: 'src/lexer.ts' },
  SpecAmbiguity: {
    exit: 'SpecAmbiguity',
    specSentence: 'adds',
    contradictionTrace: 'C1 vs C2',
    question: 'Which wins?',
  },
  Stuck: { exit: 'Stuck', diagnosis: 'cannot parse', recommendation: 'split the parser', attempts: 5 },
  Approved: {
    exit: 'Approved',
    signOff: 'LGTM',
    coverageReport: { criteriaWithTests: [['C1', 'adds']], criteriaMissing: [] },
  },
  MoreTests: {
    exit: 'MoreTests',
    critiques: [{ file: 'src/calc.ts', line: 3, issue: 'no overflow test', requiredFix: 'add one' }],
    additionalTests: [{ criterionId: 'C1', plannedTestName: 'overflows', approach: 'edge' }],
  },
  Reject: { exit: 'Reject', reason: 'wrong approach', missingCriteria: ['C2'] },
  MergeComplete: {
    exit: 'MergeComplete',
    mergeCommit: 'pending',
    author: 'calc/lexer',
    impactLevel: 'Additive',
    changes: [{ symbol: 'tokenize', changeType: 'NewExport', reason: 'new' }],
  },
  MergeRejected: { exit: 'MergeRejected', reason: 'BuildFailure', details: 'tsc fails', failingTests: [] },
  RebaseClean: { exit: 'RebaseClean', newBase: 'c0ffee' },
  RebaseAdapted: {
    exit: 'RebaseAdapted',
    newBase: 'c0ffee',
    adaptations: [{ symbol: 'tokenize', change: 'new argument', reason: 'signature changed' }],
  },
  RebaseConflict: {
    exit: 'RebaseConflict',
    conflictFile: 'src/parse.ts',
    ourChange: 'a',
    theirChange: 'b',
    whyUnresolvable: 'logic',
  },
};
const nodeExits = TDD_NODES.flatMap((n) => exitNames(n).map((e) => [n, e as ExitName] as const));

describe('exitJsonSchema', () => {
  it.each(TDD_NODES)('%s: plain JSON, inlined, one const per exit, files allowed', (n) => {
    const schema = exitJsonSchema(n);
    expect(JSON.parse(JSON.stringify(schema))).toEqual(schema);
    const text = JSON.stringify(schema);
    expect(text).not.toContain('$schema');
    expect(text).not.toContain('$ref');
    expect(text).not.toContain('$defs');
    expect(schema.type).toBe('object');
    const variants = schema.oneOf as Array<{ properties: Record<string, { const?: string }>; required: string[] }>;
    expect(variants.map((v) => v.properties.exit!.const)).toEqual(exitNames(n));
    for (const v of variants) {
      expect(v.properties.files).toEqual({
        type: 'object',
        additionalProperties: { anyOf: [{ type: 'string' }, { type: 'null' }] },
      });
      expect(v.required).not.toContain('files');
    }
  });

  it.each(TDD_NODES)(
    "%s: the agents' JSON Schema compiler accepts every valid reply and refuses a foreign exit",
    (n) => {
      const compiled = compileOutputSchema(exitJsonSchema(n));
      for (const e of exitNames(n))
        expect(
          compiled.safeParse({ ...VALID[e as ExitName], files: { 'src/a.ts': 'x', 'old.ts': null } }).success,
        ).toBe(true);
      expect(compiled.safeParse({ exit: 'NoSuchExit' }).success).toBe(false);
      expect(compiled.safeParse({ ...VALID[exitNames(n)[0] as ExitName], files: { 'a.ts': 3 } }).success).toBe(false);
    },
  );
});

describe('replyInstructions', () => {
  it.each(TDD_NODES)('%s: lists every exit with every field, files, and who commits', (n) => {
    const text = replyInstructions(n);
    for (const option of EXIT_SCHEMAS[n].options) {
      const name = (option.shape.exit as { value: string }).value;
      const line = lines(text).find((l) => l.startsWith(`- \`{ "exit": "${name}"`));
      expect(line).toBeDefined();
      for (const field of Object.keys(option.shape).filter((f) => f !== 'exit'))
        expect(line).toMatch(new RegExp(`[{;] ${field}\\??: `));
    }
    for (const other of TDD_NODES.filter((o) => o !== n).flatMap(exitNames))
      expect(text).not.toContain(`"exit": "${other}"`);
    expect(text).toContain('"files"');
    expect(text).toContain('relative to your worktree');
    expect(text).toContain('null deletes the file');
    expect(text).toContain('commits them for you');
    expect(text).toContain('replaced by the real one');
  });

  it('writes types in a compact notation', () => {
    expect(lines(replyInstructions('impl'))).toContain(
      '- `{ "exit": "TestsPassed"; commitHash: string; iterations: integer; passedTests: string[] }`',
    );
    const scaffoldText = replyInstructions('scaffold');
    expect(scaffoldText).toContain(
      'interfaceFile: path; contractSuite: path; testPlan: { criterionId: string; plannedTestName: string; approach: string }[]; childSpecs?: { id: string;',
    );
    expect(replyInstructions('merger')).toContain(
      'impactLevel: "Trivial" | "Additive" | "Breaking"; changes: { symbol: string; changeType: "SignatureChange" | "NewExport" | "RemovedExport" | "BehaviorChange"; reason: string }[]',
    );
    expect(replyInstructions('tddReviewImpl')).toContain(
      'coverageReport: { criteriaWithTests: [string, string][]; criteriaMissing: string[] }',
    );
  });
});

const issuesOf = (n: TddNodeName, text: string): string[] => {
  const parsed = parseNodeReply(n, text);
  if (parsed.ok) throw new Error(`expected a refusal, got ${JSON.stringify(parsed)}`);
  return parsed.issues;
};

describe('parseNodeReply', () => {
  it.each(nodeExits)('%s accepts a valid %s', (n, e) => {
    const parsed = parseNodeReply(n, JSON.stringify(VALID[e]));
    expect(parsed).toEqual({ ok: true, exit: VALID[e], files: {} });
  });

  it('finds the object inside a ```json fence, after prose and a stray brace, and keeps the files', () => {
    const reply = {
      ...VALID.TestsPassed,
      files: { 'src/calc.ts': 'export const add = (a, b) => a + b;\n', 'src/old.ts': null },
    };
    const fenced = `Done. Here is my decision:\n\n\`\`\`json\n${JSON.stringify(reply, null, 2)}\n\`\`\`\n\nLet me know {if} anything is off.`;
    expect(parseNodeReply('impl', fenced)).toEqual({ ok: true, exit: VALID.TestsPassed, files: reply.files });
    const stray = `I used { as a placeholder and {"note": "not it"} first, then: ${JSON.stringify(reply)} — that's all.`;
    expect(parseNodeReply('impl', stray)).toEqual({ ok: true, exit: VALID.TestsPassed, files: reply.files });
    const braces = JSON.stringify({ ...VALID.RebaseClean, files: { 'a.ts': 'function f() { return "}"; }' } });
    expect(parseNodeReply('rebaser', `x ${braces} y`)).toEqual({
      ok: true,
      exit: VALID.RebaseClean,
      files: { 'a.ts': 'function f() { return "}"; }' },
    });
  });

  it('drops unknown fields from the exit; files null means none', () => {
    expect(parseNodeReply('rebaser', JSON.stringify({ ...VALID.RebaseClean, mood: 'happy', files: null }))).toEqual({
      ok: true,
      exit: VALID.RebaseClean,
      files: {},
    });
  });

  it('refuses unknown, foreign, missing and non-string exits, listing the valid ones', () => {
    expect(issuesOf('impl', '{"exit": "Done"}')).toEqual([
      'exit: "Done" is not an exit of impl; valid exits: "TestsPassed", "RequestRetry", "BlockedDependency", "SpecAmbiguity", "Stuck"',
    ]);
    expect(issuesOf('impl', JSON.stringify(VALID.Approved))[0]).toBe(
      `exit: "Approved" is not an exit of impl (it is tddReviewImpl's exit); valid exits: "TestsPassed", "RequestRetry", "BlockedDependency", "SpecAmbiguity", "Stuck"`,
    );
    expect(issuesOf('rebaser', '{"newBase": "x"}')).toEqual([
      'exit: missing; name one of "RebaseClean", "RebaseAdapted", "RebaseConflict"',
    ]);
    expect(issuesOf('rebaser', '{"exit": 3}')).toEqual([
      'exit: expected a string naming one of "RebaseClean", "RebaseAdapted", "RebaseConflict", received number',
    ]);
  });

  it('names each wrong, missing or non-whole field', () => {
    expect(issuesOf('impl', JSON.stringify({ ...VALID.TestsPassed, passedTests: 'adds' }))).toEqual([
      'passedTests: expected array, received string',
    ]);
    expect(issuesOf('impl', JSON.stringify({ ...VALID.TestsPassed, iterations: 2.5 }))).toEqual([
      'iterations: expected int, received number',
    ]);
    expect(issuesOf('impl', '{"exit": "Stuck", "diagnosis": "d"}')).toEqual([
      'recommendation: missing (expected string)',
      'attempts: missing (expected number)',
    ]);
    expect(
      issuesOf(
        'tddReviewImpl',
        JSON.stringify({ ...VALID.MoreTests, critiques: [{ file: 'a.ts', line: '3', issue: 'i', requiredFix: 'f' }] }),
      ),
    ).toEqual(['critiques[0].line: expected number, received string']);
    expect(issuesOf('merger', JSON.stringify({ ...VALID.MergeRejected, reason: 'Flaky' }))[0]).toMatch(
      /^reason: .*"ContractViolation"/,
    );
    expect(
      issuesOf('tddWriteTests', JSON.stringify({ ...VALID.InvalidScaffold, expectedLocation: '../outside.ts' })),
    ).toEqual(['expectedLocation: must be a relative path inside the worktree (no leading "/", no "..")']);
  });

  it('refuses file paths outside the worktree and non-string contents, naming the path', () => {
    const reply = {
      ...VALID.RebaseClean,
      files: { '../x': 'a', '/etc/passwd': null, 'ok.ts': 'fine', 'n.ts': 3, '': 'empty' },
    };
    expect(issuesOf('rebaser', JSON.stringify(reply))).toEqual([
      'files["../x"]: must be a relative path inside the worktree (no leading "/", no "..")',
      'files["/etc/passwd"]: must be a relative path inside the worktree (no leading "/", no "..")',
      'files["n.ts"]: expected the full new content (string) or null, received number',
      'files[""]: a file path is needed',
    ]);
    expect(issuesOf('rebaser', JSON.stringify({ ...VALID.RebaseClean, files: ['a.ts'] }))).toEqual([
      'files: expected an object of path → content or null, received array',
    ]);
    expect(issuesOf('rebaser', JSON.stringify({ ...VALID.RebaseClean, files: { 'a\\..\\..\\b': 'x' } }))[0]).toMatch(
      /^files\["a\\\\\.\.\\\\\.\.\\\\b"\]: must be a relative path/,
    );
  });

  it('reports exit and file issues together, at most five', () => {
    const reply = {
      exit: 'RebaseConflict',
      conflictFile: 1,
      ourChange: 2,
      theirChange: 3,
      whyUnresolvable: 4,
      files: { '/a': 'x', '/b': 'y' },
    };
    const issues = issuesOf('rebaser', JSON.stringify(reply));
    expect(issues).toHaveLength(5);
    expect(issues.slice(0, 4)).toEqual([
      'conflictFile: expected string, received number',
      'ourChange: expected string, received number',
      'theirChange: expected string, received number',
      'whyUnresolvable: expected string, received number',
    ]);
    expect(issues[4]).toBe('… and 2 more issues');
  });

  it('tells a reply without JSON ("no decision") from broken JSON', () => {
    expect(issuesOf('impl', 'I am still working on it.')).toEqual([
      'no JSON object in the reply: answer with one JSON object whose "exit" names your decision',
    ]);
    expect(issuesOf('impl', '')[0]).toMatch(/^no JSON object/);
    expect(issuesOf('impl', '{"exit": "Stuck", "diagnosis": }')[0]).toMatch(
      /^the reply's JSON object does not parse: /,
    );
    expect(issuesOf('impl', '{"exit": "Stuck", "diagnosis": "cut off')[0]).toMatch(/never closes/);
    // An array around the object is prose like any other: the object inside is the reply.
    expect(issuesOf('impl', '[{"exit": "Stuck"}]')[0]).toBe('diagnosis: missing (expected string)');
  });
});

describe('parseNodeOutput', () => {
  it('checks structured output the same way, and parses strings as reply text', () => {
    expect(parseNodeOutput('merger', { ...VALID.MergeComplete, files: { 'src/a.ts': null } })).toEqual({
      ok: true,
      exit: VALID.MergeComplete,
      files: { 'src/a.ts': null },
    });
    expect(parseNodeOutput('merger', JSON.stringify(VALID.MergeRejected))).toEqual({
      ok: true,
      exit: VALID.MergeRejected,
      files: {},
    });
    expect(parseNodeOutput('merger', [VALID.MergeComplete])).toEqual({
      ok: false,
      issues: ['(reply): expected a JSON object, received array'],
    });
    expect(parseNodeOutput('merger', null)).toEqual({
      ok: false,
      issues: ['(reply): expected a JSON object, received null'],
    });
    expect(parseNodeOutput('merger', { ...VALID.MergeComplete, changes: {} })).toEqual({
      ok: false,
      issues: ['changes: expected array, received object'],
    });
  });
});

describe('feedback and nudge', () => {
  it('quotes the issues and restates the exits with their fields', () => {
    const text = invalidReplyFeedback('rebaser', [
      'newBase: expected string, received number',
      'files["/a"]: must be a relative path',
    ]);
    expect(lines(text)).toEqual([
      'Your reply could not be used:',
      '- newBase: expected string, received number',
      '- files["/a"]: must be a relative path',
      '',
      'Send the whole reply again as one JSON object whose "exit" is one of "RebaseClean" (newBase), "RebaseAdapted" (newBase, adaptations), "RebaseConflict" (conflictFile, ourChange, theirChange, whyUnresolvable), with that exit\'s fields beside it and any file changes in "files".',
    ]);
    expect(
      lines(invalidReplyFeedback('impl', ['a', 'b', 'c', 'd', 'e', 'f'])).filter((l) => l.startsWith('- ')),
    ).toHaveLength(5);
  });

  it("is the seed's reminder, word for word", () => {
    expect(nudgeMessage()).toBe('REMINDER: Emit a decision to complete this phase');
  });
});
