/**
 * Seed 001's "Node Edges" table on the real server, edge by edge: each test runs a small tree on a real git
 * repository with scripted replies that take one or more edges the shipped example (`tdd-tree.test.ts`) does
 * not, and asserts the route the node took (its NodeExit / NodeRouted events), what the node was told, and how
 * the tree ended. Edges the example covers (InitWork → Fork, TestsReady → barrier, TestsPassed → review,
 * Approved → Merger, MoreTests → TDDWriteTests, MergeComplete → parent + siblings, RebaseClean/Adapted →
 * TDDWriteTests, RequestRetry → Impl) are taken again here where a route needs them.
 */
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { defaultAgentProviders } from '../../src/agents';
import type { AgentProviderFactory } from '../../src/agents/providers';
import type { Json, TreadleEvent } from '../../src/model/shapes';
import { eventually, startHarness, type Harness } from '../support/harness';
import { gitIn, leaf, tddRepos, testFile, type TddRepos } from '../support/tdd-fixtures';

let h: Harness;
let repos: TddRepos;

beforeAll(async () => {
  repos = tddRepos('tdd-edges-');
  h = await startHarness({ agents: { ...defaultAgentProviders(), refusing } });
});
afterAll(async () => {
  await h?.shutdown();
  repos?.remove();
});

/**
 * The scripted agent, except that the second call to `tddWriteTests` of a spec named `refus…` fails for
 * good, as a provider refusing the account would: the node's activity fails, and so does the node.
 */
const refusing: AgentProviderFactory = (ctx) => {
  const scripted = defaultAgentProviders().scripted!(ctx);
  return {
    provider: 'refusing',
    run: async (request) => {
      if (ctx.stage.startsWith('refus') && ctx.stage.endsWith('.tddWriteTests') && ctx.attempt >= 2)
        throw ApplicationFailure.nonRetryable('the provider refused the request', 'ProviderRefused');
      return scripted.run(request);
    },
  };
};

async function events(id: string): Promise<TreadleEvent[]> {
  return h.client.events(id);
}

/** `node:Exit` for every NodeExit of a node workflow, in order. */
async function exitsOf(id: string): Promise<string[]> {
  return (await events(id)).filter((e) => e.type === 'NodeExit').map((e) => `${e.stage}:${String(e.details?.exit)}`);
}

/** The messages of the node's NodeRouted events, in order. */
async function routesOf(id: string): Promise<string[]> {
  return (await events(id)).filter((e) => e.type === 'NodeRouted').map((e) => e.message);
}

test('TDDWriteTests InvalidScaffold, Impl BlockedDependency and Impl SpecAmbiguity each go back to Scaffold; RequestRetry loops Impl with the next attempt', async () => {
  const l = leaf('edgy');
  const repo = await repos.create('edgy');
  const id = h.id('tdd-edges-scaffold');
  const replies: Record<string, Json[]> = {
    'edgy.scaffold': [l.initWork, l.initWork, l.initWork, l.initWork],
    'edgy.tddWriteTests': [
      { exit: 'InvalidScaffold', missingType: 'Fixture', expectedLocation: 'test/fixtures/edgy.json' },
      l.testsReady,
      l.testsReady,
      l.testsReady,
    ],
    'edgy.impl': [
      l.requestRetry(1),
      { exit: 'BlockedDependency', missingSymbol: 'parseEdge', expectedImportPath: 'src/parse.js' },
      {
        exit: 'SpecAmbiguity',
        specSentence: 'edgy() is 1',
        contradictionTrace: 'C1 says 1, the README says one',
        question: 'A number or a word?',
      },
      l.testsPassed,
    ],
    'edgy.tddReviewImpl': [l.approved],
    'edgy.merger': [l.mergeComplete],
  };
  await h.client.startTdd({ ...l.spec, tdd: { maxScaffoldRuns: 6 } }, { repo, id, replies });
  const result = await h.client.tddResult(id);
  expect(result).toMatchObject({ status: 'merged' });

  expect(await exitsOf(id)).toEqual([
    'scaffold:InitWork',
    'tddWriteTests:InvalidScaffold',
    'scaffold:InitWork',
    'tddWriteTests:TestsReady',
    'impl:RequestRetry',
    'impl:BlockedDependency',
    'scaffold:InitWork',
    'tddWriteTests:TestsReady',
    'impl:SpecAmbiguity',
    'scaffold:InitWork',
    'tddWriteTests:TestsReady',
    'impl:TestsPassed',
    'tddReviewImpl:Approved',
    'merger:MergeComplete',
  ]);
  const routes = await routesOf(id);
  expect(routes).toEqual(
    expect.arrayContaining([
      '→ scaffold: InvalidScaffold: Fixture missing at test/fixtures/edgy.json',
      '→ impl (attempt 2): RequestRetry: not yet (1)',
      '→ scaffold: BlockedDependency: parseEdge expected at src/parse.js',
      expect.stringMatching(/^→ scaffold: SpecAmbiguity: A number or a word\?/),
    ]),
  );
  // The attempt count is the workflow's: it went to 2 on RequestRetry, the node only saw it.
  const state = await h.client.getTddState(id);
  expect(state.counters).toMatchObject({ scaffoldRuns: 4 });
  expect(gitIn(repo, 'show', 'treadle/edgy:src/edgy.js')).toBe('module.exports = { edgy: () => 1 };');
}, 180_000);

