/**
 * Defects found in review, each pinned by a test on the real server:
 * - stage names that are Object.prototype names (`constructor`, `toString`) are data like any other;
 * - an invalid token budget given straight to the workflow fails the item (status `failed`, not `completed`);
 * - a spec too big for one history is refused before it starts, naming the limit;
 * - a pipeline wider than `max_parallel` runs every stage, never more than `max_parallel` at once, and the
 *   2,100-stage spec that used to wedge a worker runs with no failed workflow task;
 * - a prompt template that does not parse is refused at validation.
 */
import { Registry } from '../../src/activities/registry';
import { pipeline } from '../../src/kinds/builder';
import { validatePipeline } from '../../src/kinds/pipeline';
import { TreadlePendingReviews } from '../../src/model/search-attributes';
import { defaultRegistry } from '../../src/worker';
import { eventually, startHarness, type Harness } from '../support/harness';

let running = 0;
let peak = 0;
let h: Harness;
beforeAll(async () => {
  const registry = defaultRegistry().merge(
    new Registry().stage('count-parallel', async () => {
      running += 1;
      peak = Math.max(peak, running);
      await new Promise((r) => setTimeout(r, 150));
      running -= 1;
      return { outcome: 'completed', artefact: null };
    }),
  );
  h = await startHarness({ registry });
});
afterAll(async () => {
  await h?.shutdown();
});

it('runs and reviews stages named constructor and toString', async () => {
  const spec = pipeline('proto-names')
    .stage('constructor', 'scripted')
    .stage('toString', 'scripted')
    .dependency('toString', 'constructor')
    .reviewPolicy('constructor', 'always');
  const id = h.id();
  await h.client.start(spec, null, { id });
  const waiting = await eventually(
    async () => {
      const s = await h.client.getState(id);
      return s.status === 'waiting_review' ? s : undefined;
    },
    30_000,
    'the review of constructor',
  );
  expect(waiting.pendingReviews.map((r) => r.stage)).toEqual(['constructor']);
  const listed = await eventually(
    async () => (await h.client.listPendingReviews()).find((r) => r.itemId === id),
    20_000,
    'the listing',
  );
  expect(listed.stage).toBe('constructor');
  // Asking about a stage that does not exist (but is a property of every object) is still "unknown".
  await expect(h.client.approve(id, 'hasOwnProperty')).rejects.toThrow(
    `review rejected: unknown stage "hasOwnProperty" in work item ${id}`,
  );
  await h.client.approve(id, 'constructor', { reviewer: 'ann' });
  const result = await h.client.result(id);
  expect(result.status).toBe('completed');
  expect(Object.keys(result.artefacts).sort()).toEqual(['constructor', 'toString']);
  const state = await h.client.getState(id);
  expect(state.stages['constructor']!.status).toBe('completed');
  expect(state.stages['toString']!.status).toBe('completed');
});

it('fails an item whose token budget is invalid, with status failed', async () => {
  const id = h.id();
  await h.temporal.workflow.start('workItem', {
    taskQueue: h.taskQueue,
    workflowId: id,
    args: [{ pipeline: pipeline('bad-budget').stage('only', 'scripted').toJSON(), input: null, tokenBudget: -5 }],
  });
  // Engine 6 fails the workflow of a failed item; the client reads its result from the failure.
  const result = await h.client.result(id);
  expect(result.status).toBe('failed');
  expect(result.error).toBe('invalid work item: tokenBudget must be a whole number of tokens above 0 or null, got -5');
  const state = await h.client.getState(id);
  expect(state.status).toBe('failed');
  expect(state.events.map((e) => e.type)).toEqual(['ItemStarted', 'ItemFailed']);
});

