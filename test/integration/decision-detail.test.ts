/**
 * The review inbox's detail data, `TreadleClient.decisionDetail` (issue 27), on the real server: a review after
 * three rejected attempts (verdicts, feedback, outputs, one offloaded and read back from the blob store), an
 * approval's payload, a stuck TDD node's question, a failed loop's failure and iterations, `not_found` for a decision no longer pending, and
 * the listing's view within seconds when no worker answers.
 */
import { pipeline } from '../../src/kinds/builder';
import type { Json } from '../../src/model/shapes';
import { decisionKey } from '../../src/model/decisions';
import { TreadleClient } from '../../src/client';
import { draftPublish, fixedLoopSpec, loopReply } from '../support/pipelines';
import { eventually, startHarness } from '../support/harness';
import { decisionsHarness, failedLoop, listedDecision } from '../support/decisions-harness';
import { leaf } from '../support/tdd-fixtures';

const { h, repos } = decisionsHarness('detail', { tdd: true });

it('a review escalated after three rejected attempts: every attempt with its verdict, feedback and output; a missing one not_found', async () => {
  const id = h.id('review');
  const script = {
    draft: [
      { verdict: 'rejected', summary: 'too short', criteria: [{ name: 'length', expected: '>100', actual: '5' }] },
      { verdict: 'rejected', summary: 'too long', outputBytes: 5000 },
      { verdict: 'rejected', summary: 'still wrong', output: 'plain *markdown*' },
    ],
  };
  await h.client.start(draftPublish({ maxAttempts: 3, onExhausted: 'escalate' }), { script }, { id });
  const key = decisionKey(id, 'review', 'draft');
  const detail = await eventually(
    () => h.client.decisionDetail(key).catch(() => undefined),
    30_000,
    'the escalated review',
  );
  expect(detail).toMatchObject({
    live: true,
    decision: { key, kind: 'review', itemId: id, stage: 'draft', reason: 'escalated', attempts: 3 },
    stages: [
      { name: 'draft', status: 'waiting_review', attempts: 3 },
      { name: 'publish', status: 'pending', attempts: 0 },
    ],
  });
  const attempts = detail.attempts!;
  expect(attempts.map((a) => a.attempt)).toEqual([1, 2, 3]);
  expect(attempts.map((a) => (a.feedback as { summary: string }).summary)).toEqual([
    'too short',
    'too long',
    'still wrong',
  ]);
  expect(attempts[0]!.verdict).toMatchObject({ kind: 'rejected' });
  expect(attempts[0]!.feedback).toMatchObject({ failedCriteria: [{ name: 'length', passed: false }] });
  expect(attempts[0]!.output).toMatchObject({ mediaType: 'application/json', content: { stage: 'draft', attempt: 1 } });
  expect(attempts[0]!.output!.ref).toBeUndefined();
  // Above the 2 KB blob threshold: offloaded, read back whole from the store.
  const offloaded = attempts[1]!.output!;
  expect(offloaded.ref).toMatch(/^sha256:[0-9a-f]{64}$/);
  expect(offloaded.mediaType).toBe('application/json');
  expect(offloaded.content).toEqual({ stage: 'draft', attempt: 2, text: 'x'.repeat(5000) });
  expect(offloaded.bytes).toBe(JSON.stringify(offloaded.content).length);
  expect(offloaded.truncated).toBeUndefined();
  expect(attempts[2]!.output).toEqual({ mediaType: 'text/markdown', bytes: 16, content: 'plain *markdown*' });

  await h.client.decide(key, { action: 'approve' }, 'alice');
  await expect(h.client.decisionDetail(key)).rejects.toMatchObject({ code: 'not_found' });
  await expect(h.client.decisionDetail(decisionKey(h.id('nobody'), 'review', 'draft'))).rejects.toMatchObject({
    code: 'not_found',
  });
  await expect(h.client.decisionDetail('not a key')).rejects.toMatchObject({ code: 'invalid_review' });
}, 60_000);

