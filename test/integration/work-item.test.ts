/**
 * The work item around the stage runner, on a real dev server. Cases: parallel branches, failure skipping
 * dependents, invalid review input (update and signal), idempotent start, blob offload of a 1 MB artefact
 * with a small history, pending reviews listed by search attribute, invalid specs and unknown
 * implementations reaching the workflow, Web UI details and search attributes.
 */
import { WorkflowIdConflictPolicy } from '@temporalio/client';
import { eventually, startHarness, type Harness } from '../support/harness';
import { draftPublish } from '../support/pipelines';
import { TreadleClient, TreadleError } from '../../src/client';
import { pipeline } from '../../src/kinds/builder';
import { TreadlePendingReviews, TreadleStatus } from '../../src/model/search-attributes';
import { isBlobRef } from '../../src/model/shapes';
import type { WorkItemState } from '../../src/model/state';
import { reviewSignal } from '../../src/workflow-kit/messages';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.shutdown();
});

const until = (id: string, status: WorkItemState['status']) =>
  eventually(
    async () => {
      const state = await h.client.getState(id);
      return state.status === status ? state : undefined;
    },
    30_000,
    `${id} to be ${status}`,
  );

it('runs independent stages in parallel and joins them', async () => {
  const id = h.id();
  const spec = pipeline('diamond')
    .stage('root', 'scripted')
    .stage('left', 'scripted', { dependsOn: ['root'] })
    .stage('right', 'scripted', { dependsOn: ['root'] })
    .stage('join', 'scripted', { dependsOn: ['left', 'right'] });
  await h.client.start(spec, { script: { left: [{ sleepMs: 1_500 }], right: [{ sleepMs: 1_500 }] } }, { id });
  expect((await h.client.result(id)).status).toBe('completed');
  const { stages } = await h.client.getState(id);
  const left = stages.left!.attempts[0]!;
  const right = stages.right!.attempts[0]!;
  // Each branch started before the other finished.
  expect(Date.parse(left.startedAt)).toBeLessThan(Date.parse(right.completedAt!));
  expect(Date.parse(right.startedAt)).toBeLessThan(Date.parse(left.completedAt!));
  expect(Object.keys((stages.join!.artefact as { upstream: object }).upstream).sort()).toEqual(['left', 'right']);
  expect(Date.parse(stages.join!.startedAt!)).toBeGreaterThanOrEqual(Date.parse(stages.left!.completedAt!));
});

it('a failed stage skips its dependents transitively while other branches finish, then fails the item', async () => {
  const id = h.id();
  const spec = pipeline('partial')
    .stage('a', 'scripted')
    .stage('bad', 'scripted', { dependsOn: ['a'] })
    .stage('good', 'scripted', { dependsOn: ['a'] })
    .stage('after_bad', 'scripted', { dependsOn: ['bad'] })
    .stage('last', 'scripted', { dependsOn: ['after_bad', 'good'] })
    .qualityGate('bad', 'scripted');
  await h.client.start(
    spec,
    { script: { bad: [{ verdict: 'rejected', summary: 'never good enough' }], good: [{ sleepMs: 500 }] } },
    { id },
  );
  const result = await h.client.result(id);
  expect(result).toEqual(expect.objectContaining({ status: 'failed', failedStages: ['bad'] }));
  const { stages, events } = await h.client.getState(id);
  expect(stages.good!.status).toBe('completed');
  expect(stages.after_bad).toEqual(
    expect.objectContaining({ status: 'skipped', error: 'dependency bad did not complete' }),
  );
  expect(stages.last).toEqual(
    expect.objectContaining({ status: 'skipped', error: 'dependency after_bad did not complete' }),
  );
  expect(events[events.length - 1]!.type).toBe('ItemFailed');
});

