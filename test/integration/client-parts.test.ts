/**
 * `TreadleClient` as a front over parts (issue 38), on the real server: each part's methods (`client.items`,
 * `decisions`, `approvals`, `loopStages`, `trees`, `workers`) answer, and the flat method that is its alias gives
 * the same answer: reads compare equal, a second answer to something the part decided is `already_decided` by the
 * part's reviewer. The decisions of every kind go through their kind's answers (src/kinds/<kind>/client.ts).
 */
import { pipeline } from '../../src/kinds/builder';
import type { Json } from '../../src/model/shapes';
import { decisionKey } from '../../src/model/decisions';
import { fixedLoopSpec, loopReply } from '../support/pipelines';
import { eventually } from '../support/harness';
import { decisionsHarness, failedLoop, listedDecision } from '../support/decisions-harness';
import { leaf } from '../support/tdd-fixtures';

const { h, repos } = decisionsHarness('parts', { tdd: true });

// Visibility is namespace-wide and other files run in parallel: this file's own pipeline name.
const PIPELINE = 'client-parts-i38';

it('client.items and client.decisions answer as their aliases do, from start to result', async () => {
  const c = h.client;
  const spec = pipeline(PIPELINE).stage('draft', 'scripted').reviewPolicy('draft', 'always');
  const id = h.id('items');
  const started = await c.items.start(spec, null, { id });
  expect(started).toMatchObject({ id, existing: false });
  expect(await c.start(spec, null, { id })).toEqual({ ...started, existing: true });

  const key = decisionKey(id, 'review', 'draft');
  const listed = await listedDecision(
    () => c.decisions.list({ pipeline: PIPELINE }),
    (d) => d.key === key,
    'the review in the listing',
  );
  expect((await c.listPendingDecisions({ pipeline: PIPELINE })).find((d) => d.key === key)).toEqual(listed);
  const review = (await c.decisions.listReviews({ pipeline: PIPELINE })).find((r) => r.itemId === id);
  expect(review).toMatchObject({ itemId: id, stage: 'draft' });
  expect((await c.listPendingReviews({ pipeline: PIPELINE })).find((r) => r.itemId === id)).toEqual(review);

  const state = await c.items.state(id, { eventLimit: 5 });
  expect(state).toMatchObject({ id, status: 'waiting_review' });
  expect(await c.getState(id, { eventLimit: 5 })).toEqual(state);
  expect(await c.items.events(id)).toEqual(await c.events(id));
  expect(await c.items.workflowType(id)).toBe('workItem');
  expect(await c.workflowType(id)).toBe('workItem');
  expect(await c.items.visible(id)).toEqual(await c.visibleItem(id));
  expect(await c.items.usage(id)).toEqual(await c.usage(id));
  expect(await c.items.activityRetries(id)).toEqual(await c.activityRetries(id));
  const engines = await c.items.openByEngine({ taskQueue: h.taskQueue });
  expect(engines.reduce((sum, e) => sum + e.openItems, 0)).toBeGreaterThan(0);
  expect(await c.openItemsByEngine({ taskQueue: h.taskQueue })).toEqual(engines);
  const artefact = state.stages.draft!.attempts[0]!.artefact;
  expect(await c.items.readArtefact(artefact)).toEqual(await c.readArtefact(artefact));
  expect(await c.items.readArtefact(artefact)).toBeDefined();

  const detail = await c.decisions.detail(key);
  expect(detail).toMatchObject({ live: true, decision: { key, kind: 'review' } });
  expect(await c.decisionDetail(key)).toEqual(detail);
  expect(await c.decisions.checkEdit(key, { any: 'json' })).toEqual(await c.checkEdit(key, { any: 'json' }));

  const since = new Date(Date.now() - 60_000);
  expect(await c.decisions.decide(key, { action: 'approve' }, 'alice')).toEqual({
    status: 'decided',
    by: 'alice',
    outcome: 'approve',
  });
  expect(await c.decide(key, { action: 'reject', reason: 'late' }, 'bob')).toMatchObject({
    status: 'already_decided',
    by: 'alice',
    outcome: 'approve',
  });
  const result = await c.items.result(id);
  expect(result).toMatchObject({ status: 'completed' });
  expect(await c.result(id)).toEqual(result);
  const changed = await eventually(
    async () => ((await c.decisions.changes(since)).some((ch) => ch.workflowId === id) ? true : undefined),
    30_000,
    'the decided item in the delta',
  );
  expect(changed && (await c.listDecisionChanges(since)).some((ch) => ch.workflowId === id)).toBe(true);
  const audit = await c.items.audit(id);
  expect(audit.some((e) => e.kind === 'review')).toBe(true);
  expect(await c.audit(id)).toEqual(audit);

  const seen: number[] = [];
  const watched = await c.items.watch(id, (e) => seen.push(e.seq));
  expect(watched.status).toBe('completed');
  expect(seen).toEqual((await c.events(id)).map((e) => e.seq));
  const aliasSeen: number[] = [];
  expect((await c.watch(id, (e) => aliasSeen.push(e.seq))).status).toBe('completed');
  expect(aliasSeen).toEqual(seen);
});