test('RequestRetry at the fifth Impl attempt becomes Stuck; a human’s guidance reruns Impl from attempt 1 with it', async () => {
  const l = leaf('stubborn');
  const repo = await repos.create('stubborn');
  const id = h.id('tdd-edges-stuck');
  const replies: Record<string, Json[]> = {
    'stubborn.scaffold': [l.initWork],
    'stubborn.tddWriteTests': [l.testsReady],
    'stubborn.impl': [
      l.requestRetry(1),
      l.requestRetry(2),
      l.requestRetry(3),
      l.requestRetry(4),
      l.requestRetry(5),
      l.testsPassed,
    ],
    'stubborn.tddReviewImpl': [l.approved],
    'stubborn.merger': [l.mergeComplete],
  };
  await h.client.startTdd(l.spec, { repo, id, replies });
  const waiting = await eventually(async () =>
    (await h.client.listPendingReviews({ pipeline: 'tdd' })).find((r) => r.itemId === id),
  );
  expect(waiting).toMatchObject({
    stage: 'impl',
    message: expect.stringContaining('RequestRetry at attempt 5 of 5 becomes Stuck'),
  });
  await h.client.review(id, 'impl', { kind: 'approve_with_edits', artefact: 'return the constant 1' });

  expect(await h.client.tddResult(id)).toMatchObject({ status: 'merged' });
  expect((await exitsOf(id)).filter((e) => e.startsWith('impl:'))).toEqual([
    'impl:RequestRetry',
    'impl:RequestRetry',
    'impl:RequestRetry',
    'impl:RequestRetry',
    'impl:RequestRetry',
    'impl:TestsPassed',
  ]);
  const routes = await routesOf(id);
  expect(routes.filter((r) => r.startsWith('→ impl (attempt'))).toEqual([
    '→ impl (attempt 1): barrier',
    '→ impl (attempt 2): RequestRetry: not yet (1)',
    '→ impl (attempt 3): RequestRetry: not yet (2)',
    '→ impl (attempt 4): RequestRetry: not yet (3)',
    '→ impl (attempt 5): RequestRetry: not yet (4)',
    '→ impl (attempt 1): guidance from a human',
  ]);
  expect(routes).toContainEqual(
    expect.stringMatching(/^→ human \(stuck\): RequestRetry at attempt 5 of 5 becomes Stuck/),
  );
  // The guidance reached Impl's next call, which ran as attempt 1 (its commit says so).
  expect(gitIn(repo, 'log', '--format=%s', 'tdd/stubborn')).toContain('feat(stubborn): implementation, attempt 1');
}, 180_000);

test('Impl Stuck escalates to a human; aborting exits the node failed', async () => {
  const l = leaf('hopeless');
  const repo = await repos.create('hopeless');
  const id = h.id('tdd-edges-abort');
  const replies: Record<string, Json[]> = {
    'hopeless.scaffold': [l.initWork],
    'hopeless.tddWriteTests': [l.testsReady],
    'hopeless.impl': [
      {
        exit: 'Stuck',
        diagnosis: 'the criterion contradicts the interface',
        recommendation: 'rewrite the spec',
        attempts: 1,
      },
    ],
  };
  await h.client.startTdd(l.spec, { repo, id, replies });
  const waiting = await eventually(async () =>
    (await h.client.listPendingReviews({ pipeline: 'tdd' })).find((r) => r.itemId === id),
  );
  expect(waiting).toMatchObject({
    stage: 'impl',
    message: expect.stringContaining('Stuck: the criterion contradicts the interface'),
  });
  await h.client.review(id, 'impl', { kind: 'reject', reason: 'spec to be rewritten' });

  const result = await h.client.tddResult(id);
  expect(result).toMatchObject({ status: 'failed', error: 'stuck: aborted by a human: spec to be rewritten' });
  expect(await exitsOf(id)).toEqual(['scaffold:InitWork', 'tddWriteTests:TestsReady', 'impl:Stuck']);
  expect((await events(id)).some((e) => e.type === 'ItemFailed')).toBe(true);
  // Nothing was merged: the target branch is still the base.
  expect(gitIn(repo, 'log', '--format=%s', 'treadle/hopeless')).not.toMatch(/implement/);
}, 120_000);