describe('invalid review input', () => {
  it('the update rejects unknown stages, stages not waiting and malformed edits with a clear message', async () => {
    const id = h.id();
    // publish waits for review too, so the item is still running when draft is approved twice.
    await h.client.start(draftPublish({ maxAttempts: 1 }, 'always', 'always'), null, { id });
    await until(id, 'waiting_review');
    await expect(h.client.approve(id, 'nope')).rejects.toThrow(
      `review rejected: unknown stage "nope" in work item ${id} (stages: draft, publish)`,
    );
    await expect(h.client.approve(id, 'publish')).rejects.toThrow(
      `stage "publish" of work item ${id} is not waiting for review (it is pending); waiting: draft`,
    );
    await expect(h.client.review(id, 'draft', { kind: 'approve_with_edits' } as never)).rejects.toThrow(
      'outcome.artefact: approve_with_edits needs an artefact (the edited output)',
    );
    await expect(h.client.review(id, 'draft', { kind: 'reject', reason: '' })).rejects.toThrow(
      'outcome.reason: a rejection needs a reason',
    );
    await expect(h.client.approve(id, 'draft', { attempt: 4 })).rejects.toThrow('stage "draft" has no attempt 4');
    await expect(h.client.approve('no-such-item', 'draft')).rejects.toThrow(
      new TreadleError('unknown work item "no-such-item" in namespace default', 'not_found'),
    );
    // Nothing changed, and nothing entered the history: rejected updates are not recorded.
    const state = await h.client.getState(id);
    expect(state.pendingReviews.map((r) => r.stage)).toEqual(['draft']);
    const history = await h.temporal.workflow.getHandle(id).fetchHistory();
    expect(history.events!.filter((e) => e.workflowExecutionUpdateAcceptedEventAttributes)).toHaveLength(0);
    const approved = await h.client.approve(id, 'draft', { reviewer: 'ann' });
    // The same review again (as after an answer lost to a server failure) gets the first one's answer and changes
    // nothing; a different one, or one by someone else, is refused.
    await expect(h.client.approve(id, 'draft', { reviewer: 'ann' })).resolves.toEqual({ ...approved, repeated: true });
    for (const late of [
      () => h.client.approve(id, 'draft', { reviewer: 'bob' }),
      () => h.client.approve(id, 'draft', { reviewer: 'ann', note: 'again' }),
      () => h.client.reject(id, 'draft', 'no', { reviewer: 'ann' }),
    ])
      await expect(late()).rejects.toThrow(
        `stage "draft" of work item ${id} is not waiting for review (it is completed)`,
      );
    const accepted = (await h.temporal.workflow.getHandle(id).fetchHistory()).events!.filter(
      (e) => e.workflowExecutionUpdateAcceptedEventAttributes,
    );
    expect(accepted).toHaveLength(1);
    // After the item has finished too (Temporal keeps an update's outcome by its id in a closed run).
    await h.client.approve(id, 'publish', { reviewer: 'ann' });
    await until(id, 'completed');
    await expect(h.client.approve(id, 'draft', { reviewer: 'ann' })).resolves.toEqual({ ...approved, repeated: true });
    await expect(h.client.approve(id, 'draft', { reviewer: 'bob' })).rejects.toThrow(
      `work item ${id} has finished (completed); no stage is waiting for review`,
    );
  });

  it('the signal records invalid input as an event and changes nothing', async () => {
    const id = h.id();
    await h.client.start(draftPublish({ maxAttempts: 1 }, 'always', 'always'), null, { id });
    await until(id, 'waiting_review');
    const handle = h.temporal.workflow.getHandle(id);
    await handle.signal(reviewSignal, { stage: 'publish', outcome: { kind: 'approve' }, reviewer: 'eve' });
    await handle.signal(reviewSignal, { stage: 'draft', outcome: { kind: 'maybe' } } as never);
    const state = await eventually(async () => {
      const s = await h.client.getState(id);
      return s.events.filter((e) => e.type === 'ReviewInputRejected').length === 2 ? s : undefined;
    });
    const rejected = state.events.filter((e) => e.type === 'ReviewInputRejected').map((e) => e.message);
    expect(rejected[0]).toContain('stage "publish"');
    expect(rejected[1]).toContain('invalid review: outcome.kind');
    expect(state.status).toBe('waiting_review');
    expect(state.pendingReviews.map((r) => r.stage)).toEqual(['draft']);
    // A valid signal works.
    await handle.signal(reviewSignal, { stage: 'draft', outcome: { kind: 'approve' }, reviewer: 'eve' });
    await until(id, 'waiting_review').then(async (s) =>
      expect(s.pendingReviews.map((r) => r.stage)).toEqual(['publish']),
    );
    await h.client.approve(id, 'publish');
    expect((await h.client.result(id)).status).toBe('completed');
  });
});

it('starting the same item twice returns the same run, before and after it finishes', async () => {
  const id = h.id();
  const spec = draftPublish({ maxAttempts: 1 });
  const first = await h.client.start(spec, null, { id });
  const second = await h.client.start(spec, null, { id });
  expect(second.runId).toBe(first.runId);
  await h.client.result(id);
  const third = await h.client.start(spec, null, { id });
  expect(third.runId).toBe(first.runId);
  const executions = [];
  for await (const e of h.temporal.workflow.list({ query: `WorkflowId = '${id}'` })) executions.push(e.runId);
  expect(executions).toEqual([first.runId]);
  expect(WorkflowIdConflictPolicy.USE_EXISTING).toBe('USE_EXISTING');
});

