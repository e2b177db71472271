/**
 * Engine 7 publishes every pending decision to visibility: one listing finds a stage review (with its
 * reviewer group and attempts), an approval request, a TDD node's Stuck step (its reason) and a failed loop
 * (listed like a review, with its item), each with `TreadleDecisionAt`; deciding each moves the attribute
 * and clears what is pending. Who resumed or abandoned a loop is kept in its state and its audit.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { auditHistory } from '../../src/client/audit';
import { TreadleDecisionAt, TreadlePendingReviews } from '../../src/model/search-attributes';
import type { PendingReview, ReviewsMemo } from '../../src/model/state';
import {
  APPROVAL_INPUT,
  APPROVAL_SPEC,
  FAILING_LOOP_INPUT,
  FAILING_LOOP_SPEC,
  REVIEWED_SPEC,
  loopFailed,
  startStuckTree,
} from '../support/decision-recording';
import { eventually, startHarness, type Harness } from '../support/harness';

let h: Harness;
const savedWorkspace = process.env.TREADLE_LOOP_WORKSPACE;
beforeAll(async () => {
  process.env.TREADLE_LOOP_WORKSPACE = mkdtempSync(path.join(os.tmpdir(), 'decision-publication-'));
  h = await startHarness();
});
afterAll(async () => {
  await h?.shutdown();
  if (savedWorkspace === undefined) delete process.env.TREADLE_LOOP_WORKSPACE;
  else process.env.TREADLE_LOOP_WORKSPACE = savedWorkspace;
});

interface Listed {
  reviews?: PendingReview[];
  approvalIds?: string[];
  pending?: string[];
  decisionAt?: string;
}

const decode = (payload: { data?: Uint8Array | null } | undefined): unknown =>
  payload?.data ? JSON.parse(Buffer.from(payload.data).toString('utf8')) : undefined;

/** One visibility listing of every running execution with a decision time, by workflow id. */
async function listing(): Promise<Map<string, Listed>> {
  const out = new Map<string, Listed>();
  let nextPageToken: Uint8Array | undefined;
  do {
    const page = await h.temporal.workflowService.listWorkflowExecutions({
      namespace: h.temporal.options.namespace,
      query: "ExecutionStatus = 'Running' AND TreadleDecisionAt IS NOT NULL",
      pageSize: 1_000,
      ...(nextPageToken ? { nextPageToken } : {}),
    });
    for (const e of page.executions) {
      const fields = e.searchAttributes?.indexedFields ?? {};
      const memo = decode(e.memo?.fields?.treadleReviews ?? undefined) as ReviewsMemo | null | undefined;
      out.set(e.execution!.workflowId!, {
        ...(memo ? { reviews: memo.reviews } : {}),
        approvalIds: decode(fields.TreadleApprovals ?? undefined) as string[] | undefined,
        pending: decode(fields.TreadlePendingReviews ?? undefined) as string[] | undefined,
        decisionAt: decode(fields.TreadleDecisionAt ?? undefined) as string | undefined,
      });
    }
    nextPageToken = page.nextPageToken?.length ? page.nextPageToken : undefined;
  } while (nextPageToken);
  return out;
}

/** The workflow's own search attributes (describe reads its mutable state: no visibility lag). */
async function attributes(id: string): Promise<{ decisionAt?: Date; pending?: string[] }> {
  const typed = (await h.temporal.workflow.getHandle(id).describe()).typedSearchAttributes;
  const decisionAt = typed.get(TreadleDecisionAt);
  const pending = typed.get(TreadlePendingReviews);
  return { ...(decisionAt ? { decisionAt } : {}), ...(pending ? { pending } : {}) };
}