it('client.decisions reviews a stage directly: approveWithEdits, reject and review as their aliases', async () => {
  const c = h.client;
  const spec = pipeline(`${PIPELINE}-review`).stage('draft', 'scripted').reviewPolicy('draft', 'always');
  const [edited, rejected] = [h.id('edited'), h.id('rejected')];
  for (const id of [edited, rejected]) await c.items.start(spec, null, { id });
  for (const id of [edited, rejected])
    await eventually(
      async () => ((await c.items.state(id)).status === 'waiting_review' ? true : undefined),
      30_000,
      `${id} waiting for its review`,
    );
  await c.decisions.approveWithEdits(edited, 'draft', { edited: true }, { reviewer: 'erin' });
  const result = await c.items.result(edited);
  expect(await c.items.readArtefact(result.artefacts.draft)).toEqual({ edited: true });
  await c.decisions.reject(rejected, 'draft', 'not this', { reviewer: 'rob' });
  expect(await c.items.result(rejected)).toMatchObject({ status: 'failed' });
  // Both items have finished: the part and its alias refuse a review alike.
  const refusal = await c.decisions.review(rejected, 'draft', { kind: 'approve' }).catch((e: Error) => e.message);
  expect(refusal).toContain(`work item ${rejected} has finished`);
  expect(await c.review(rejected, 'draft', { kind: 'approve' }).catch((e: Error) => e.message)).toBe(refusal);
  expect(await c.approve(edited, 'draft').catch((e: Error) => e.message)).toBe(
    await c.decisions.approve(edited, 'draft').catch((e: Error) => e.message),
  );
});