it('an approval: its payload and the request without it', async () => {
  const spec = pipeline('detail-i27')
    .stage('draft', 'scripted')
    .stage('approve', 'approval', { dependsOn: ['draft'], with: { action: 'note', items: 'notes' } });
  const id = h.id('approval');
  const input: Json = { script: { draft: [{ output: { notes: [{ title: 'ship it' }] } }] } };
  await h.client.start(spec, input, { id });
  const listed = await listedDecision(
    () => h.client.listPendingDecisions({ pipeline: 'detail-i27', kinds: ['approval'] }),
    (d) => d.itemId === id,
    'the approval in the listing',
  );
  const detail = await h.client.decisionDetail(listed.key);
  expect(detail.live).toBe(true);
  expect(detail.decision).toMatchObject({ key: listed.key, kind: 'approval', stage: 'approve' });
  expect(detail.approval!.payload).toMatchObject({ mediaType: 'application/json', content: { title: 'ship it' } });
  expect(detail.approval!.request).toMatchObject({ id: listed.approval!.id, actionType: 'note', status: 'pending' });
  expect(detail.approval!.request).not.toHaveProperty('payload');
}, 60_000);

it('a failed loop: its failure and last iterations', async () => {
  const id = h.id('loop');
  const spec = fixedLoopSpec('detail-loop-i27', 4);
  await h.client.start(
    spec,
    { agent_replies: { work: [loopReply(1), loopReply(2), { crash: 'exited with code 1' }] } },
    { id },
  );
  const failed = await failedLoop(() => h.client.loops(id));
  const detail = await h.client.decisionDetail(decisionKey(failed.workflowId, 'loop', 'work'));
  expect(detail).toMatchObject({
    live: true,
    decision: { kind: 'loop', itemId: id, stage: 'work', reason: 'loop_failed', attempt: 3 },
    loop: {
      failure: { status: 'failed', iteration: 3, error: { type: 'agent_crash', message: 'exited with code 1' } },
    },
  });
  expect((detail.loop!.iterations as { iteration: number }[]).map((i) => i.iteration)).toEqual([1, 2]);
}, 60_000);

it('no worker answers: the decision as listed, live false, within seconds', async () => {
  const other = await startHarness();
  const id = other.id('no-worker');
  await other.client.start(draftPublish({ maxAttempts: 1 }, 'always'), null, { id });
  const key = decisionKey(id, 'review', 'draft');
  await listedDecision(
    () => other.client.listPendingDecisions(),
    (d) => d.key === key,
    'the review in the listing',
  );
  await other.shutdown();
  const client = new TreadleClient(h.temporal, { taskQueue: other.taskQueue });
  const started = Date.now();
  const detail = await client.decisionDetail(key);
  expect(Date.now() - started).toBeLessThan(15_000);
  expect(detail).toEqual({
    live: false,
    decision: expect.objectContaining({ key, kind: 'review', stage: 'draft', reason: 'always' }),
  });
}, 60_000);

it('a stuck TDD node: its question', async () => {
  const l = leaf('ds');
  const repo = await repos.create('detail');
  const id = h.id('tdd');
  const replies: Record<string, Json[]> = {
    'ds.scaffold': [l.initWork],
    'ds.tddWriteTests': [l.testsReady],
    'ds.impl': [l.stuck],
  };
  await h.client.startTdd(l.spec, { repo, id, replies });
  const listed = await listedDecision(
    () => h.client.listPendingDecisions({ kinds: ['tdd'] }),
    (d) => d.workflowId === id,
    'the stuck node in the listing',
    60_000,
  );
  const detail = await h.client.decisionDetail(listed.key);
  expect(detail).toMatchObject({ live: true, decision: { key: listed.key, kind: 'tdd', reason: 'stuck' } });
  expect(detail.tdd!.question).toContain('ds cannot tell what 1 means');
  expect(detail.stages).toBeUndefined();
}, 90_000);
