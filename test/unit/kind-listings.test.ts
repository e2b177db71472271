/**
 * The client's table of kinds (src/client/kind-clients.ts): every decision kind is listed by exactly one
 * entry, an entry's clauses reach the query of its kinds, and what an entry builds is of its kinds, so the
 * listing (src/client/decisions.ts) can filter on kinds without naming one; the answers to a decision kind are
 * those of the entry that lists it.
 */
import { KIND_CLIENTS, kindAnswers } from '../../src/client/kind-clients';
import { answerProblem } from '../../src/client/decide';
import type { DecisionSource, KindListing } from '../../src/client/decision-listing';
import { decisionsOf, pendingDecisionsQuery } from '../../src/client/decisions';
import { DECISION_KINDS, type PendingDecision } from '../../src/model/decisions';
import type { PendingReview } from '../../src/model/state';

const startTime = new Date('2026-11-28T00:00:00.000Z');
const entry = (over: Partial<PendingReview> = {}): PendingReview => ({
  stage: 'draft',
  reason: 'escalated',
  message: 'gate failed',
  requestedAt: '2026-11-28T01:00:00.000Z',
  attempt: 1,
  ...over,
});
const source = (over: Partial<DecisionSource>): DecisionSource => ({
  workflowId: 'item-1',
  workflowType: 'workItem',
  startTime,
  pipeline: 'blog',
  status: 'waiting_review',
  pendingStages: [],
  ...over,
});
const reviews = (...list: PendingReview[]) => ({ pipeline: 'blog', reviews: list, omitted: 0 });

/** One execution of each shape the listing reads, each waiting on something. */
const SOURCES: DecisionSource[] = [
  source({ pendingStages: ['draft', 'edit'], reviews: reviews(entry(), entry({ reason: 'budget_exhausted' })) }),
  source({
    approvals: {
      pipeline: 'blog',
      omitted: 0,
      requests: [
        {
          id: 'ap-1',
          itemId: 'item-1',
          runId: 'run',
          step: 'publish',
          actionType: 'http.post',
          summary: 'POST',
          context: null,
          status: 'pending',
          createdAt: '2026-11-28T00:30:00.000Z',
          idempotencyKey: 'k',
        },
      ],
    },
  }),
  source({
    workflowId: 'node-1',
    workflowType: 'tddNode',
    pipeline: 'tdd',
    pendingStages: ['impl', 'scaffold'],
    reviews: reviews(entry({ stage: 'impl' })),
  }),
  source({
    workflowId: 'item-1.research.2',
    workflowType: 'loopStage',
    pipeline: 'loop',
    status: 'failed',
    reviews: reviews(entry({ stage: 'research', reason: 'loop_failed' })),
  }),
  source({ workflowId: 'item-1.research.3', workflowType: 'loopStage', pipeline: 'loop', status: 'failed' }),
  // A human stage names its stage in TreadlePendingReviews and its request in the treadleHuman memo.
  source({
    pendingStages: ['sign_off'],
    human: {
      pipeline: 'blog',
      requests: [
        {
          stage: 'sign_off',
          attempt: 2,
          status: 'pending',
          requestedAt: '2026-11-28T00:40:00.000Z',
          instructions: 'Sign the draft off',
          reviewers: 'legal',
          feedback: 'missing the date',
        },
      ],
    },
  }),
];

/** What one entry of the table builds from a source, whether or not another entry claims it first. */
function built({ listing }: { listing: KindListing }, from: DecisionSource): PendingDecision[] {
  const some = (decision: PendingDecision | undefined): PendingDecision[] => (decision ? [decision] : []);
  return [
    ...(from.reviews?.reviews ?? []).flatMap((review) => some(listing.fromReview?.(from, review))),
    ...from.pendingStages.flatMap((stage) => some(listing.fromPendingStage?.(from, stage))),
    ...(listing.others?.(from, []) ?? []),
  ];
}

describe("the client's table of kinds", () => {
  it('lists every decision kind in exactly one entry', () => {
    const listed = KIND_CLIENTS.flatMap((entry) => entry.kinds);
    expect([...listed].sort()).toEqual([...DECISION_KINDS].sort());
  });

  it('answers each decision kind with the answers of the entry that lists it', () => {
    for (const entry of KIND_CLIENTS) for (const kind of entry.kinds) expect(kindAnswers(kind)).toBe(entry.answers);
    // The answer checks reach a kind's own through the table: a TDD step's edit is text, a review's is not.
    const edit = { action: 'edit' as const, artefact: { title: 'x' } };
    expect(answerProblem('tdd', edit)).toBe("a TDD step's edit is the answer's text");
    expect(answerProblem('review', edit)).toBeUndefined();
  });

  it("sends each entry's clauses and own pipeline in the query of its kinds", () => {
    for (const { kinds, listing } of KIND_CLIENTS) {
      const query = pendingDecisionsQuery({ kinds, pipeline: 'blog' });
      for (const clause of listing.clauses) expect(query).toContain(clause);
      if (listing.ownPipeline) expect(query).toContain(`'${listing.ownPipeline}'`);
      else expect(query).toMatch(/TreadlePipeline = 'blog'$/);
    }
  });

  it('builds only decisions of its own kinds, and every listed decision is built by an entry', () => {
    const listedKinds = new Set<string>();
    for (const from of SOURCES) {
      const byEntries = KIND_CLIENTS.flatMap((entry) => {
        const decisions = built(entry, from);
        for (const decision of decisions) expect(entry.kinds).toContain(decision.kind);
        return decisions;
      });
      for (const decision of decisionsOf(from)) {
        expect(byEntries).toContainEqual(decision);
        listedKinds.add(decision.kind);
      }
    }
    // The samples cover every kind, so the checks above ran for each.
    expect([...listedKinds].sort()).toEqual([...DECISION_KINDS].sort());
  });

  it("knows a kind's own workflows from a work item", () => {
    const owners = (from: DecisionSource) =>
      KIND_CLIENTS.filter((entry) => entry.listing.owns?.(from)).flatMap((entry) => entry.kinds);
    expect(owners(SOURCES[0]!)).toEqual([]);
    expect(owners(SOURCES[2]!)).toEqual(['tdd']);
    expect(owners(source({ workflowType: 'tddNode', pipeline: undefined }))).toEqual(['tdd']);
    expect(owners(SOURCES[4]!)).toEqual(['loop']);
  });
});
