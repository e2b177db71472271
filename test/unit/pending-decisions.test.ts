/**
 * The mapping from an execution's memo and search attributes to pending decisions (src/client/decisions.ts):
 * every kind, memos older workflows wrote, keys that round-trip, and the visibility queries it sends.
 */
import {
  decisionChangesQuery,
  decisionsOf,
  loopIdentity,
  pendingDecisionsQuery,
  tddHumanReason,
  type DecisionSource,
} from '../../src/client/decisions';
import { answerProblem } from '../../src/client/decide';
import { decisionRows } from '../../src/cli/decisions';
import { ANSWERS, matchesFilter, parseDecisionKey, waitingFor } from '../../src/model/decisions';
import type { ApprovalsMemo } from '../../src/kinds/approval/shapes';
import type { PendingReview } from '../../src/model/state';

const startTime = new Date('2026-11-28T00:00:00.000Z');
const review = (over: Partial<PendingReview> = {}): PendingReview => ({
  stage: 'draft',
  reason: 'escalated',
  message: 'gate failed 3 times',
  requestedAt: '2026-11-28T01:00:00.000Z',
  attempt: 3,
  ...over,
});
const item = (over: Partial<DecisionSource> = {}): DecisionSource => ({
  workflowId: 'item-1',
  workflowType: 'workItem',
  startTime,
  pipeline: 'blog',
  status: 'waiting_review',
  pendingStages: ['draft'],
  reviews: { pipeline: 'blog', reviews: [review()], omitted: 0 },
  ...over,
});
const request = (over: Partial<ApprovalsMemo['requests'][number]> = {}): ApprovalsMemo['requests'][number] => ({
  id: 'ap-0123456789',
  itemId: 'item-1',
  runId: 'run',
  step: 'publish',
  actionType: 'http.post',
  summary: 'POST /posts',
  context: null,
  status: 'pending',
  createdAt: '2026-11-28T00:30:00.000Z',
  idempotencyKey: 'k',
  ...over,
});

