/**
 * A human's guidance reaches the step it answers (issue 24 §1), on the real server: root `r` with children `x`
 * and `y`, both stuck in Impl; `y` is answered first and merges while `x` still waits, so `x` has a sibling's
 * merge to rebase onto when its own answer arrives. The rebase sends `x` to TDDWriteTests first; the guidance
 * must still reach `x`'s next Impl call (and not be used up by TDDWriteTests). Prompts are recorded by an agent
 * provider that wraps the scripted one.
 */
import { defaultAgentProviders } from '../../src/agents';
import type { AgentProviderFactory } from '../../src/agents/providers';
import type { Json, TreadleEvent } from '../../src/model/shapes';
import { eventually, startHarness, type Harness } from '../support/harness';
import { leaf, tddRepos, type TddRepos } from '../support/tdd-fixtures';

let h: Harness;
let repos: TddRepos;

/** The prompt of every agent call (its last message: the shared conversation comes before it), by `<spec>.<node>`. */
const prompts = new Map<string, string[]>();
const recording: AgentProviderFactory = (ctx) => {
  const scripted = defaultAgentProviders().scripted!(ctx);
  return {
    provider: 'recording',
    run: async (request) => {
      const last = request.messages[request.messages.length - 1]?.content;
      prompts.set(ctx.stage, [
        ...(prompts.get(ctx.stage) ?? []),
        typeof last === 'string' ? last : JSON.stringify(last),
      ]);
      return scripted.run(request);
    },
  };
};

beforeAll(async () => {
  repos = tddRepos('tdd-guidance-');
  h = await startHarness({ agents: { ...defaultAgentProviders(), recording } });
});
afterAll(async () => {
  await h?.shutdown();
  repos?.remove();
});

test('guidance to a stuck Impl reaches its next Impl call when a sibling merged during the wait (rebase, TDDWriteTests in between)', async () => {
  const x = leaf('gx');
  const y = leaf('gy');
  const r = leaf('gr');
  const repo = await repos.create('siblings');
  const id = h.id('tdd-guidance');
  const rootImpl = {
    ...r.testsPassed,
    files: {
      'src/gr.js':
        "const { gx } = require('./gx');\nconst { gy } = require('./gy');\nmodule.exports = { gr: () => gx() * gy() };\n",
    },
  };
  const replies: Record<string, Json[]> = {
    'gr.scaffold': [{ ...r.initWork, childSpecs: [x.child, y.child] }],
    'gr.tddWriteTests': [r.testsReady],
    'gr.impl': [rootImpl],
    // The root judges y's merge, then x's, then approves its own work.
    'gr.tddReviewImpl': [r.approved, r.approved, r.approved],
    'gr.merger': [r.mergeComplete],
    'gx.scaffold': [x.initWork],
    'gx.tddWriteTests': [x.testsReady, x.testsReady],
    'gx.impl': [x.stuck, x.testsPassed],
    'gx.rebaser': [{ exit: 'RebaseClean', newBase: '' }],
    'gx.tddReviewImpl': [x.approved],
    'gx.merger': [x.mergeComplete],
    'gy.scaffold': [y.initWork],
    'gy.tddWriteTests': [y.testsReady],
    'gy.impl': [y.stuck, y.testsPassed],
    'gy.tddReviewImpl': [y.approved],
    'gy.merger': [y.mergeComplete],
  };
  await h.client.startTdd({ ...r.spec, tdd: { agent: 'recording' } }, { repo, id, replies });
  const [xId, yId] = [`${id}.gx`, `${id}.gy`];
  const waiting = async (itemId: string) =>
    eventually(
      async () => (await h.client.listPendingReviews({ pipeline: 'tdd' })).find((p) => p.itemId === itemId),
      60_000,
      `${itemId} waiting`,
    );
  await waiting(xId);
  await waiting(yId);

  // y is answered first and merges while x still waits; x hears of it (the parent's signal is in x's history).
  await h.client.review(yId, 'impl', { kind: 'approve', note: 'y: return 1' });
  await eventually(
    async () =>
      (await h.client.getTddState(id)).children.find((c) => c.id === 'gy')?.status === 'merged' ? true : undefined,
    60_000,
    'gy merged',
  );
  await eventually(
    async () => {
      const history = await h.temporal.workflow.getHandle(xId).fetchHistory();
      return history.events?.some((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'tddSiblingMerged')
        ? true
        : undefined;
    },
    30_000,
    'x told of the sibling merge',
  );
  expect((await h.client.getTddState(xId)).status).toBe('waiting_review');

  await h.client.review(xId, 'impl', { kind: 'approve', note: 'GUIDE-ME: gx() returns 1' });
  expect(await h.client.tddResult(id)).toMatchObject({ status: 'merged' });

  // The route x took: the answer, the rebase onto y's merge, TDDWriteTests, then Impl.
  const events: TreadleEvent[] = await h.client.events(xId);
  const after = events.slice(events.findIndex((e) => e.type === 'ReviewResolved'));
  expect(after.filter((e) => e.type === 'NodeExit').map((e) => `${e.stage}:${String(e.details?.exit)}`)).toEqual([
    'rebaser:RebaseClean',
    'tddWriteTests:TestsReady',
    'impl:TestsPassed',
    'tddReviewImpl:Approved',
    'merger:MergeComplete',
  ]);
  expect(after.some((e) => e.type === 'SiblingMerged')).toBe(true);

  // The guidance is in the prompt of Impl's call after the wait, and in no TDDWriteTests or Rebaser prompt.
  const implPrompts = prompts.get('gx.impl')!;
  expect(implPrompts).toHaveLength(2);
  expect(implPrompts[0]).not.toContain('GUIDE-ME');
  expect(implPrompts[1]).toContain('## Why you are called again\nGuidance from a human: GUIDE-ME: gx() returns 1');
  expect(prompts.get('gx.tddWriteTests')).toHaveLength(2);
  for (const prompt of [...prompts.get('gx.tddWriteTests')!, ...prompts.get('gx.rebaser')!])
    expect(prompt).not.toContain('GUIDE-ME');
  // y's own guidance reached y's Impl (no sibling merged during its wait).
  expect(prompts.get('gy.impl')![1]).toContain('Guidance from a human: y: return 1');
}, 240_000);