test('TDDReviewImpl MoreTests goes back to TDDWriteTests with the critiques; Reject waits for a human and, unanswered, exits', async () => {
  const l = leaf('picky');
  const repo = await repos.create('picky');
  const id = h.id('tdd-edges-reject');
  const moreTests = {
    exit: 'MoreTests',
    critiques: [{ file: 'test/picky.test.js', line: 4, issue: 'only the happy path', requiredFix: 'call it twice' }],
    additionalTests: [{ criterionId: 'C1', plannedTestName: 'C1 twice', approach: 'two calls' }],
  };
  const moreTestsReady = {
    ...l.testsReady,
    files: {
      'test/picky.test.js': testFile(
        "test('C1', () => assert.equal(require('../src/picky').picky(), 1));\ntest('C1 twice', () => { const { picky } = require('../src/picky'); assert.equal(picky() + picky(), 2); });",
      ),
    },
  };
  const replies: Record<string, Json[]> = {
    'picky.scaffold': [l.initWork],
    'picky.tddWriteTests': [l.testsReady, moreTestsReady],
    'picky.impl': [l.testsPassed, l.testsPassed],
    'picky.tddReviewImpl': [
      moreTests,
      { exit: 'Reject', reason: 'the implementation ignores the spec', missingCriteria: ['C2'] },
    ],
  };
  await h.client.startTdd({ ...l.spec, tdd: { humanTtlSeconds: 2 } }, { repo, id, replies });

  const result = await h.client.tddResult(id);
  expect(result).toMatchObject({ status: 'failed', error: 'review rejected: nobody answered before the wait expired' });
  expect(await exitsOf(id)).toEqual([
    'scaffold:InitWork',
    'tddWriteTests:TestsReady',
    'impl:TestsPassed',
    'tddReviewImpl:MoreTests',
    'tddWriteTests:TestsReady',
    'impl:TestsPassed',
    'tddReviewImpl:Reject',
  ]);
  const routes = await routesOf(id);
  expect(routes).toContain('→ tddWriteTests: MoreTests: 1 critiques, 1 additional tests');
  expect(routes).toContainEqual(
    expect.stringMatching(
      /^→ human \(review_rejected\): the reviewer rejected the implementation \(Reject: the implementation ignores the spec\)/,
    ),
  );
  const all = await events(id);
  expect(all.some((e) => e.type === 'ReviewExpired' && e.stage === 'tddReviewImpl')).toBe(true);
  expect((await h.client.getTddState(id)).counters).toMatchObject({ reviewRounds: 1 });
  // The second round's tests are in the branch: the critiques were acted on.
  expect(gitIn(repo, 'show', 'tdd/picky:test/picky.test.js')).toContain('C1 twice');
}, 120_000);

test('Merger MergeRejected returns to Impl, counted against its attempts; the next merge completes', async () => {
  const l = leaf('clash');
  const repo = await repos.create('clash');
  const id = h.id('tdd-edges-merge');
  const replies: Record<string, Json[]> = {
    'clash.scaffold': [l.initWork],
    'clash.tddWriteTests': [l.testsReady],
    'clash.impl': [l.testsPassed, l.testsPassed],
    'clash.tddReviewImpl': [l.approved, l.approved],
    'clash.merger': [
      {
        exit: 'MergeRejected',
        reason: 'ContractViolation',
        details: 'the export is named wrong',
        failingTests: ['exports clash'],
      },
      l.mergeComplete,
    ],
  };
  await h.client.startTdd(l.spec, { repo, id, replies });

  expect(await h.client.tddResult(id)).toMatchObject({ status: 'merged' });
  expect(await exitsOf(id)).toEqual([
    'scaffold:InitWork',
    'tddWriteTests:TestsReady',
    'impl:TestsPassed',
    'tddReviewImpl:Approved',
    'merger:MergeRejected',
    'impl:TestsPassed',
    'tddReviewImpl:Approved',
    'merger:MergeComplete',
  ]);
  expect(await routesOf(id)).toContain('→ impl (attempt 2): MergeRejected: the export is named wrong');
  expect(gitIn(repo, 'log', '-1', '--format=%s', 'treadle/clash')).toBe('feat(clash): implement');
}, 120_000);