it('client.approvals lists, reads and decides an approval request as its aliases do', async () => {
  const c = h.client;
  const spec = pipeline(`${PIPELINE}-approval`)
    .stage('draft', 'scripted')
    .stage('approve', 'approval', { dependsOn: ['draft'], with: { action: 'note', items: 'notes' } });
  const id = h.id('approval');
  const input: Json = { script: { draft: [{ output: { notes: [{ title: 'ship it' }] } }] } };
  await c.items.start(spec, input, { id });
  const listed = await eventually(
    async () => (await c.approvals.list({ pipeline: `${PIPELINE}-approval` })).find((a) => a.itemId === id),
    30_000,
    'the approval in the listing',
  );
  expect((await c.listApprovals({ pipeline: `${PIPELINE}-approval` })).find((a) => a.itemId === id)).toEqual(listed);
  const request = await c.approvals.get(listed.id);
  expect(request).toMatchObject({ id: listed.id, status: 'pending', payload: { title: 'ship it' } });
  expect(await c.getApproval(listed.id)).toEqual(request);
  const key = decisionKey(id, 'approval', listed.id);
  expect(await c.decisions.detail(key)).toEqual(await c.decisionDetail(key));
  expect(await c.approvals.decide(listed.id, 'approve', { by: 'carol' })).toMatchObject({
    status: 'approved',
    decidedBy: 'carol',
  });
  const again = await c.approvals.decide(listed.id, 'reject', { by: 'dave' }).catch((e: Error) => e.message);
  // The item finishes after the approval, so the two refusals may word its state differently; both say who decided.
  const refused = /^decision refused: approval request \S+ is already approved \(?by carol at /;
  expect(again).toMatch(refused);
  expect(await c.decideApproval(listed.id, 'reject', { by: 'dave' }).catch((e: Error) => e.message)).toMatch(refused);
  expect(await c.decide(key, { action: 'reject', reason: 'no' }, 'dave')).toMatchObject({
    status: 'already_decided',
    by: 'carol',
  });
});

it('client.loopStages lists, reads, signals and resumes a failed loop as its aliases do', async () => {
  const c = h.client;
  const id = h.id('loop');
  const replies = { agent_replies: { work: [loopReply(1), { crash: 'exited with code 1' }, loopReply(2)] } };
  await c.items.start(fixedLoopSpec(`${PIPELINE}-loop`, 2), replies, { id });
  const failed = await failedLoop(() => c.loopStages.list(id));
  expect(await c.loops(id)).toEqual(await c.loopStages.list(id));
  expect(await c.loopStages.list(failed.workflowId)).toEqual(await c.loops(failed.workflowId));
  expect(await c.loopStages.state(failed.workflowId)).toEqual(await c.getLoopState(failed.workflowId));
  await expect(c.loopStages.reportQueue(failed.workflowId, 3)).resolves.toBeUndefined();
  await expect(c.reportLoopQueue(failed.workflowId, 3)).resolves.toBeUndefined();
  const key = decisionKey(failed.workflowId, 'loop', 'work');
  expect(await c.decisions.detail(key)).toEqual(await c.decisionDetail(key));
  expect(await c.loopStages.resume(id, { by: 'alice' })).toMatchObject({
    workflowId: failed.workflowId,
    stage: 'work',
    resumed: true,
  });
  // Resumed, the loop waits for nothing: the part and its alias refuse a second resume alike.
  const again = await c.loopStages.resume(failed.workflowId).catch((e: Error) => e.message);
  expect(again).toContain('nothing to resume');
  expect(await c.resumeLoop(failed.workflowId).catch((e: Error) => e.message)).toBe(again);
}, 90_000);

it('client.trees starts a TDD tree and reads a stuck node as its aliases do', async () => {
  const c = h.client;
  const l = leaf('pt');
  const repo = await repos.create('parts');
  const id = h.id('tdd');
  const replies: Record<string, Json[]> = {
    'pt.scaffold': [l.initWork],
    'pt.tddWriteTests': [l.testsReady],
    'pt.impl': [l.stuck],
  };
  const started = await c.trees.start(l.spec, { repo, id, replies });
  expect(await c.startTdd(l.spec, { repo, id, replies })).toEqual(started);
  const listed = await listedDecision(
    () => c.decisions.list({ kinds: ['tdd'] }),
    (d) => d.workflowId === id,
    'the stuck node in the listing',
    60_000,
  );
  const state = await c.trees.state(id);
  expect(state.pendingReviews.map((r) => r.stage)).toContain(listed.stage);
  expect(await c.getTddState(id)).toEqual(state);
  const detail = await c.decisions.detail(listed.key);
  expect(detail.tdd!.question).toContain('pt cannot tell what 1 means');
  expect(await c.decisionDetail(listed.key)).toEqual(detail);
  await expect(c.decisions.decide(listed.key, { action: 'edit', artefact: { not: 'text' } })).rejects.toThrow(
    "a TDD step's edit is the answer's text",
  );
  const unknown = await c.trees.result(`${id}-none`).catch((e: Error) => e.message);
  expect(unknown).toContain('unknown work item');
  expect(await c.tddResult(`${id}-none`).catch((e: Error) => e.message)).toBe(unknown);
}, 90_000);

it('client.workers says which workers poll, as its aliases do', async () => {
  const c = h.client;
  const polling = await c.workers.polling();
  expect(polling.length).toBeGreaterThan(0);
  expect((await c.workersPolling()).sort()).toEqual([...polling].sort());
  expect(await c.workers.nonePolls()).toBe(false);
  expect(await c.noWorkerPolls()).toBe(false);
  expect(await c.workers.polling(`${h.taskQueue}-nobody`)).toEqual([]);
});
