/**
 * What Treadle refuses a TDD agent is visible to the user (issue 24 §2), on the real server: each refusal —
 * a path outside the worktree, in .git or absolute; a write to a read-only test file; children past the
 * tree's maxChildren or maxDepth — is in the node's events (a `WorkRefused` event and the NodeExit's details,
 * which `treadle status` / `watch` show), in the Web UI's details, and in `treadle audit`, naming the path or
 * limit. A call's refusals are capped (5 listed, the rest counted). The worktree tools' refusals are covered
 * in tdd-anthropic-tools.test.ts, claude-code's read-only files in tdd-activity.test.ts.
 */
import type { Json, TreadleEvent } from '../../src/model/shapes';
import { startHarness, type Harness } from '../support/harness';
import { leaf, tddRepos, testFile, type TddRepos } from '../support/tdd-fixtures';

let h: Harness;
let repos: TddRepos;

beforeAll(async () => {
  repos = tddRepos('tdd-refusals-');
  h = await startHarness();
});
afterAll(async () => {
  await h?.shutdown();
  repos?.remove();
});

const refusedEvents = (events: TreadleEvent[]) => events.filter((e) => e.type === 'WorkRefused');

test('path escapes, read-only test files, too many children and the depth limit are in the node’s events, details and audit', async () => {
  const p = leaf('rf');
  const k = leaf('rk');
  const g = leaf('rg');
  const repo = await repos.create('rf');
  const id = h.id('tdd-refusals');
  const withFiles = (files: Record<string, string>) => ({ ...p.initWork, files: { ...p.initWork.files, ...files } });
  const replies: Record<string, Json[]> = {
    // Six refusals in five replies: more than a call lists.
    'rf.scaffold': [
      { ...p.initWork, childSpecs: [k.child, k.child, g.child] },
      withFiles({ '../escaped.js': 'x' }),
      withFiles({ '.git/hooks/pre-commit': 'x' }),
      withFiles({ '/tmp/absolute.js': 'x' }),
      withFiles({ '../../again.js': 'x' }),
      { ...p.initWork, childSpecs: [k.child] },
    ],
    'rf.tddWriteTests': [p.testsReady],
    // Impl rewrites its test to pass: refused, then an honest implementation.
    'rf.impl': [
      { ...p.testsPassed, files: { ...p.testsPassed.files, 'test/rf.test.js': testFile("test('C1', () => {});") } },
      p.testsPassed,
    ],
    'rf.tddReviewImpl': [p.approved, p.approved],
    'rf.merger': [p.mergeComplete],
    // The child, at depth 1 of a tree whose maxDepth is 1, may not have children of its own.
    'rk.scaffold': [{ ...k.initWork, childSpecs: [g.child] }, k.initWork],
    'rk.tddWriteTests': [k.testsReady],
    'rk.impl': [k.testsPassed],
    'rk.tddReviewImpl': [k.approved],
    'rk.merger': [k.mergeComplete],
  };
  await h.client.startTdd(
    { ...p.spec, tdd: { maxChildren: 2, maxDepth: 1, maxInvalidReplies: 5 } },
    { repo, id, replies },
  );
  expect(await h.client.tddResult(id)).toMatchObject({ status: 'merged' });

  // The root's events: one WorkRefused per call that refused something, naming the limit or path.
  const events = await h.client.events(id);
  const refused = refusedEvents(events);
  expect(refused.map((e) => [e.stage, e.details?.refused])).toEqual([
    ['scaffold', 6],
    ['impl', 1],
  ]);
  const scaffoldRefusals = [
    "childSpecs: 3 children, the tree's maxChildren is 2; group the work into fewer children",
    'childSpecs: child id "rk" appears more than once',
    // A reply's paths are checked as it is read, and again on disk (.git is the worktree's).
    'files: refused path "../escaped.js": must be a relative path inside the worktree (no leading "/", no "..")',
    'files: refused path ".git/hooks/pre-commit": files in .git are not the agent’s',
    'files: refused path "/tmp/absolute.js": must be a relative path inside the worktree (no leading "/", no "..")',
  ];
  // Five listed, the sixth ("../../again.js") only counted.
  expect(refused[0]!.details?.refusals).toEqual(scaffoldRefusals);
  expect(refused[0]!.message).toMatch(/^scaffold: refused 6×: childSpecs: 3 children, the tree's maxChildren is 2/);
  expect(refused[1]!.message).toBe('impl: refused 1×: files: test/rf.test.js is read-only');
  // The NodeExit of the call carries them too, next to its invalidReplies.
  const scaffoldExit = events.find((e) => e.type === 'NodeExit' && e.stage === 'scaffold');
  expect(scaffoldExit?.details).toMatchObject({
    exit: 'InitWork',
    invalidReplies: 5,
    refused: 6,
    refusals: scaffoldRefusals,
  });
  expect(events.find((e) => e.type === 'NodeExit' && e.stage === 'impl')?.details).toMatchObject({
    invalidReplies: 1,
    refused: 1,
    refusals: ['files: test/rf.test.js is read-only'],
  });

  // The child's depth limit.
  const childRefused = refusedEvents(await h.client.events(`${id}.rk`));
  expect(childRefused.map((e) => e.message)).toEqual([
    "scaffold: refused 1×: childSpecs: this node is at depth 1 and the tree's maxDepth is 1; implement it directly, without children",
  ]);

  // The Web UI's details (the workflow's current details) and the state count them all.
  expect((await h.client.getTddState(id)).refusals).toEqual({
    count: 7,
    texts: [scaffoldRefusals[3], scaffoldRefusals[4], 'files: test/rf.test.js is read-only'],
  });
  const metadata = await h.temporal.workflow
    .getHandle(id)
    .query<{ currentDetails?: string }>('__temporal_workflow_metadata');
  expect(metadata.currentDetails).toContain('Refused to the agent: 7 (latest: ');

  // The audit: a line per listed refusal, and one for the rest.
  const audit = (await h.client.audit(id)).filter((e) => e.message.includes(' refused'));
  expect(audit.map((e) => [e.step, e.message])).toEqual([
    ...scaffoldRefusals.map((r) => ['scaffold', `rf scaffold refused: ${r}`]),
    ['scaffold', 'rf scaffold refused 1 more (not listed)'],
    ['impl', 'rf impl refused: files: test/rf.test.js is read-only'],
  ]);
  expect(
    (await h.client.audit(`${id}.rk`)).filter((e) => e.message.includes(' refused')).map((e) => e.message),
  ).toEqual([
    "rf.rk scaffold refused: childSpecs: this node is at depth 1 and the tree's maxDepth is 1; implement it directly, without children",
  ]);
}, 180_000);
