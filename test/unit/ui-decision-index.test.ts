/**
 * The review inbox's decision index against a fake backend: the first full listing, deltas replacing a
 * workflow's decisions, changed decisions announced again, reconcile, immediate removal, subscribers and
 * versions, and filter/count/cursor paging over 10,000 decisions.
 */
import { ANSWERS, decisionKey, type DecisionKind, type PendingDecision } from '../../src/model/decisions';
import type { DecisionChange, InboxBackend } from '../../src/ui/backend';
import { DecisionIndex, InvalidCursorError, type IndexEvent } from '../../src/ui/decision-index';

const KINDS: DecisionKind[] = ['review', 'budget', 'approval', 'tdd', 'loop'];

function fake(i: number, over: Partial<PendingDecision> = {}): PendingDecision {
  const kind = KINDS[i % KINDS.length]!;
  const workflowId = over.workflowId ?? `item-${i}`;
  return {
    key: decisionKey(workflowId, kind, `stage-${i}`),
    kind,
    workflowId,
    itemId: workflowId,
    pipeline: i % 2 === 0 ? 'docs' : 'code',
    stage: `stage-${i}`,
    reason: 'escalated',
    message: `decision number ${i}`,
    requestedAt: new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString(),
    answers: ANSWERS[kind],
    ...(i % 3 === 0 ? { reviewers: 'legal' } : {}),
    ...over,
  };
}

class FakeBackend implements InboxBackend {
  all: PendingDecision[] = [];
  pending: DecisionChange[] = [];
  sinces: Date[] = [];
  list = async (): Promise<PendingDecision[]> => [...this.all];
  changes = async (since: Date): Promise<DecisionChange[]> => {
    this.sinces.push(since);
    const out = this.pending;
    this.pending = [];
    return out;
  };
  detail = async (): Promise<never> => Promise.reject(new Error('not used'));
  decide = async (): Promise<never> => Promise.reject(new Error('not used'));
  checkEdit = async (): Promise<never> => Promise.reject(new Error('not used'));
  cancel = async (): Promise<never> => Promise.reject(new Error('not used'));
  fork = async (): Promise<never> => Promise.reject(new Error('not used'));
}

function indexOver(backend: FakeBackend, now = () => Date.UTC(2026, 0, 2)): DecisionIndex {
  return new DecisionIndex(backend, { deltaMs: 0, reconcileMs: 0, now });
}

