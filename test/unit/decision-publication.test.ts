/**
 * What engine 7 publishes for the review inbox, tested on the pure parts: when `TreadleDecisionAt` moves
 * (the pending set of reviews and approvals), the memo entries' `attempts` and `reviewers`, the `reviewers:`
 * stage key, which engines publish, and the engine a worker starts items on when the server lacks the attribute.
 */
import YAML from 'yaml';
import { pipeline } from '../../src/kinds/builder';
import { validatePipeline } from '../../src/kinds/pipeline';
import {
  DECISIONS_ENGINE,
  ENGINE_VERSION,
  FAILED_WORKFLOW_ENGINE,
  LINEAGE_ENGINE,
  REVIEWER_ATTENTION_ENGINE,
  type PendingReview,
} from '../../src/model/state';
import { engineForAttributes } from '../../src/server/search-attributes';
import { engineRules } from '../../src/workflows/legacy';
import { failedLoopReview } from '../../src/kinds/loop/failure';
import { NO_PENDING_DECISIONS, Publications, pendingDecisionSet, reviewsMemo } from '../../src/workflow-kit/publishing';

const review = (stage: string, requestedAt: string, extra: Partial<PendingReview> = {}): PendingReview => ({
  stage,
  reason: 'escalated',
  message: 'gate rejected 3 times',
  requestedAt,
  attempt: 3,
  ...extra,
});

describe('the pending decision set TreadleDecisionAt follows', () => {
  it('changes when a review or approval appears or goes, and when a stage is asked again', () => {
    const first = pendingDecisionSet([review('draft', '2026-11-28T01:00:00.000Z')], ['apr-1']);
    expect(pendingDecisionSet([], [])).toBe(NO_PENDING_DECISIONS);
    expect(first).not.toBe(NO_PENDING_DECISIONS);
    expect(pendingDecisionSet([review('draft', '2026-11-28T01:00:00.000Z')], [])).not.toBe(first);
    expect(pendingDecisionSet([review('draft', '2026-11-28T02:00:00.000Z')], ['apr-1'])).not.toBe(first);
    // What a review says is not part of the set: a message cut shorter is the same decision.
    expect(pendingDecisionSet([review('draft', '2026-11-28T01:00:00.000Z', { message: 'other' })], ['apr-1'])).toBe(
      first,
    );
  });

  it('counts as changed only against the last published set, an empty one before the first', () => {
    const published = new Publications();
    expect(published.decisionsChanged('decisions', NO_PENDING_DECISIONS)).toBe(false);
    const one = pendingDecisionSet([review('draft', '2026-11-28T01:00:00.000Z')]);
    expect(published.decisionsChanged('decisions', one)).toBe(true);
    expect(published.decisionsChanged('decisions', one)).toBe(false);
    expect(published.decisionsChanged('decisions', NO_PENDING_DECISIONS)).toBe(true);
  });
});

it("keeps the entries' attempts and reviewer group in the reviews memo, the message cut short", () => {
  const memo = reviewsMemo('p', [
    review('draft', '2026-11-28T01:00:00.000Z', { attempts: 3, reviewers: 'editors', message: 'x'.repeat(500) }),
  ]);
  expect(memo?.reviews[0]).toMatchObject({ stage: 'draft', attempts: 3, reviewers: 'editors', attempt: 3 });
  expect(memo?.reviews[0]?.message.length).toBeLessThanOrEqual(200);
});

describe('the reviewers: stage key', () => {
  it('names a reviewer group, kept in the canonical spec from YAML and from the builder', () => {
    const yaml = YAML.parse('name: p\nstages:\n  - name: draft\n    run: scripted\n    reviewers: editors\n');
    const result = validatePipeline(yaml, { stages: ['scripted'], gates: [] });
    expect(result.ok && result.spec.stages[0]?.reviewers).toBe('editors');
    const built = pipeline('p').stage('draft', 'scripted').reviewers('draft', 'editors').build();
    expect(built.stages[0]?.reviewers).toBe('editors');
    const plain = validatePipeline({ name: 'p', stages: [{ name: 'a', run: 'scripted' }] });
    expect(plain.ok && 'reviewers' in plain.spec.stages[0]!).toBe(false);
  });

  it('refuses an empty group and a stage the builder does not know', () => {
    const result = validatePipeline({ name: 'p', stages: [{ name: 'a', run: 'scripted', reviewers: ' ' }] });
    expect(result.ok).toBe(false);
    expect(!result.ok && result.problems.join('\n')).toContain('must name a reviewer group');
    expect(() => pipeline('p').stage('a', 'scripted').reviewers('b', 'editors').build()).toThrow(
      'reviewers("b", …): no stage named "b"',
    );
  });
});

it('publishes decisions from engine 7 on; items of older engines keep their upserts', () => {
  for (let version = DECISIONS_ENGINE; version <= ENGINE_VERSION; version++)
    expect(engineRules(version).publishesDecisions).toBe(true);
  for (let version = 1; version < DECISIONS_ENGINE; version++)
    expect(engineRules(version).publishesDecisions).toBe(false);
});

it('runs reviewer-attention commands from engine 8 on only', () => {
  for (let version = REVIEWER_ATTENTION_ENGINE; version <= ENGINE_VERSION; version++)
    expect(engineRules(version).reviewerAttention).toBe(true);
  for (let version = 1; version < REVIEWER_ATTENTION_ENGINE; version++)
    expect(engineRules(version).reviewerAttention).toBe(false);
});

it('runs lineage commands (carried stages, a correlation id it made) from engine 9 on only', () => {
  expect(ENGINE_VERSION).toBe(LINEAGE_ENGINE);
  expect(engineRules(LINEAGE_ENGINE).lineage).toBe(true);
  for (let version = 1; version < LINEAGE_ENGINE; version++) expect(engineRules(version).lineage).toBe(false);
});

it('starts items on engine 6 until the namespace is known to have TreadleDecisionAt', () => {
  expect(engineForAttributes(DECISIONS_ENGINE, undefined)).toBe(FAILED_WORKFLOW_ENGINE);
  expect(engineForAttributes(DECISIONS_ENGINE, false)).toBe(FAILED_WORKFLOW_ENGINE);
  expect(engineForAttributes(DECISIONS_ENGINE, true)).toBe(DECISIONS_ENGINE);
  // A worker pinned to an older engine stays where it was pinned.
  expect(engineForAttributes(3, false)).toBe(3);
});

it("lists a flagged loop's failure like a review: one entry, reason loop_failed, the iteration and the item", () => {
  const entry = failedLoopReview({ stage: 'polish', itemId: 'item-1' }, 4, { type: 'agent_error', message: 'boom' });
  expect(entry).toMatchObject({
    stage: 'polish',
    reason: 'loop_failed',
    message: 'iteration 4: agent_error: boom',
    attempt: 4,
    itemId: 'item-1',
  });
  expect(reviewsMemo('p', [entry])).toMatchObject({ pipeline: 'p', reviews: [entry], omitted: 0 });
});