describe('decisionsOf', () => {
  it('maps a memo review to a review decision with its answers and key', () => {
    const [decision, ...rest] = decisionsOf(
      item({
        reviews: {
          pipeline: 'blog',
          reviews: [review({ attempts: 3, reviewers: 'editors', expiresAt: 'x' })],
          omitted: 0,
        },
      }),
    );
    expect(rest).toEqual([]);
    expect(decision).toEqual({
      key: 'item-1~review~draft',
      kind: 'review',
      workflowId: 'item-1',
      itemId: 'item-1',
      pipeline: 'blog',
      stage: 'draft',
      reason: 'escalated',
      message: 'gate failed 3 times',
      requestedAt: '2026-11-28T01:00:00.000Z',
      expiresAt: 'x',
      attempt: 3,
      attempts: 3,
      reviewers: 'editors',
      answers: ANSWERS.review,
    });
  });

  it('maps a budget_exhausted review to a budget decision', () => {
    const [decision] = decisionsOf(
      item({ reviews: { pipeline: 'blog', reviews: [review({ reason: 'budget_exhausted' })], omitted: 0 } }),
    );
    expect(decision).toMatchObject({ kind: 'budget', reason: 'budget_exhausted', answers: ANSWERS.budget });
  });

  it('lists a stage the attribute names but the memo lacks as partial (an old or cut memo)', () => {
    const decisions = decisionsOf(item({ pendingStages: ['draft', 'edit'] }));
    expect(decisions.map((d) => [d.stage, d.partial])).toEqual([
      ['draft', undefined],
      ['edit', true],
    ]);
    expect(decisions[1]).toMatchObject({ kind: 'review', reason: 'unknown', requestedAt: startTime.toISOString() });
    expect(decisionsOf(item({ reviews: null }))).toEqual([expect.objectContaining({ stage: 'draft', partial: true })]);
  });

  it('maps a TDD node: reason from the human field, else the engine-6 message prefix', () => {
    const node = (r: PendingReview): DecisionSource =>
      item({
        workflowId: 'node-1',
        workflowType: 'tddNode',
        pipeline: 'tdd',
        pendingStages: ['impl'],
        reviews: { pipeline: 'tdd', reviews: [r], omitted: 0 },
      });
    expect(decisionsOf(node(review({ stage: 'impl', human: 'clarification', itemId: 'item-9' })))[0]).toMatchObject({
      kind: 'tdd',
      reason: 'clarification',
      itemId: 'item-9',
      key: 'node-1~tdd~impl',
      answers: ANSWERS.tdd,
    });
    expect(decisionsOf(node(review({ stage: 'impl', message: 'review_rejected: tests are weak' })))[0]).toMatchObject({
      kind: 'tdd',
      reason: 'review_rejected',
      itemId: 'node-1',
    });
    // Known by its workflow type alone too (a node started by a tree keeps pipeline 'tdd'; this guards the type).
    expect(decisionsOf(item({ workflowType: 'tddNode', pipeline: undefined }))[0]!.kind).toBe('tdd');
    expect(tddHumanReason({ message: 'stuck: no progress' })).toBe('stuck');
    expect(tddHumanReason({ message: 'clarification: which API?' })).toBe('clarification');
  });

  it('maps pending approval requests, not decided ones', () => {
    const decisions = decisionsOf(
      item({
        pendingStages: [],
        reviews: null,
        approvals: {
          pipeline: 'blog',
          omitted: 0,
          requests: [
            request({ expiresAt: 'e', reviewers: 'ops', escalated: true, context: 'why' }),
            request({ id: 'ap-decided', status: 'approved' }),
          ],
        },
      }),
    );
    expect(decisions).toEqual([
      {
        key: 'item-1~approval~ap-0123456789',
        kind: 'approval',
        workflowId: 'item-1',
        itemId: 'item-1',
        pipeline: 'blog',
        stage: 'publish',
        reason: 'approval',
        message: 'POST /posts',
        requestedAt: '2026-11-28T00:30:00.000Z',
        expiresAt: 'e',
        reviewers: 'ops',
        approval: {
          id: 'ap-0123456789',
          actionType: 'http.post',
          summary: 'POST /posts',
          context: 'why',
          escalated: true,
        },
        answers: ANSWERS.approval,
      },
    ]);
  });

  it('maps an engine-7 loop_failed memo entry and an engine-6 failed loop (partial)', () => {
    const loop = { workflowId: 'item-1.research.1', workflowType: 'loopStage', pipeline: 'loop', status: 'failed' };
    const engine7 = decisionsOf(
      item({
        ...loop,
        pendingStages: ['research'],
        reviews: {
          pipeline: 'blog',
          reviews: [review({ stage: 'research', reason: 'loop_failed', attempt: 4 })],
          omitted: 0,
        },
      }),
    );
    expect(engine7).toEqual([
      expect.objectContaining({
        kind: 'loop',
        reason: 'loop_failed',
        itemId: 'item-1',
        stage: 'research',
        attempt: 4,
        answers: ANSWERS.loop,
      }),
    ]);
    expect(engine7[0]!.partial).toBeUndefined();
    const engine6 = decisionsOf(item({ ...loop, pendingStages: [], reviews: null }));
    expect(engine6).toEqual([
      expect.objectContaining({
        key: 'item-1.research.1~loop~research',
        kind: 'loop',
        itemId: 'item-1',
        stage: 'research',
        attempt: 1,
        pipeline: 'loop',
        reason: 'loop_failed',
        partial: true,
      }),
    ]);
    // A running loop is no decision.
    expect(decisionsOf(item({ ...loop, status: 'running', pendingStages: [], reviews: null }))).toEqual([]);
  });

  it('keys round-trip ids with ~, spaces, slashes and unicode', () => {
    const workflowId = 'ünï~cødé/item 1.✓';
    const [decision] = decisionsOf(
      item({ workflowId, reviews: { pipeline: 'p', reviews: [review({ stage: 'st~age' })], omitted: 0 } }),
    );
    expect(decision!.key).toMatch(/^[A-Za-z0-9%._!*'()-]+~review~[A-Za-z0-9%._!*'()-]+$/);
    expect(parseDecisionKey(decision!.key)).toEqual({ workflowId, kind: 'review', subject: 'st~age' });
  });

  it('decisions pass the shared filters', () => {
    const [decision] = decisionsOf(item());
    expect(matchesFilter(decision!, { kinds: ['review'], pipeline: 'blog', text: 'GATE' }, Date.now())).toBe(true);
    expect(matchesFilter(decision!, { kinds: ['budget'] }, Date.now())).toBe(false);
  });
});

describe('loopIdentity', () => {
  it('reads <item>.<stage>.<attempt>, else keeps the id', () => {
    expect(loopIdentity('a.b.c.research.2')).toEqual({ itemId: 'a.b.c', stage: 'research', attempt: 2 });
    expect(loopIdentity('standalone')).toEqual({ itemId: 'standalone', stage: 'loop' });
  });
});