it('refuses a spec whose worst case passes the history or pending-activity limit, naming the limit and the heaviest stages', () => {
  let p = pipeline('too-big');
  for (let i = 0; i < 40; i++)
    p = p
      .stage(`s${i}`, 'scripted')
      .qualityGate(`s${i}`, 'scripted')
      .retryBudget(`s${i}`, { maxAttempts: 100, attemptTimeout: '1m', delay: '1s' });
  const result = validatePipeline(p.toJSON());
  expect(result.ok).toBe(false);
  expect(!result.ok && result.problems).toEqual([
    expect.stringMatching(
      /^the pipeline could write 5\d{4} history events in the worst case \(every attempt used\); one work item holds at most 40000 \(Temporal's limit is 51200\): lower max_attempts or split it into several pipelines \(heaviest stages: s0 1\d{3}, s1 1\d{3}, s2 1\d{3}\)$/,
    ),
  ]);
  const wide = validatePipeline({
    name: 'wide',
    max_parallel: 900,
    stages: [{ name: 'a', run: 'scripted', gate: { all: ['scripted', 'scripted', 'scripted'] } }],
  });
  expect(wide.ok).toBe(false);
  expect(!wide.ok && wide.problems).toEqual([
    'max_parallel: must be at most 500 (each running stage holds Temporal activities; Temporal allows 2000 per item)',
  ]);
  // Within the schema's 500, but five gates in parallel per running stage could hold 2,500 activities.
  const gates = { all: ['scripted', 'scripted', 'scripted', 'scripted', 'scripted'] };
  const gated = validatePipeline({
    name: 'gated',
    max_parallel: 500,
    stages: [{ name: 'a', run: 'scripted', gate: gates }],
  });
  expect(!gated.ok && gated.problems).toEqual([
    'max_parallel 500 with up to 5 activities per running stage could hold 2500 activities at once; Temporal allows 2000 per work item: lower max_parallel',
  ]);
  // The same gates at 400 hold at most 2,000: allowed.
  expect(
    validatePipeline({ name: 'gated', max_parallel: 400, stages: [{ name: 'a', run: 'scripted', gate: gates }] }).ok,
  ).toBe(true);
});

it('runs 300 independent stages with at most max_parallel at once', async () => {
  let p = pipeline('wide').maxParallel(20);
  for (let i = 0; i < 300; i++) p = p.stage(`w${i}`, 'count-parallel');
  const id = h.id();
  peak = 0;
  await h.client.start(p, null, { id });
  const result = await h.client.result(id);
  expect(result.status).toBe('completed');
  expect(Object.keys(result.artefacts)).toHaveLength(300);
  expect(peak).toBeLessThanOrEqual(20);
  expect(peak).toBeGreaterThan(1);
}, 180_000);

it('refuses an llm template that does not parse when the spec is validated, before anything runs', async () => {
  const spec = {
    name: 'bad-template',
    stages: [
      {
        name: 'ask',
        run: 'llm',
        agent: 'scripted',
        with: { prompt: 'Hello {% if input.x %}unclosed' },
        gate: { run: 'llm-judge', with: { criteria: ['c'], prompt: '{{ output | no_such_filter }}' } },
      },
    ],
  };
  const id = h.id('template');
  const handle = await h.temporal.workflow.start('workItem', {
    taskQueue: h.taskQueue,
    workflowId: id,
    args: [{ pipeline: spec, input: null }],
  });
  // Engine 6 fails the workflow of a failed item; the client reads its result from the failure.
  const result = await h.client.result(id);
  expect(result.status).toBe('failed');
  expect(result.error).toMatch(
    /^pipeline bad-template is invalid: stage ask: with\.prompt: .*; stage ask: gate llm-judge: with\.prompt: .*no_such_filter/,
  );
  // Nothing ran: the only activity was the prepare step.
  const history = await handle.fetchHistory();
  expect(history.events!.filter((e) => e.activityTaskScheduledEventAttributes)).toEqual([]);
});

it('runs the 2,100-stage pipeline that used to wedge its worker, with no failed workflow task', async () => {
  let p = pipeline('very-wide');
  for (let i = 0; i < 2100; i++) p = p.stage(`s${i}`, 'scripted');
  const id = h.id('very-wide');
  await h.client.start(p, null, { id });
  const result = await h.client.result(id);
  expect(result.status).toBe('completed');
  expect(Object.keys(result.artefacts)).toHaveLength(2100);
  const history = await h.temporal.workflow.getHandle(id).fetchHistory();
  expect(
    history.events!.filter((e) => e.workflowTaskFailedEventAttributes || e.workflowTaskTimedOutEventAttributes),
  ).toEqual([]);
  // The state query answers one page of the item's thousands of events, once a worker has replayed them (the item
  // is closed and out of its cache): seconds on a busy machine, past the 2 s a worker usually gets to answer.
  const state = await h.client.getState(id, { eventLimit: 10 }, 60_000);
  expect(state.events).toHaveLength(10);
  expect(state.eventCount).toBeGreaterThan(4200);
}, 300_000);

it("keeps TreadlePendingReviews within the server's size limit when sixty long-named stages wait at once", async () => {
  let p = pipeline('many-reviews');
  const names = Array.from({ length: 60 }, (_, i) => `review-${String(i).padStart(2, '0')}-${'x'.repeat(50)}`);
  for (const name of names) p = p.stage(name, 'scripted').reviewPolicy(name, 'always');
  const id = h.id('many-reviews');
  await h.client.start(p, null, { id });
  const state = await eventually(
    async () => {
      const s = await h.client.getState(id);
      return s.pendingReviews.length === 60 ? s : undefined;
    },
    60_000,
    'sixty reviews',
  );
  expect(state.status).toBe('waiting_review');
  const description = await h.temporal.workflow.getHandle(id).describe();
  const listed = description.typedSearchAttributes.get(TreadlePendingReviews)!;
  expect(JSON.stringify(listed).length).toBeLessThanOrEqual(1_500);
  expect(listed.length).toBeGreaterThan(10);
  // The first to wait are named, in the order they asked.
  expect(listed).toEqual(state.pendingReviews.slice(0, listed.length).map((r) => r.stage));
  // No workflow task failed on the way (a refused upsert would fail every task).
  const history = await h.temporal.workflow.getHandle(id).fetchHistory();
  expect(history.events!.filter((e) => e.workflowTaskFailedEventAttributes)).toEqual([]);
  // Listings give the first twenty with details, the rest the attribute holds by name; status has them all.
  const rows = await eventually(
    async () => {
      const all = (await h.client.listPendingReviews()).filter((r) => r.itemId === id);
      return all.length === listed.length ? all : undefined;
    },
    20_000,
    'the listing',
  );
  expect(rows.filter((r) => r.reason === 'always')).toHaveLength(20);
  await h.temporal.workflow.getHandle(id).terminate('test over');
}, 120_000);