test('Rebaser RebaseConflict sends the sibling that did not merge first back to Scaffold; both children and the parent still merge', async () => {
  const a = leaf('alpha');
  const b = leaf('beta');
  const p = leaf('both');
  const repo = await repos.create('siblings');
  const id = h.id('tdd-edges-rebase');
  const children = [a, b].map((c) => ({
    id: c.spec.id,
    description: c.spec.description,
    acceptanceCriteria: c.spec.acceptanceCriteria,
    targetPath: c.spec.targetPath,
    testPath: c.spec.testPath,
  }));
  const conflict = (name: string) => ({
    exit: 'RebaseConflict',
    conflictFile: `src/${name}.js`,
    ourChange: 'rewrote the export',
    theirChange: 'the sibling renamed it',
    whyUnresolvable: 'a logic change, not mechanical',
  });
  // Which child merges first is the parent's to decide: both are scripted for either role.
  const childReplies = (c: ReturnType<typeof leaf>): Record<string, Json[]> => ({
    [`${c.spec.id}.scaffold`]: [c.initWork, c.initWork],
    [`${c.spec.id}.tddWriteTests`]: [c.testsReady, c.testsReady],
    [`${c.spec.id}.impl`]: [c.testsPassed, c.testsPassed],
    [`${c.spec.id}.tddReviewImpl`]: [c.approved, c.approved],
    [`${c.spec.id}.merger`]: [c.mergeComplete, c.mergeComplete],
    [`${c.spec.id}.rebaser`]: [conflict(c.spec.id)],
  });
  const parentImpl = {
    ...p.testsPassed,
    files: {
      'src/both.js':
        "const { alpha } = require('./alpha');\nconst { beta } = require('./beta');\nmodule.exports = { both: () => alpha() * beta() };\n",
    },
  };
  const replies: Record<string, Json[]> = {
    'both.scaffold': [{ ...p.initWork, childSpecs: children }],
    'both.tddWriteTests': [p.testsReady],
    'both.impl': [parentImpl],
    'both.tddReviewImpl': [p.approved, p.approved, p.approved],
    'both.merger': [p.mergeComplete],
    ...childReplies(a),
    ...childReplies(b),
  };
  await h.client.startTdd(p.spec, { repo, id, replies });
  expect(await h.client.tddResult(id)).toMatchObject({ status: 'merged' });

  const kids = await Promise.all(
    ['alpha', 'beta'].map(async (name) => ({
      name,
      exits: await exitsOf(`${id}.${name}`),
      routes: await routesOf(`${id}.${name}`),
    })),
  );
  const rebased = kids.filter((k) => k.exits.includes('rebaser:RebaseConflict'));
  expect(rebased).toHaveLength(1);
  const [second] = rebased;
  const first = kids.find((k) => k !== second)!;
  expect(first.exits).toEqual([
    'scaffold:InitWork',
    'tddWriteTests:TestsReady',
    'impl:TestsPassed',
    'tddReviewImpl:Approved',
    'merger:MergeComplete',
  ]);
  // The rebase came first, then Scaffold again, and the node went the whole way round to its merge.
  const afterConflict = second!.exits.slice(second!.exits.indexOf('rebaser:RebaseConflict'));
  expect(afterConflict).toEqual([
    'rebaser:RebaseConflict',
    'scaffold:InitWork',
    'tddWriteTests:TestsReady',
    'impl:TestsPassed',
    'tddReviewImpl:Approved',
    'merger:MergeComplete',
  ]);
  expect(second!.routes).toContain('rebaser → scaffold: RebaseConflict: a logic change, not mechanical');
  expect(
    (await events(`${id}.${second!.name}`)).some(
      (e) => e.type === 'SiblingMerged' && e.message.includes(`sibling both.${first.name} merged`),
    ),
  ).toBe(true);

  // Both children are in the parent's branch, the parent in the target, and the whole suite is green.
  const log = gitIn(repo, 'log', '--format=%s', 'treadle/both');
  expect(log).toMatch(/feat\(both\): implement/);
  const checkout = path.join(repos.root, 'siblings-checkout');
  gitIn(repo, 'worktree', 'add', '--detach', checkout, 'treadle/both');
  expect(execFileSync('node', ['--test'], { cwd: checkout, encoding: 'utf8' })).toMatch(/# fail 0/);
}, 240_000);

test('a tree the worker refuses (a test command off its allow-list) ends failed, visibly, instead of waiting', async () => {
  const l = leaf('refused');
  const repo = await repos.create('refused');
  const id = h.id('tdd-edges-refused');
  await h.client.startTdd(
    { ...l.spec, tdd: { testCommand: ['python3', '-m', 'pytest'] } },
    { repo, id, replies: { 'refused.scaffold': [l.initWork] } },
  );
  // The workflow fails (red in the Web UI) with the worker's reason; its events say so too.
  await expect(h.client.tddResult(id)).rejects.toThrow();
  const description = await h.temporal.workflow.getHandle(id).describe();
  expect(description.status.name).toBe('FAILED');
  const failed = (await events(id)).find((e) => e.type === 'ItemFailed');
  expect(failed?.message).toMatch(/the test command \["python3","-m","pytest"\] is not allowed/);
}, 60_000);

test('a tree that fails by an error (its activity failed for good) still reports its calls, which the work item counts', async () => {
  const l = leaf('refusal');
  const repo = await repos.create('refusal');
  const id = h.id('tdd-edges-error-usage');
  // Scaffold answers (one call); TDDWriteTests answers malformed (a second call) and is re-prompted, which the
  // provider refuses for good.
  const replies = { 'refusal.scaffold': [l.initWork], 'refusal.tddWriteTests': ['not a decision'] };
  await h.client.start(
    {
      name: 'refused-build',
      stages: [{ name: 'build', run: 'tdd', with: { spec: { ...l.spec, tdd: { agent: 'refusing' } }, repo, replies } }],
    },
    null,
    { id },
  );
  const result = await h.client.result(id);
  expect(result.status).toBe('failed');
  // The message is the error's own, as before the tree reported its calls with it.
  expect(result.stageErrors?.build).toMatch(/the provider refused the request/);
  const tree = await h.client.getTddState(`${id}.build.1`);
  expect(tree).toMatchObject({ status: 'failed', usage: { calls: 2 } });
  const usage = await h.client.usage(id);
  expect(usage.stages.build).toMatchObject({ calls: 2 });
  expect(usage.stages.build!.inputTokens).toBe(tree.usage!.inputTokens);
  expect(usage.stages.build!.inputTokens).toBeGreaterThan(0);
}, 90_000);

test('a child that fails by an error reports its calls to its parent, which counts them in the tree', async () => {
  const p = leaf('solo');
  const k = leaf('refusedkid');
  const repo = await repos.create('solo');
  const id = h.id('tdd-edges-child-error-usage');
  const kid = {
    id: k.spec.id,
    description: k.spec.description,
    acceptanceCriteria: k.spec.acceptanceCriteria,
    targetPath: k.spec.targetPath,
    testPath: k.spec.testPath,
  };
  const replies: Record<string, Json[]> = {
    'solo.scaffold': [{ ...p.initWork, childSpecs: [kid] }],
    'solo.tddWriteTests': [p.testsReady],
    'solo.impl': [p.testsPassed],
    'solo.tddReviewImpl': [p.approved],
    'solo.merger': [p.mergeComplete],
    'refusedkid.scaffold': [k.initWork],
    'refusedkid.tddWriteTests': ['not a decision'],
  };
  await h.client.startTdd({ ...p.spec, tdd: { agent: 'refusing' } }, { repo, id, replies });
  const result = await h.client.tddResult(id);
  const parent = await h.client.getTddState(id);
  const child = await h.client.getTddState(`${id}.refusedkid`);
  expect(child).toMatchObject({ status: 'failed', usage: { calls: 2 } });
  expect(parent.children).toEqual([
    expect.objectContaining({ id: 'refusedkid', status: 'failed', usage: expect.objectContaining({ calls: 2 }) }),
  ]);
  expect(parent.children[0]!.error).toMatch(/the provider refused the request/);
  // The tree's usage is the parent's own calls and its failed child's.
  expect(result.usage?.calls).toBe(parent.usage!.calls + 2);
  expect(result.usage?.inputTokens).toBe(parent.usage!.inputTokens + child.usage!.inputTokens);
}, 120_000);
