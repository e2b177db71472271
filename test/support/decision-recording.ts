/**
 * Engine 7's decisions, run once each for the recorded histories (test/replay/record-histories.ts) and for
 * the decision publication test: a stage review with a reviewer group then approved, an approval request
 * then decided, a TDD node Stuck then answered, and a loop that fails, is resumed by someone, fails again and
 * is abandoned. Each returns the ids of the workflows worth replaying, under the id each ran with.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { initRepository } from '../../src/kinds/tdd/worker/git';
import type { Json } from '../../src/model/shapes';
import { eventually, type Harness } from './harness';
import { leaf } from './tdd-fixtures';

/** A stage review: `always`, for the group `editors`. */
export const REVIEWED_SPEC = {
  name: 'decisions-review',
  stages: [{ name: 'draft', run: 'scripted', review_policy: 'always', reviewers: 'editors' }],
};

/** One approval request (the shipped `create_task` action). */
export const APPROVAL_SPEC = {
  name: 'decisions-approval',
  stages: [
    { name: 'draft', run: 'scripted' },
    { name: 'approve', type: 'approval', depends_on: ['draft'], with: { action: 'create_task', items: 'tasks' } },
  ],
};
export const APPROVAL_INPUT: Json = { script: { draft: [{ output: { tasks: [{ title: 'ship the inbox' }] } }] } };

/** A loop whose first two iterations crash (its agent exits 1). */
export const FAILING_LOOP_SPEC = {
  name: 'decisions-loop',
  stages: [
    {
      name: 'work',
      run: 'loop',
      with: {
        stage: { name: 'work', prompt: 'Read ${CTX}', termination: { type: 'judgment', consensus: 2 } },
        max_iterations: 3,
      },
    },
  ],
};
export const FAILING_LOOP_INPUT: Json = { agent_replies: { work: [{ crash: 'exit 1' }, { crash: 'exit 1' }] } };

/** Starts a one-leaf TDD tree whose Impl is Stuck once, then passes once a human gives guidance. */
export async function startStuckTree(h: Harness, id: string): Promise<void> {
  const root = mkdtempSync(path.join(os.tmpdir(), 'tdd-decisions-'));
  process.env.TREADLE_TDD_REPOS = root;
  const repo = path.join(root, 'guided');
  await initRepository(repo, { 'README.md': '# guided\n' });
  const l = leaf('guided');
  const replies: Record<string, Json[]> = {
    'guided.scaffold': [l.initWork],
    'guided.tddWriteTests': [l.testsReady],
    'guided.impl': [l.stuck, l.testsPassed],
    'guided.tddReviewImpl': [l.approved],
    'guided.merger': [l.mergeComplete],
  };
  await h.client.startTdd(l.spec, { repo, id, replies });
}

/** Waits until the item's loop is failed, before or after a first resume (a resume reruns the same iteration). */
export async function loopFailed(h: Harness, itemId: string, resumed: boolean): Promise<void> {
  await eventually(async () => {
    const loops = await h.client.loops(itemId).catch(() => []);
    return loops.some((l) => l.state.status === 'failed' && (l.state.lastResume !== undefined) === resumed)
      ? true
      : undefined;
  }, 60_000);
}

/** Runs every decision once, decided by `alice`; returns the workflow ids to record. */
export async function runDecisions(h: Harness, prefix: string): Promise<string[]> {
  const review = `${prefix}-review`;
  await h.client.start(REVIEWED_SPEC, {}, { id: review });
  await eventually(async () => ((await h.client.getState(review)).status === 'waiting_review' ? true : undefined));
  await h.client.approve(review, 'draft', { reviewer: 'alice' });
  await h.client.result(review);

  const approval = `${prefix}-approval`;
  await h.client.start(APPROVAL_SPEC, APPROVAL_INPUT, { id: approval });
  const request = await eventually(async () =>
    (await h.client.getState(approval)).approvals?.find((r) => r.status === 'pending'),
  );
  await h.client.decideApproval(request.id, 'approve', { by: 'alice' });
  await h.client.result(approval);

  const tdd = `${prefix}-tdd`;
  await startStuckTree(h, tdd);
  await eventually(
    async () => ((await h.client.getTddState(tdd)).pendingReviews.length > 0 ? true : undefined),
    120_000,
  );
  await h.client.review(tdd, 'impl', { kind: 'approve', note: 'return the constant 1' }, 'alice');
  await h.client.tddResult(tdd);

  const loop = `${prefix}-loop`;
  await h.client.start(FAILING_LOOP_SPEC, FAILING_LOOP_INPUT, { id: loop });
  await loopFailed(h, loop, false);
  await h.client.resumeLoop(loop, { by: 'alice' });
  await loopFailed(h, loop, true);
  await h.client.resumeLoop(loop, { action: 'abandon', by: 'alice', reason: 'the agent keeps crashing' });
  await h.client.result(loop).catch(() => undefined);
  return [review, approval, tdd, loop, `${loop}.work.1`];
}