describe('queries', () => {
  it('all kinds: pending stages, approvals or an engine-6 failed loop, running only', () => {
    expect(pendingDecisionsQuery()).toBe(
      "ExecutionStatus = 'Running' AND (TreadlePendingReviews IS NOT NULL OR TreadleApprovals IS NOT NULL OR (TreadlePipeline = 'loop' AND TreadleStatus = 'failed'))",
    );
  });

  it('narrows to the kinds asked and the pipeline, quoting it', () => {
    expect(pendingDecisionsQuery({ kinds: ['approval'], pipeline: "o'k" })).toBe(
      "ExecutionStatus = 'Running' AND TreadleApprovals IS NOT NULL AND TreadlePipeline = 'o''k'",
    );
    expect(pendingDecisionsQuery({ kinds: ['review', 'budget'] })).toBe(
      "ExecutionStatus = 'Running' AND TreadlePendingReviews IS NOT NULL",
    );
    expect(pendingDecisionsQuery({ kinds: ['loop'] })).toBe(
      "ExecutionStatus = 'Running' AND (TreadlePendingReviews IS NOT NULL OR (TreadlePipeline = 'loop' AND TreadleStatus = 'failed'))",
    );
    // TDD nodes and loops publish TreadlePipeline 'tdd' / 'loop': a pipeline filter keeps them (their memo says).
    expect(pendingDecisionsQuery({ kinds: ['loop', 'review'], pipeline: 'docs' })).toBe(
      "ExecutionStatus = 'Running' AND (TreadlePendingReviews IS NOT NULL OR (TreadlePipeline = 'loop' AND TreadleStatus = 'failed')) AND TreadlePipeline IN ('docs', 'loop')",
    );
  });

  it('the delta query: decisions changed since, or closed since', () => {
    expect(decisionChangesQuery(new Date('2026-11-28T02:00:00.000Z'))).toBe(
      "TreadleDecisionAt >= '2026-11-28T02:00:00.000Z' OR (ExecutionStatus != 'Running' AND CloseTime >= '2026-11-28T02:00:00.000Z' AND TreadlePipeline IS NOT NULL)",
    );
  });
});

describe('answerProblem', () => {
  it('accepts complete answers the kind takes', () => {
    expect(answerProblem('review', { action: 'approve' })).toBeUndefined();
    expect(answerProblem('review', { action: 'approve_attempt', attempt: 2 })).toBeUndefined();
    expect(answerProblem('budget', { action: 'edit', artefact: { a: 1 } })).toBeUndefined();
    expect(answerProblem('tdd', { action: 'edit', artefact: 'use the v2 API' })).toBeUndefined();
    expect(answerProblem('loop', { action: 'abandon', reason: 'obsolete' })).toBeUndefined();
  });

  it('names what is wrong: an action the kind does not take, or a missing field', () => {
    expect(answerProblem('approval', { action: 'edit', artefact: 1 })).toBe(
      'approval decisions take approve, reject, not edit',
    );
    expect(answerProblem('review', { action: 'reject' })).toBe('reject needs a reason');
    expect(answerProblem('loop', { action: 'abandon', reason: ' ' })).toBe('abandon needs a reason');
    expect(answerProblem('review', { action: 'approve_attempt' })).toMatch(/needs the attempt/);
    expect(answerProblem('review', { action: 'edit' })).toBe('edit needs the edited artefact');
    expect(answerProblem('tdd', { action: 'edit', artefact: { a: 1 } })).toMatch(/answer's text/);
    expect(answerProblem('tdd', { action: 'guidance' })).toBe('guidance needs the note');
  });

  it('request_changes: review and budget take it with a note of at most 4096 characters; approval and TDD do not', () => {
    expect(answerProblem('review', { action: 'request_changes', note: 'cite sources' })).toBeUndefined();
    expect(answerProblem('budget', { action: 'request_changes', note: 'cheaper' })).toBeUndefined();
    expect(answerProblem('review', { action: 'request_changes', note: ' ' })).toBe(
      'request_changes needs a note saying what to change',
    );
    expect(answerProblem('review', { action: 'request_changes', note: 'x'.repeat(4097) })).toBe(
      'the note is 4097 characters, over the 4096 a request for changes may have; shorten it',
    );
    expect(answerProblem('approval', { action: 'request_changes', note: 'n' })).toMatch(/not request_changes/);
    expect(answerProblem('tdd', { action: 'request_changes', note: 'n' })).toMatch(/not request_changes/);
  });
});

describe('treadle decisions table', () => {
  it('shows KIND (starred when partial), ITEM, STAGE, REASON, WAITING, MESSAGE', () => {
    const now = Date.parse('2026-11-28T03:00:00.000Z');
    const [full] = decisionsOf(item());
    const [partial] = decisionsOf(item({ reviews: null }));
    expect(decisionRows([full!, partial!], now)).toEqual([
      ['review', 'item-1', 'draft', 'escalated', '2h', 'gate failed 3 times'],
      ['review*', 'item-1', 'draft', 'unknown', '3h', 'details not in the listing; open it to see them'],
    ]);
    expect(waitingFor('2026-11-28T02:59:30.000Z', now)).toBe('30s');
    expect(waitingFor('2026-11-25T03:00:00.000Z', now)).toBe('3d');
  });
});