it('offloads a 1 MB artefact to the blob store; only a reference enters the history', async () => {
  const id = h.id();
  const mb = 1024 * 1024;
  await h.client.start(draftPublish({ maxAttempts: 1 }), { script: { draft: [{ outputBytes: mb }] } }, { id });
  expect((await h.client.result(id)).status).toBe('completed');
  const state = await h.client.getState(id);
  const ref = state.stages.draft!.artefact;
  expect(isBlobRef(ref)).toBe(true);
  const draft = (await h.client.readArtefact(ref)) as { text: string };
  expect(draft.text).toHaveLength(mb);
  // publish received the resolved artefact (and, being large again, offloaded its own).
  const publish = (await h.client.readArtefact(state.stages.publish!.artefact)) as {
    upstream: { draft: { text: string } };
  };
  expect(publish.upstream.draft.text).toHaveLength(mb);
  const history = await h.temporal.workflow.getHandle(id).fetchHistory();
  const bytes = Buffer.byteLength(JSON.stringify(history));
  expect(bytes).toBeLessThan(40 * 1024);
});

it('lists pending reviews across work items with the TreadlePendingReviews search attribute', async () => {
  const spec = pipeline(`listing-${h.taskQueue}`).stage('check', 'scripted').reviewPolicy('check', 'always');
  const ids = [h.id('listed'), h.id('listed')];
  for (const id of ids) await h.client.start(spec, null, { id });
  const listed = await eventually(
    async () => {
      const reviews = await h.client.listPendingReviews({ pipeline: `listing-${h.taskQueue}` });
      return reviews.length === 2 ? reviews : undefined;
    },
    30_000,
    'both reviews to be listed',
  );
  expect(listed.map((r) => [r.itemId, r.stage, r.reason]).sort()).toEqual(
    ids.map((id) => [id, 'check', 'always']).sort(),
  );
  const description = await h.temporal.workflow.getHandle(ids[0]!).describe();
  expect(description.typedSearchAttributes.get(TreadlePendingReviews)).toEqual(['check']);
  expect(description.typedSearchAttributes.get(TreadleStatus)).toBe('waiting_review');
  await h.client.approve(ids[0]!, 'check');
  await h.client.result(ids[0]!);
  const after = await eventually(
    async () => {
      const reviews = await h.client.listPendingReviews({ pipeline: `listing-${h.taskQueue}` });
      return reviews.length === 1 ? reviews : undefined;
    },
    30_000,
    'the answered review to leave the list',
  );
  expect(after[0]!.itemId).toBe(ids[1]);
  const done = await h.temporal.workflow.getHandle(ids[0]!).describe();
  expect(done.typedSearchAttributes.get(TreadleStatus)).toBe('completed');
  expect(done.typedSearchAttributes.get(TreadlePendingReviews)).toBeUndefined();
  await h.client.approve(ids[1]!, 'check');
});

describe('specs the workflow refuses', () => {
  it('the client lists every problem before starting anything', async () => {
    const bad = {
      name: 'bad',
      stages: [
        { name: 'a', run: 'scripted', depends_on: ['b'] },
        { name: 'b', run: 'scripted', depends_on: ['a'], retry_budget: { max_attempts: 0 } },
      ],
    };
    const error = await h.client.start(bad, null, { id: h.id() }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TreadleError);
    expect((error as TreadleError).problems).toEqual([
      'stages[1] (b).retry_budget.max_attempts: must be at least 1 (it includes the first attempt)',
      'dependency cycle: a -> b -> a; remove one of these depends_on',
    ]);
  });

  it('a workflow started directly with a bad spec or unknown implementations fails with every problem', async () => {
    const invalidId = h.id();
    const unknownId = h.id();
    const start = (workflowId: string, spec: unknown) =>
      h.temporal.workflow.start('workItem', {
        taskQueue: h.taskQueue,
        workflowId,
        args: [{ pipeline: spec, input: null }],
      });
    await start(invalidId, { name: 'x', stages: [{ name: 'a', run: 'scripted', depends_on: ['zzz'] }] });
    await start(unknownId, { name: 'y', stages: [{ name: 'a', run: 'nonexistent', gate: 'also_missing' }] });
    const invalid = await h.client.result(invalidId);
    expect(invalid.status).toBe('failed');
    expect(invalid.error).toContain('stage a: depends on unknown stage "zzz"');
    const unknown = await h.client.result(unknownId);
    expect(unknown.error).toContain('unknown stage implementation "nonexistent"');
    expect(unknown.error).toContain('unknown gate implementation "also_missing"');
    expect((await h.client.getState(unknownId)).problems).toHaveLength(2);
  });

  it('refuses work item inputs that are not plain JSON', async () => {
    await expect(h.client.start(draftPublish({}), { when: new Date() }, { id: h.id() })).rejects.toThrow(
      'the work item input must be plain JSON: input.when is a Date, not a plain object',
    );
  });
});

