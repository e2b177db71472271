/**
 * One listing of every pending decision and one way to answer it (issue 27), on the real server: an item
 * waiting for a review is listed with its kind and key; `decide` answers it; answering it again returns
 * `already_decided` with who decided. Budget, approval, TDD and failed-loop decisions: see the report of i27-b
 * (not yet covered here; their mapping is unit-tested in test/unit/pending-decisions.test.ts).
 */
import { pipeline } from '../../src/model/builder';
import { decisionKey } from '../../src/model/decisions';
import { eventually, startHarness, type Harness } from '../support/harness';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.shutdown();
});

// Visibility is namespace-wide and other files run in parallel: this file's own pipeline name.
const PIPELINE = 'decisions-i27b';

it('lists a pending review, decides it, and a second answer is already_decided by the first reviewer', async () => {
  const spec = pipeline(PIPELINE).stage('draft', 'scripted').reviewPolicy('draft', 'always');
  const id = h.id();
  await h.client.start(spec, null, { id });
  const key = decisionKey(id, 'review', 'draft');
  const listed = await eventually(
    async () => (await h.client.listPendingDecisions({ pipeline: PIPELINE })).find((d) => d.key === key),
    30_000,
    'the review in the listing',
  );
  expect(listed).toMatchObject({ kind: 'review', itemId: id, stage: 'draft', pipeline: PIPELINE, reason: 'always' });
  expect(await h.client.listPendingDecisions({ pipeline: PIPELINE, kinds: ['approval'] })).toEqual([]);

  await expect(h.client.decide(key, { action: 'reject' }, 'bob')).rejects.toThrow('reject needs a reason');
  expect(await h.client.decide(key, { action: 'approve' }, 'alice')).toEqual({
    status: 'decided',
    by: 'alice',
    outcome: 'approve',
  });
  expect(await h.client.decide(key, { action: 'reject', reason: 'late' }, 'bob')).toMatchObject({
    status: 'already_decided',
    by: 'alice',
    outcome: 'approve',
  });
});
