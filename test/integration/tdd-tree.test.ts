/**
 * The V3 TDD tree (seed 001) end to end on the real server and a real git repository: the shipped example
 * (`examples/tdd/textkit.yaml` with its scripted replies) runs a parent and two children that scaffold,
 * write red tests, implement until green, get reviewed, merge (the parent judging each child first) and
 * rebase. The proof is in git: the branches' logs and a passing `node --test` on the merged result.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import type { Json, TreadleEvent } from '../../src/model/shapes';
import type { TddNodeState } from '../../src/kinds/tdd/shapes';
import { eventually, startHarness, type Harness } from '../support/harness';
import { runTreadle } from '../support/cli';
import { gitIn, tddRepos, type TddRepos } from '../support/tdd-fixtures';

const EXAMPLE = path.join(__dirname, '..', '..', 'examples', 'tdd');
const spec = parseYaml(readFileSync(path.join(EXAMPLE, 'textkit.yaml'), 'utf8')) as Json;
const replies = parseYaml(readFileSync(path.join(EXAMPLE, 'textkit.replies.yaml'), 'utf8')) as Json;

let h: Harness;
let repos: TddRepos;

beforeAll(async () => {
  repos = tddRepos('tdd-tree-');
  h = await startHarness();
});
afterAll(async () => {
  await h?.shutdown();
  repos?.remove();
});

async function nodeEvents(id: string): Promise<TreadleEvent[]> {
  return h.client.events(id);
}

async function historyBytes(id: string): Promise<number> {
  const description = await h.temporal.workflow.getHandle(id).describe();
  return Number(description.raw.workflowExecutionInfo?.historySizeBytes ?? 0);
}

test('the example tree: children merge into the parent, the parent into the target branch, and node --test passes', async () => {
  const repo = await repos.create('textkit');
  const id = h.id('tdd-textkit');
  const started = await h.client.startTdd(spec, { repo, id, replies });
  expect(started.targetBranch).toBe('treadle/textkit');

  const result = await h.client.tddResult(id);
  expect(result).toMatchObject({ status: 'merged', nodePath: 'textkit', branch: 'tdd/textkit' });

  // git: the children were squash-merged into the parent's branch, the parent into the target branch.
  const parentLog = gitIn(repo, 'log', '--format=%s', 'tdd/textkit');
  expect(parentLog).toContain('feat(tokenizer): implement');
  expect(parentLog).toContain('feat(formatter): implement');
  const targetLog = gitIn(repo, 'log', '--format=%s', 'treadle/textkit');
  expect(targetLog.split('\n')[0]).toBe('feat(textkit): implement');
  expect(gitIn(repo, 'rev-parse', 'treadle/textkit')).toBe(result.mergeCommit);

  // The merged library works: a fresh checkout of the target branch passes its whole test suite.
  const checkout = path.join(repos.root, 'checkout');
  gitIn(repo, 'worktree', 'add', '--detach', checkout, 'treadle/textkit');
  const run = execFileSync('node', ['--test'], { cwd: checkout, encoding: 'utf8' });
  expect(run).toMatch(/# pass 9/);
  expect(run).toMatch(/# fail 0/);

  // The parent's story: red tests, one Impl retry, one MoreTests round, both children judged and merged.
  const events = await nodeEvents(id);
  const exits = events.filter((e) => e.type === 'NodeExit').map((e) => `${e.stage}:${String(e.details?.exit)}`);
  expect(exits).toEqual([
    'scaffold:InitWork',
    'tddWriteTests:TestsReady',
    'tddReviewImpl:Approved', // judging the first child
    'tddReviewImpl:Approved', // judging the second
    'impl:RequestRetry',
    'impl:TestsPassed',
    'tddReviewImpl:MoreTests',
    'tddWriteTests:TestsReady',
    'impl:TestsPassed',
    'tddReviewImpl:Approved',
    'merger:MergeComplete',
  ]);
  const red = events.find((e) => e.type === 'NodeExit' && e.stage === 'tddWriteTests');
  expect(String(red?.details?.tests)).toMatch(/0 passed, 2 failed/);
  const state = await h.client.getTddState(id);
  expect(state.children.map((c) => [c.id, c.status])).toEqual([
    ['tokenizer', 'merged'],
    ['formatter', 'merged'],
  ]);
  expect(state.memory.tdd.coveredCriteria).toEqual(['TK1', 'TK2']);

  // What a reviewer judges, by reference: the branch's diff since the node began (the merger's call is the
  // latest with a commit) and the latest test output (the merged result's run).
  const latest = state.latest!;
  const diff = (await h.blobs.get(latest.diffRef!)).toString('utf8');
  expect(diff).toContain('diff --git a/src/textkit.js b/src/textkit.js');
  expect(diff).toContain('diff --git a/test/textkit.test.js b/test/textkit.test.js');
  expect((await h.blobs.get(latest.testOutputRef!)).toString('utf8')).toMatch(/# pass 9/);

  // Exactly one child rebased: the one that merged second, onto its sibling's merge.
  const childStates: TddNodeState[] = await Promise.all(state.children.map((c) => h.client.getTddState(c.workflowId)));
  const rebases = childStates.map((c) => c.counters.calls.rebaser ?? 0);
  expect(rebases.sort()).toEqual([0, 1]);

  // Small history: the envelope pattern keeps files, diffs and test output out of it.
  for (const nodeId of [id, ...state.children.map((c) => c.workflowId)])
    expect(await historyBytes(nodeId)).toBeLessThan(80_000);
}, 240_000);

test('a tdd stage in an ordinary pipeline: the tree runs as a child workflow and its MergeComplete is the artefact', async () => {
  const repo = await repos.create('textkit-stage', { 'README.md': '# textkit\n' });
  const id = h.id('with-tdd');
  const pipelineSpec = {
    name: 'plan-and-build',
    stages: [
      { name: 'plan', run: 'scripted', with: { artefact: { plan: 'textkit: tokenizer + formatter' } } },
      { name: 'build', run: 'tdd', dependsOn: ['plan'], with: { spec, repo, replies } },
    ],
  };
  await h.client.start(pipelineSpec, null, { id });
  const result = await h.client.result(id);
  expect(result.status).toBe('completed');

  const artefact = (await h.client.readArtefact(result.artefacts.build)) as {
    exit: string;
    mergeCommit: string;
    author: string;
    changes: unknown[];
  };
  expect(artefact).toMatchObject({ exit: 'MergeComplete', author: 'textkit', impactLevel: 'Additive' });
  expect(artefact.mergeCommit).toBe(gitIn(repo, 'rev-parse', 'treadle/textkit'));

  // The tree is a child of the work item: it has its own history, and its children theirs.
  const tree = await h.temporal.workflow.getHandle(`${id}.build.1`).describe();
  expect(tree.type).toBe('tddNode');
  expect(tree.parentExecution?.workflowId).toBe(id);
  expect((await h.temporal.workflow.getHandle(`${id}.build.1.tokenizer`).describe()).parentExecution?.workflowId).toBe(
    `${id}.build.1`,
  );

  // Every node's model calls count in the item's usage: the root's own and each child's.
  const treeState = await h.client.getTddState(`${id}.build.1`);
  const nodes = [treeState, ...(await Promise.all(treeState.children.map((c) => h.client.getTddState(c.workflowId))))];
  const calls = nodes.map((n) => n.usage?.calls ?? 0);
  expect(calls.every((n) => n > 0)).toBe(true);
  expect(treeState.children.map((c) => c.usage?.calls)).toEqual(calls.slice(1));
  const usage = await h.client.usage(id);
  expect(usage.stages.build!.calls).toBe(calls.reduce((a, b) => a + b, 0));
  expect(usage.stages.build!.inputTokens).toBe(nodes.reduce((sum, n) => sum + n.usage!.inputTokens, 0));
}, 240_000);

test('a tdd stage whose config is wrong is refused by the worker before anything runs, every problem listed', async () => {
  const id = h.id('bad-tdd');
  await h.client.start(
    {
      name: 'bad-tdd',
      stages: [
        { name: 'build', run: 'tdd', with: { spec: { id: 'x y', acceptanceCriteria: [] }, repo: 'relative/path' } },
      ],
    },
    null,
    { id },
  );
  const result = await h.client.result(id);
  expect(result.status).toBe('failed');
  const problems = (await h.client.getState(id)).problems ?? [];
  expect(problems).toEqual(
    expect.arrayContaining([
      expect.stringMatching(/build.*repo: must be an absolute path/),
      expect.stringMatching(/build.*spec\.id: letters, digits/),
      expect.stringMatching(/build.*spec\.description/),
      expect.stringMatching(/build.*spec\.acceptanceCriteria: at least one acceptance criterion/),
    ]),
  );
});

test('treadle tdd --wait and treadle status, as users run them; a bad spec file is refused with every problem', async () => {
  const repo = await repos.create('textkit-cli', { 'README.md': '# textkit\n' });
  const id = h.id('tdd-cli');
  const run = await runTreadle(h, [
    'tdd',
    path.join(EXAMPLE, 'textkit.yaml'),
    '--repo',
    repo,
    '--replies',
    path.join(EXAMPLE, 'textkit.replies.yaml'),
    '--id',
    id,
    '--wait',
  ]);
  expect(run.stderr).toBe('');
  expect(run.code).toBe(0);
  expect(run.stdout).toContain(`started ${id}: branch tdd/textkit, merges into treadle/textkit`);
  expect(run.stdout).toMatch(/NodeExit\s+impl: RequestRetry/);
  expect(run.stdout).toMatch(/NodeExit\s+merger: MergeComplete/);
  expect(run.stdout).toMatch(/textkit: merged \(phase done, branch tdd\/textkit, depth 0\)/);

  const status = await runTreadle(h, ['status', id]);
  expect(status.code).toBe(0);
  expect(status.stdout).toMatch(new RegExp(`tokenizer\\s+${id}\\.tokenizer\\s+merged`));
  expect(status.stdout).toMatch(new RegExp(`formatter\\s+${id}\\.formatter\\s+merged`));
  expect(status.stdout).toMatch(/impl\s+TestsPassed/);
  expect(status.stdout).toMatch(/merged as [0-9a-f]{40}/);

  const bad = path.join(repos.root, 'bad.yaml');
  writeFileSync(
    bad,
    'id: has space\ndescription: ""\nacceptanceCriteria: []\ntargetPath: /etc/passwd\ntestPath: t.js\n',
  );
  const refused = await runTreadle(h, ['tdd', bad, '--repo', repo]);
  expect(refused.code).toBe(2);
  expect(refused.stderr).toMatch(/TDD spec is invalid/);
  expect(refused.stderr).toMatch(/- id: letters, digits/);
  expect(refused.stderr).toMatch(/- description: describe what to build/);
  expect(refused.stderr).toMatch(/- acceptanceCriteria: at least one acceptance criterion/);
  expect(refused.stderr).toMatch(/- targetPath: must be a relative path/);
}, 240_000);

test('a parent that fails cancels its running children instead of leaving them waiting to merge', async () => {
  const repo = await repos.create('failing-parent', { 'README.md': '# failing\n' });
  const id = h.id('tdd-fail');
  const stub = (name: string) => `'use strict';\nmodule.exports = { ${name}: () => { throw new Error('todo'); } };\n`;
  const redTest = (name: string, file: string) =>
    `'use strict';\nconst test = require('node:test');\nconst assert = require('node:assert/strict');\ntest('${name}', () => assert.equal(require('../src/${file}').${name}(), 1));\n`;
  const contract = (name: string, file: string) =>
    `'use strict';\nconst test = require('node:test');\nconst assert = require('node:assert/strict');\ntest('exports ${name}', () => assert.equal(typeof require('../../src/${file}').${name}, 'function'));\n`;
  const failingSpec = {
    id: 'parent',
    description: 'a parent whose test writer never decides',
    acceptanceCriteria: [{ id: 'P1', text: 'p() is 1' }],
    targetPath: 'src/parent.js',
    testPath: 'test/parent.test.js',
    tdd: { humanTtlSeconds: 1, maxInvalidReplies: 1 },
  };
  const failingReplies = {
    'parent.scaffold': [
      {
        exit: 'InitWork',
        scaffoldCommit: '',
        interfaceFile: 'src/parent.js',
        contractSuite: 'test/contract/parent.test.js',
        testPlan: [],
        childSpecs: [
          {
            id: 'kid',
            description: 'k() is 1',
            acceptanceCriteria: [{ id: 'K1', text: 'k() is 1' }],
            targetPath: 'src/kid.js',
            testPath: 'test/kid.test.js',
          },
        ],
        files: { 'src/parent.js': stub('p'), 'test/contract/parent.test.js': contract('p', 'parent') },
      },
    ],
    'parent.tddWriteTests': ['Still thinking about which tests to write.'],
    'kid.scaffold': [
      {
        exit: 'InitWork',
        scaffoldCommit: '',
        interfaceFile: 'src/kid.js',
        contractSuite: 'test/contract/kid.test.js',
        testPlan: [],
        files: { 'src/kid.js': stub('k'), 'test/contract/kid.test.js': contract('k', 'kid') },
      },
    ],
    'kid.tddWriteTests': [
      {
        exit: 'TestsReady',
        testsCommit: '',
        testFiles: ['test/kid.test.js'],
        pendingCriteria: ['K1'],
        files: { 'test/kid.test.js': redTest('k', 'kid') },
      },
    ],
    'kid.impl': [
      {
        exit: 'TestsPassed',
        commitHash: '',
        iterations: 1,
        passedTests: ['k'],
        files: { 'src/kid.js': 'module.exports = { k: () => 1 };\n' },
      },
    ],
    'kid.tddReviewImpl': [
      { exit: 'Approved', signOff: 'ok', coverageReport: { criteriaWithTests: [], criteriaMissing: [] } },
    ],
  };
  await h.client.startTdd(failingSpec, { repo, id, replies: failingReplies });
  const result = await h.client.tddResult(id);
  expect(result.status).toBe('failed');
  expect(result.error).toMatch(/nobody answered before the wait expired/);
  const events = await nodeEvents(id);
  // The reminder, then the malformed-reply feedback, then no decision: a human is asked, nobody answers.
  expect(events.find((e) => e.type === 'NodeExit' && e.stage === 'tddWriteTests')?.details).toMatchObject({
    exit: 'NoDecision',
    nudged: true,
    invalidReplies: 2,
  });
  expect(events.some((e) => e.type === 'ReviewExpired')).toBe(true);
  const kid = await h.temporal.workflow.getHandle(`${id}.kid`).describe();
  expect(kid.status.name).toBe('CANCELLED');
  expect((await h.client.getTddState(id)).children).toEqual([expect.objectContaining({ id: 'kid', status: 'failed' })]);
}, 120_000);

test('ClarificationNeeded waits in the review queue; the answer reruns Scaffold and the leaf merges', async () => {
  const repo = await repos.create('calc');
  const id = h.id('tdd-calc');
  const file = (body: string) =>
    `'use strict';\nconst test = require('node:test');\nconst assert = require('node:assert/strict');\n${body}\n`;
  const calcSpec = {
    id: 'calc',
    description: 'add two numbers',
    acceptanceCriteria: [{ id: 'A1', text: 'add(a, b) is their sum' }],
    targetPath: 'src/add.js',
    testPath: 'test/add.test.js',
  };
  const calcReplies: Record<string, Json[]> = {
    'calc.scaffold': [
      {
        exit: 'ClarificationNeeded',
        question: 'Integers only, or floats too?',
        ambiguityReference: 'A1',
        specSentence: 'add(a, b) is their sum',
      },
      {
        exit: 'InitWork',
        scaffoldCommit: '',
        interfaceFile: 'src/add.js',
        contractSuite: 'test/contract/add.test.js',
        testPlan: [],
        files: {
          'src/add.js': "module.exports = { add: () => { throw new Error('todo'); } };\n",
          'test/contract/add.test.js': file(
            "test('exports add', () => assert.equal(typeof require('../../src/add').add, 'function'));",
          ),
        },
      },
    ],
    'calc.tddWriteTests': [
      {
        exit: 'TestsReady',
        testsCommit: '',
        testFiles: ['test/add.test.js'],
        pendingCriteria: ['A1'],
        files: { 'test/add.test.js': file("test('A1', () => assert.equal(require('../src/add').add(2, 3), 5));") },
      },
    ],
    'calc.impl': [
      {
        exit: 'TestsPassed',
        commitHash: '',
        iterations: 1,
        passedTests: ['A1'],
        files: { 'src/add.js': 'module.exports = { add: (a, b) => a + b };\n' },
      },
    ],
    'calc.tddReviewImpl': [
      { exit: 'Approved', signOff: 'ok', coverageReport: { criteriaWithTests: [['A1', 'A1']], criteriaMissing: [] } },
    ],
    'calc.merger': [{ exit: 'MergeComplete', mergeCommit: '', author: 'calc', impactLevel: 'Additive', changes: [] }],
  };
  await h.client.startTdd(calcSpec, { repo, id, replies: calcReplies });
  const listed = await eventually(async () =>
    (await h.client.listPendingReviews({ pipeline: 'tdd' })).find((r) => r.itemId === id),
  );
  expect(listed).toMatchObject({
    stage: 'scaffold',
    pipeline: 'tdd',
    message: expect.stringContaining('Integers only, or floats too?'),
  });
  // A review of a graph node that is not waiting names the node and what is waiting.
  await expect(h.client.review(id, 'impl', { kind: 'approve' })).rejects.toThrow(
    `stage "impl" of work item ${id} (TDD node calc) is not waiting for review (it is idle); waiting: scaffold`,
  );
  await h.client.review(id, 'scaffold', { kind: 'approve_with_edits', artefact: 'integers only' });
  const result = await h.client.tddResult(id);
  expect(result.status).toBe('merged');
  const exits = (await nodeEvents(id))
    .filter((e) => e.type === 'NodeExit')
    .map((e) => `${e.stage}:${String(e.details?.exit)}`);
  expect(exits.slice(0, 2)).toEqual(['scaffold:ClarificationNeeded', 'scaffold:InitWork']);
  expect(gitIn(repo, 'log', '-1', '--format=%s', 'treadle/calc')).toBe('feat(calc): implement');
}, 120_000);
