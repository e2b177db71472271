/**
 * One schema-valid sample of every TDD exit, shared by the unit tests of the routes and of the model; the
 * mapped type makes an exit added to a schema without a sample a type error.
 */
import { EXIT_SCHEMAS, type ExitName, type NodeExit, type TddNodeName } from '../../src/kinds/tdd/spec';

export type ExitOf<N extends ExitName> = Extract<NodeExit, { exit: N }>;

export const plannedTest = {
  criterionId: 'TK1',
  plannedTestName: 'TK1: wordCount counts words',
  approach: 'a sentence with extra spaces',
};
const changes = [{ symbol: 'tokenize', changeType: 'NewExport' as const, reason: 'the tokenizer child' }];

/** A plausible reply for every exit of every node; the mapped type makes a missing exit a type error. */
export const SAMPLE_EXITS: { [N in ExitName]: ExitOf<N> } = {
  InitWork: {
    exit: 'InitWork',
    scaffoldCommit: 'a1b2c3',
    interfaceFile: 'src/textkit.js',
    contractSuite: 'test/contract/textkit.contract.test.js',
    testPlan: [plannedTest],
  },
  ClarificationNeeded: {
    exit: 'ClarificationNeeded',
    question: 'Does a hyphen split words?',
    ambiguityReference: 'TK1',
    specSentence: 'returns the number of words',
  },
  TestsReady: {
    exit: 'TestsReady',
    testsCommit: 'b2c3d4',
    testFiles: ['test/textkit.test.js'],
    pendingCriteria: ['TK1'],
  },
  InvalidScaffold: { exit: 'InvalidScaffold', missingType: 'Token', expectedLocation: 'src/textkit.js' },
  TestsPassed: {
    exit: 'TestsPassed',
    commitHash: 'c3d4e5',
    iterations: 2,
    passedTests: ['TK1: wordCount counts words'],
  },
  RequestRetry: {
    exit: 'RequestRetry',
    diagnosis: 'off by one on trailing spaces',
    strategyFrom: 'split on " "',
    strategyTo: 'split on /\\s+/',
    failingTests: ['TK1: wordCount counts words'],
  },
  BlockedDependency: { exit: 'BlockedDependency', missingSymbol: 'tokenize', expectedImportPath: 'src/tokenizer.js' },
  SpecAmbiguity: {
    exit: 'SpecAmbiguity',
    specSentence: 'separated by single spaces',
    contradictionTrace: 'TK2 vs the contract suite',
    question: 'Trim the ends?',
  },
  Stuck: {
    exit: 'Stuck',
    diagnosis: 'the contract suite contradicts TK2',
    recommendation: 'drop one of them',
    attempts: 3,
  },
  Approved: {
    exit: 'Approved',
    signOff: 'LGTM',
    coverageReport: { criteriaWithTests: [['TK1', 'TK1: wordCount counts words']], criteriaMissing: [] },
  },
  MoreTests: {
    exit: 'MoreTests',
    critiques: [{ file: 'src/textkit.js', line: 12, issue: 'empty input untested', requiredFix: 'test ""' }],
    additionalTests: [plannedTest],
  },
  Reject: { exit: 'Reject', reason: 'reimplements the tokenizer', missingCriteria: ['TK2'] },
  MergeComplete: {
    exit: 'MergeComplete',
    mergeCommit: 'd4e5f6',
    author: 'textkit.tokenizer',
    impactLevel: 'Additive',
    changes,
  },
  MergeRejected: {
    exit: 'MergeRejected',
    reason: 'ContractViolation',
    details: 'headline("") throws',
    failingTests: ['contract: headline of blank text'],
  },
  RebaseClean: { exit: 'RebaseClean', newBase: 'e5f6a7' },
  RebaseAdapted: {
    exit: 'RebaseAdapted',
    newBase: 'e5f6a7',
    adaptations: [{ symbol: 'tokenize', change: 'import path', reason: 'the sibling moved it' }],
  },
  RebaseConflict: {
    exit: 'RebaseConflict',
    conflictFile: 'src/textkit.js',
    ourChange: 'wordCount splits',
    theirChange: 'tokenize returns tokens',
    whyUnresolvable: 'needs a logic change',
  },
};

/** The exit names of a node's discriminated union, read through zod 4's API (`options`, a literal's `values`). */
export function exitNamesOf(node: TddNodeName): ExitName[] {
  return EXIT_SCHEMAS[node].options.flatMap((option) => [...option.shape.exit.values] as ExitName[]);
}