it('keeps a readable summary for the Web UI and names activities by implementation with a summary', async () => {
  const id = h.id();
  await h.client.start(draftPublish({ maxAttempts: 2 }), { script: { draft: [{ verdict: 'rejected' }, {}] } }, { id });
  await h.client.result(id);
  const history = await h.temporal.workflow.getHandle(id).fetchHistory();
  const scheduled = history
    .events!.filter((e) => e.activityTaskScheduledEventAttributes)
    .map((e) => ({
      type: e.activityTaskScheduledEventAttributes!.activityType!.name,
      summary: e.userMetadata?.summary?.data
        ? JSON.parse(Buffer.from(e.userMetadata.summary.data).toString())
        : undefined,
    }));
  expect(scheduled).toEqual([
    { type: 'scripted', summary: 'draft · attempt 1/2' },
    { type: 'gate:scripted', summary: 'draft · gate · attempt 1/2' },
    { type: 'scripted', summary: 'draft · attempt 2/2' },
    { type: 'gate:scripted', summary: 'draft · gate · attempt 2/2' },
    { type: 'scripted', summary: 'publish · attempt 1/1' },
  ]);
});

it('a cancelled item stops waiting, leaves the pending-review listing and says it was cancelled', async () => {
  const id = h.id();
  await h.client.start(draftPublish({ maxAttempts: 1 }, 'always'), null, { id });
  await until(id, 'waiting_review');
  const handle = h.temporal.workflow.getHandle(id);
  await handle.cancel();
  await expect(handle.result()).rejects.toThrow('Workflow execution cancelled');
  const description = await handle.describe();
  expect(description.status.name).toBe('CANCELLED');
  expect(description.typedSearchAttributes.get(TreadleStatus)).toBe('cancelled');
  expect(description.typedSearchAttributes.get(TreadlePendingReviews)).toBeUndefined();
  const state = await h.client.getState(id);
  expect(state).toEqual(
    expect.objectContaining({ status: 'cancelled', error: 'work item cancelled', pendingReviews: [] }),
  );
});

describe('when no worker answers', () => {
  it('a review fails with a clear message instead of hanging, and watch ends for a terminated item', async () => {
    const other = await startHarness();
    const id = other.id();
    await other.client.start(draftPublish({ maxAttempts: 1 }, 'always'), null, { id });
    await eventually(async () => ((await other.client.getState(id)).status === 'waiting_review' ? true : undefined));
    await other.shutdown();

    const impatient = new TreadleClient(h.temporal, { taskQueue: other.taskQueue, answerWaitMs: 2_000 });
    const started = Date.now();
    await expect(impatient.approve(id, 'draft')).rejects.toThrow(
      `the review of draft of ${id} was not sent: no worker answered on task queue ${other.taskQueue} within 2s; start one with \`TREADLE_TASK_QUEUE=${other.taskQueue} treadle worker\`, then send it again`,
    );
    expect(Date.now() - started).toBeLessThan(15_000);

    // Listing reads visibility only (search attributes and memo): full details without any worker.
    const listed = await eventually(
      async () => {
        const t0 = Date.now();
        const reviews = await impatient.listPendingReviews();
        const mine = reviews.find((r) => r.itemId === id);
        return mine ? { mine, ms: Date.now() - t0 } : undefined;
      },
      30_000,
      'the worker-less item to be listed',
    );
    expect(listed.mine).toEqual(
      expect.objectContaining({
        stage: 'draft',
        reason: 'always',
        attempt: 1,
        pipeline: 'draft-publish',
        message: 'review policy is always; the quality gate accepted the output',
      }),
    );
    expect(listed.ms).toBeLessThan(10_000);

    // A terminated item never runs its own finish; watch must still stop (a worker on the item's queue
    // answers the state query of the closed execution).
    await h.temporal.workflow.getHandle(id).terminate('operator gave up');
    const onQueue = await startHarness({ taskQueue: other.taskQueue });
    const state = await onQueue.client.watch(id, () => undefined);
    expect(state).toEqual(expect.objectContaining({ status: 'failed', error: 'the workflow execution is terminated' }));
    await onQueue.shutdown();
  });
});