test('one listing finds a review, an approval, a stuck TDD node and a failed loop; deciding each moves TreadleDecisionAt and clears it', async () => {
  const review = h.id('dp-review');
  const approval = h.id('dp-approval');
  const tdd = h.id('dp-tdd');
  const loop = h.id('dp-loop');
  const loopId = `${loop}.work.1`;
  await h.client.start(REVIEWED_SPEC, {}, { id: review });
  await h.client.start(APPROVAL_SPEC, APPROVAL_INPUT, { id: approval });
  await startStuckTree(h, tdd);
  await h.client.start(FAILING_LOOP_SPEC, FAILING_LOOP_INPUT, { id: loop });

  const listed = await eventually(
    async () => {
      const all = await listing();
      const found = [review, approval, tdd, loopId].map((id) => all.get(id));
      return found.every((f) => f !== undefined) ? (found as Listed[]) : undefined;
    },
    120_000,
    'the four decisions in one listing',
  );
  const [r, a, t, l] = listed as [Listed, Listed, Listed, Listed];
  expect(r.reviews).toEqual([
    expect.objectContaining({ stage: 'draft', reason: 'always', reviewers: 'editors', attempt: 1, attempts: 1 }),
  ]);
  expect(r.pending).toEqual(['draft']);
  expect(a.approvalIds).toHaveLength(1);
  expect(t.reviews).toEqual([expect.objectContaining({ stage: 'impl', reason: 'escalated', human: 'stuck' })]);
  // A tree started by `treadle tdd` alone belongs to no work item.
  expect(t.reviews?.[0]).not.toHaveProperty('itemId');
  expect(l.reviews).toEqual([
    expect.objectContaining({
      stage: 'work',
      reason: 'loop_failed',
      attempt: 1,
      itemId: loop,
      message: expect.stringMatching(/^iteration 1: agent_crash: /) as string,
    }),
  ]);
  expect(l.pending).toEqual(['work']);
  for (const entry of listed) expect(Date.parse(entry.decisionAt!)).toBeGreaterThan(Date.now() - 300_000);

  // Each decision moves the attribute (workflow time, later than the request) and clears what was pending.
  const before = await Promise.all([review, approval, tdd, loopId].map(attributes));
  await h.client.approve(review, 'draft', { reviewer: 'alice' });
  await h.client.decideApproval(a.approvalIds![0]!, 'approve', { by: 'alice' });
  await h.client.review(tdd, 'impl', { kind: 'approve', note: 'return the constant 1' }, 'alice');
  await h.client.resumeLoop(loop, { by: 'alice' });
  expect((await h.client.result(review)).status).toBe('completed');
  expect((await h.client.result(approval)).status).toBe('completed');
  expect((await h.client.tddResult(tdd)).status).toBe('merged');
  for (const [i, id] of [review, approval, tdd].entries()) {
    const after = await attributes(id);
    expect(after.pending).toBeUndefined();
    expect(after.decisionAt!.getTime()).toBeGreaterThan(before[i]!.decisionAt!.getTime());
  }
  const answered = (await h.client.getTddState(tdd)).events.find((e) => e.type === 'ReviewResolved');
  expect(answered?.details).toEqual({ reviewer: 'alice' });

  // The resumed loop fails again: listed again, later; abandoned, it lists nothing.
  await loopFailed(h, loop, true);
  const again = await attributes(loopId);
  expect(again.pending).toEqual(['work']);
  expect(again.decisionAt!.getTime()).toBeGreaterThan(before[3]!.decisionAt!.getTime());
  expect((await h.client.getLoopState(loopId)).lastResume).toMatchObject({
    action: 'resume',
    by: 'alice',
    iteration: 1,
  });
  await h.client.resumeLoop(loop, { action: 'abandon', by: 'bob', reason: 'it keeps crashing' });
  expect((await h.client.result(loop)).status).toBe('failed');
  const abandoned = await attributes(loopId);
  expect(abandoned.pending).toBeUndefined();
  expect(abandoned.decisionAt!.getTime()).toBeGreaterThanOrEqual(again.decisionAt!.getTime());
  const history = await h.temporal.workflow.getHandle(loopId).fetchHistory();
  const lines = auditHistory(loopId, history.events ?? []).map((e) => `${e.kind}|${e.message}`);
  expect(lines).toEqual(
    expect.arrayContaining([
      'review|loop resumed by alice (update)',
      'review|loop abandoned by bob: it keeps crashing (update)',
    ]),
  );
}, 240_000);