describe('DecisionIndex', () => {
  it('starts from one full listing and serves pages oldest first', async () => {
    const backend = new FakeBackend();
    backend.all = [fake(3), fake(1), fake(2)];
    const index = indexOver(backend);
    await index.start();
    expect(index.query({}).decisions.map((d) => d.stage)).toEqual(['stage-1', 'stage-2', 'stage-3']);
    await index.close();
  });

  it('a delta replaces each changed workflow’s decisions and tells subscribers', async () => {
    const backend = new FakeBackend();
    backend.all = [fake(1), fake(2)];
    let clock = Date.UTC(2026, 0, 2);
    const index = indexOver(backend, () => clock);
    await index.start();
    const events: IndexEvent[] = [];
    index.subscribe((e) => events.push(e));
    const v0 = index.version;
    clock += 1_000;
    backend.pending = [
      { workflowId: 'item-1', decisions: [] },
      { workflowId: 'item-9', decisions: [fake(9)] },
    ];
    await index.refresh();
    expect(backend.sinces[0]!.getTime()).toBe(Date.UTC(2026, 0, 2) - 10_000);
    expect(index.query({}).decisions.map((d) => d.workflowId)).toEqual(['item-2', 'item-9']);
    expect(events).toEqual([{ version: v0 + 1, added: [fake(9)], removed: [fake(1).key] }]);
    await index.refresh();
    expect(backend.sinces[1]!.getTime()).toBe(clock - 10_000);
    await index.close();
  });

  it('announces a decision whose content changed (pages replace its row), not an unchanged one', async () => {
    const backend = new FakeBackend();
    backend.all = [fake(1), fake(2)];
    const index = indexOver(backend);
    await index.start();
    const events: IndexEvent[] = [];
    index.subscribe((e) => events.push(e));
    const v0 = index.version;
    const retried = fake(1, { message: 'attempt 2 escalated', attempt: 2 });
    backend.pending = [
      { workflowId: 'item-1', decisions: [retried] },
      { workflowId: 'item-2', decisions: [fake(2)] },
    ];
    await index.refresh();
    expect(events).toEqual([{ version: v0 + 1, added: [retried], removed: [] }]);
    expect(index.get(fake(1).key)).toEqual(retried);
    backend.all = [fake(1), fake(2)];
    await index.reconcile();
    expect(events[1]).toEqual({ version: v0 + 2, added: [fake(1)], removed: [] });
    await index.reconcile();
    expect(events).toHaveLength(2);
    await index.close();
  });

  it('removes a decision this server decided at once', async () => {
    const backend = new FakeBackend();
    backend.all = [fake(1), fake(2)];
    const index = indexOver(backend);
    await index.start();
    index.remove(fake(1).key);
    expect(index.get(fake(1).key)).toBeUndefined();
    expect(index.query({}).counts.total).toBe(1);
  });

  it('a reconcile drops what the listing no longer has and adds what deltas missed', async () => {
    const backend = new FakeBackend();
    backend.all = [fake(1), fake(2)];
    const index = indexOver(backend);
    await index.start();
    backend.all = [fake(2), fake(5)];
    const events: IndexEvent[] = [];
    index.subscribe((e) => events.push(e));
    await index.reconcile();
    expect(index.query({}).decisions.map((d) => d.workflowId)).toEqual(['item-2', 'item-5']);
    expect(events[0]).toMatchObject({ added: [fake(5)], removed: [fake(1).key] });
  });

  it('filters, counts and pages 10,000 decisions with a cursor that covers each exactly once', async () => {
    const backend = new FakeBackend();
    backend.all = Array.from({ length: 10_000 }, (_, i) => fake(i));
    const index = indexOver(backend);
    await index.start();
    const all = index.query({});
    expect(all.counts.total).toBe(10_000);
    expect(all.counts.byKind).toEqual({ review: 2000, budget: 2000, approval: 2000, tdd: 2000, loop: 2000 });
    expect(all.counts.byPipeline).toEqual({ docs: 5000, code: 5000 });
    expect(all.counts.byReviewers).toEqual({ legal: 3334 });

    const filter = { kinds: ['review' as const], pipeline: 'docs' };
    const seen: string[] = [];
    let page = index.query(filter, { limit: 300 });
    expect(page.counts.total).toBe(1000);
    for (;;) {
      seen.push(...page.decisions.map((d) => d.key));
      if (!page.nextCursor) break;
      page = index.query(filter, { limit: 300, after: page.nextCursor });
    }
    expect(seen).toHaveLength(1000);
    expect(new Set(seen).size).toBe(1000);
    expect(index.query({ text: 'NUMBER 9999' }).decisions.map((d) => d.stage)).toEqual(['stage-9999']);
  });

  it('refuses a cursor it did not issue', async () => {
    const index = indexOver(new FakeBackend());
    await index.start();
    expect(() => index.query({}, { after: 'bogus' })).toThrow(InvalidCursorError);
  });

  it('close() waits for a listing its timer started, so the connection is not closed under it', async () => {
    const backend = new FakeBackend();
    let release: () => void = () => undefined;
    let calls = 0;
    backend.changes = () => {
      calls += 1;
      return new Promise<DecisionChange[]>((resolve) => (release = () => resolve([])));
    };
    const index = new DecisionIndex(backend, { deltaMs: 5, reconcileMs: 0 });
    await index.start();
    while (calls === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    let closed = false;
    const closing = index.close().then(() => (closed = true));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(closed).toBe(false);
    release();
    await closing;
    expect(closed).toBe(true);
    // The timers are gone: no listing starts after close.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(calls).toBe(1);
  });
});
