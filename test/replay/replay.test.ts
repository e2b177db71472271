/**
 * Replays recorded histories (test/replay/histories/**\/*.json) through the current workflow code; any
 * nondeterministic change fails here before it can break running work items. Histories recorded before a
 * patch live in a folder named after it (e.g. `before-event-scheduler/`): they take the patch's old branch.
 */
import { Worker } from '@temporalio/worker';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import v8 from 'node:v8';
import type { LimiterInput } from '../../src/capacity/workflow';
import type { NotifierInput } from '../../src/notify/messages';
import { ENGINE_VERSION } from '../../src/model/state';

const dir = path.join(__dirname, 'histories');
const files = readdirSync(dir, { recursive: true, encoding: 'utf8' })
  .filter((f) => f.endsWith('.json'))
  .sort();
const bundle = (): { codePath: string } => ({ codePath: process.env.TREADLE_TEST_BUNDLE! });
const historyOf = (file: string): unknown => JSON.parse(readFileSync(path.join(dir, file), 'utf8'));
// The file's name is the workflow id it ran under: a TDD node derives its children's ids from it.
const workflowIdOf = (file: string): string => path.basename(file, '.json');

it('has recorded histories to replay, from before the event-driven scheduler, the chained stage runner, call batches, the fan-out workflow and failed workflows, and after them', () => {
  expect(files.length).toBeGreaterThanOrEqual(35);
  expect(files.filter((f) => f.startsWith(`before-event-scheduler${path.sep}`)).length).toBeGreaterThanOrEqual(5);
  expect(files.filter((f) => f.startsWith(`before-chained-runner${path.sep}`)).length).toBeGreaterThanOrEqual(10);
  expect(files.filter((f) => f.startsWith(`before-call-batches${path.sep}`)).length).toBeGreaterThanOrEqual(10);
  // Engine 4's fan-out (every element a child of the work item), and its ten-stage line.
  expect(files.filter((f) => f.startsWith(`before-fan-out-tree${path.sep}`)).length).toBeGreaterThanOrEqual(2);
  // Engine 5's histories: failed items, elements and trees returned their results.
  expect(files.filter((f) => f.startsWith(`before-failed-workflow${path.sep}`)).length).toBeGreaterThanOrEqual(12);
  // Engine 6's histories: no TreadleDecisionAt, loops that list nothing, TDD nodes without the patch.
  expect(files.filter((f) => f.startsWith(`before-decisions${path.sep}`)).length).toBeGreaterThanOrEqual(12);
  // Engine 7's decisions, each made by someone.
  expect(files).toEqual(
    expect.arrayContaining([
      'decisions-review.json',
      'decisions-approval.json',
      'decisions-tdd.json',
      'decisions-loop.json',
      'decisions-loop.work.1.json',
    ]),
  );
  expect(files).toEqual(
    expect.arrayContaining(['fan-out-item.json', 'fan-out-item.classify.1.json', 'tdd-failed-root.json']),
  );
  // Issue 40's human stage: a person's output, sent back by the gate once.
  expect(files).toEqual(expect.arrayContaining(['human-stage.json']));
  // Issue 39's limiter: a run and the run it continued as.
  expect(files).toEqual(expect.arrayContaining(['limiter.json', 'limiter.2.json']));
  // Issue 40's notifier: a run and the run it continued as.
  expect(files).toEqual(expect.arrayContaining(['notifier.json', 'notifier.2.json']));
  // Engine 8 (issue 40): an item cancelled by someone, with who and why, its approval request cancelled.
  expect(files).toEqual(expect.arrayContaining(['cancelled-by-person.json']));
  // Issue 40's engine-8 item that announces: a review owed, decided, and the item failed.
  expect(files).toEqual(expect.arrayContaining(['item-announces.json']));
  // Engine 9 (issue 42): a fork, an item started without a correlation id, and engine 8's ten stages.
  expect(files).toEqual(
    expect.arrayContaining([
      'lineage-fork.json',
      'lineage-unattributed.json',
      `before-lineage${path.sep}linear-ten.json`,
    ]),
  );
  // Issue 40: a TDD tree and a loop cancelled with their items mid-call, before and after they end `cancelled`.
  expect(files).toEqual(
    expect.arrayContaining([
      'cancelled-tree.json',
      'cancelled-tree.build.1.json',
      'cancelled-tree.build.1.cx.json',
      'cancelled-loop.json',
      'cancelled-loop.work.1.json',
    ]),
  );
  expect(files.filter((f) => f.startsWith(`before-cancelled-status${path.sep}`)).length).toBeGreaterThanOrEqual(3);
  expect(files.filter((f) => !f.includes(path.sep)).length).toBeGreaterThanOrEqual(10);
});

it.each(files)('replays %s deterministically', async (file) => {
  await Worker.runReplayHistory({ workflowBundle: bundle() }, historyOf(file) as never, workflowIdOf(file));
});

// Every promise workflow code creates costs the workflow thread a stack trace (the SDK's promise hook,
// BENCHMARKS.md "Second paths: what each measured"): the count per stage is the engine's overhead over a
// hand-written loop (3.6 per activity: the SDK's two, the loop's `await`, and the start), counted exactly by
// replaying (replay workers run workflows in this thread). Engine 3's continuations made 47 for ten stages
// (engine 2: 67); the live runner, an async function again since issue 38, makes 59: its own promise and its
// `await`'s, which cost no measurable worker CPU (BENCHMARKS.md). The bound catches a runner that makes more.
it('runs a ten-stage item with at most 6 workflow promises per stage', async () => {
  // A promise belongs to workflow code when its realm's global holds an activator (as the SDK's hook tells).
  const realms = new Map<unknown, Record<string, unknown>>();
  const inWorkflow = (promise: Promise<unknown>): boolean => {
    const ctor = promise.constructor;
    let global = realms.get(ctor);
    if (global === undefined) {
      global = (ctor.constructor as FunctionConstructor)('return globalThis')() as Record<string, unknown>;
      realms.set(ctor, global);
    }
    return global.__TEMPORAL_ACTIVATOR__ !== undefined;
  };
  let promises = 0;
  const replay = (): Promise<void> =>
    Worker.runReplayHistory({ workflowBundle: bundle() }, historyOf('linear-ten.json') as never, 'linear-ten');
  await replay();
  const stop = v8.promiseHooks.onInit((promise) => {
    if (inWorkflow(promise)) promises++;
  });
  try {
    await replay();
  } finally {
    stop();
  }
  expect(promises).toBeGreaterThan(10);
  expect(promises / 10).toBeLessThanOrEqual(6);
});

// What a ten-stage item adds to a hand-written workflow's 65 events (3 per workflow task, 3 per activity,
// start and end): the prepare step's marker, which records the engine version (docs/versioning.md), and
// the final status upsert. No patch marker and no `TemporalChangeVersion` upsert (each an event and, for the
// upsert, a visibility write per item).
it('records a ten-stage item in 67 events, its engine version in the prepare marker and no patch', () => {
  const { events } = historyOf('linear-ten.json') as {
    events: {
      eventType: string;
      markerRecordedEventAttributes?: { markerName: string; details: Record<string, { payloads: { data: string }[] }> };
    }[];
  };
  expect(events).toHaveLength(67);
  const markers = events
    .filter((e) => e.eventType === 'EVENT_TYPE_MARKER_RECORDED')
    .map((e) => e.markerRecordedEventAttributes!);
  expect(markers.map((m) => m.markerName)).toEqual(['core_local_activity']);
  const prepared = JSON.parse(
    Buffer.from(markers[0]!.details.result!.payloads[0]!.data, 'base64').toString('utf8'),
  ) as { ok: boolean; engine?: number };
  expect(prepared).toMatchObject({ ok: true, engine: ENGINE_VERSION });
  expect(events.filter((e) => e.eventType === 'EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES')).toHaveLength(1);
});

// Engine 9 (issue 42): a fork schedules an activity only for the stage it runs again (its two carried stages run
// nothing), and an item started without a correlation id publishes the one it made in its first upsert.
it('records a fork that runs only its last stage, and an item that publishes the correlation id it made', () => {
  type Recorded = {
    events: {
      eventType: string;
      upsertWorkflowSearchAttributesEventAttributes?: { searchAttributes: { indexedFields: Record<string, unknown> } };
    }[];
  };
  const fork = (historyOf('lineage-fork.json') as Recorded).events;
  expect(fork.filter((e) => e.eventType === 'EVENT_TYPE_ACTIVITY_TASK_SCHEDULED')).toHaveLength(1);
  const upserts = (historyOf('lineage-unattributed.json') as Recorded).events.filter(
    (e) => e.eventType === 'EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES',
  );
  expect(
    Object.keys(upserts[0]!.upsertWorkflowSearchAttributesEventAttributes!.searchAttributes.indexedFields),
  ).toEqual(expect.arrayContaining(['TreadlePipeline', 'TreadleStatus', 'TreadleCorrelationId']));
});

// Engine 6: a failed item and a TDD root that did not merge end as failed workflows, and a fan-out reads its
// failing element's result from the element's failure (the recorded histories pin it).
it('records failed items and trees as failed workflows, and a failing element as a failed child', () => {
  const events = (file: string) => (historyOf(file) as { events: { eventType: string }[] }).events;
  const last = (file: string) => events(file).at(-1)!.eventType;
  expect(last('timeout-mechanical-reject.json')).toBe('EVENT_TYPE_WORKFLOW_EXECUTION_FAILED');
  expect(last('tdd-failed-root.json')).toBe('EVENT_TYPE_WORKFLOW_EXECUTION_FAILED');
  expect(last('fan-out-item.json')).toBe('EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED');
  const children = events('fan-out-item.classify.1.json').map((e) => e.eventType);
  expect(children).toContain('EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED');
  expect(last(path.join('before-failed-workflow', 'timeout-mechanical-reject.json'))).toBe(
    'EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED',
  );
});

// The limiter (issue 39, test/support/limiter-recording.ts): what its recorded runs hold, so a change to its
// messages, its wake-ups or continue-as-new meets a history that has them.
it('records a limiter run with every message, an expired lease, a moved wake-up, and the run it continued as', () => {
  type Event = {
    eventType: string;
    workflowExecutionSignaledEventAttributes?: { signalName: string };
    workflowExecutionStartedEventAttributes?: { input: { payloads: { data: string }[] } };
  };
  const events = (file: string) => (historyOf(file) as { events: Event[] }).events;
  const count = (file: string, type: string) => events(file).filter((e) => e.eventType === `EVENT_TYPE_${type}`).length;
  const signals = events('limiter.json').flatMap((e) => e.workflowExecutionSignaledEventAttributes?.signalName ?? []);
  expect(new Set(signals)).toEqual(new Set(['release', 'throttle', 'renew']));
  expect(count('limiter.json', 'WORKFLOW_EXECUTION_UPDATE_ACCEPTED')).toBeGreaterThanOrEqual(6);
  // Wake-ups: the throttle's end and the unrenewed leases' bound fired; a message moves the one set.
  expect(count('limiter.json', 'TIMER_FIRED')).toBeGreaterThanOrEqual(2);
  expect(count('limiter.json', 'TIMER_CANCELED')).toBeGreaterThanOrEqual(1);
  expect(events('limiter.json').at(-1)!.eventType).toBe('EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW');
  // The next run starts from the carried state: the lease held across it, and the limits a process sent.
  const started = events('limiter.2.json')[0]!.workflowExecutionStartedEventAttributes!;
  const input = JSON.parse(Buffer.from(started.input.payloads[0]!.data, 'base64').toString('utf8')) as LimiterInput;
  expect(input.carried?.leases).toHaveLength(1);
  expect(input.limits.leaseMs).toBe(60_000);
  expect(count('limiter.2.json', 'WORKFLOW_EXECUTION_UPDATE_ACCEPTED')).toBeGreaterThanOrEqual(1);
});

// The notifier (issue 40, test/support/notifier-recording.ts): its recorded runs hold deliveries in two lanes, a
// duplicate and a malformed signal, a retried delivery, and continue-as-new with deliveries queued and keys carried.
it('records a notifier run with deliveries, a duplicate, and the run it continued as with its queue', () => {
  type Event = {
    eventType: string;
    workflowExecutionStartedEventAttributes?: { input: { payloads: { data: string }[] } };
    activityTaskStartedEventAttributes?: { attempt?: number };
  };
  const events = (file: string) => (historyOf(file) as { events: Event[] }).events;
  const count = (file: string, type: string) => events(file).filter((e) => e.eventType === `EVENT_TYPE_${type}`).length;
  expect(count('notifier.json', 'ACTIVITY_TASK_COMPLETED')).toBeGreaterThanOrEqual(5);
  // More signals than deliveries: one announced twice, one malformed.
  expect(count('notifier.json', 'WORKFLOW_EXECUTION_SIGNALED')).toBeGreaterThan(
    count('notifier.json', 'ACTIVITY_TASK_SCHEDULED'),
  );
  expect(events('notifier.json').some((e) => (e.activityTaskStartedEventAttributes?.attempt ?? 1) > 1)).toBe(true);
  expect(events('notifier.json').at(-1)!.eventType).toBe('EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW');
  const started = events('notifier.2.json')[0]!.workflowExecutionStartedEventAttributes!;
  const input = JSON.parse(Buffer.from(started.input.payloads[0]!.data, 'base64').toString('utf8')) as NotifierInput;
  expect(input.carried?.queue.length).toBeGreaterThanOrEqual(1);
  expect(input.carried?.recent).toEqual(expect.arrayContaining(['decision_owed item-1~review~draft']));
});

// Deadlines (issue 40, test/support/item-announce-recording.ts): the review's deadline timer fired, the item then
// announced `overdue` and, handed to another group, moved its decision time; the human stage's timer fired too.
it('records decisions past their deadline: the timer fired, then an announcement, and an escalation published', () => {
  type Event = { eventType: string; timerStartedEventAttributes?: { startToFireTimeout?: string } };
  const types = (file: string) => (historyOf(file) as { events: Event[] }).events.map((e) => e.eventType.slice(11));
  for (const file of ['review-deadline.json', 'human-deadline.json']) {
    const seen = types(file);
    const fired = seen.indexOf('TIMER_FIRED');
    expect(fired).toBeGreaterThan(0);
    expect(seen.indexOf('ACTIVITY_TASK_SCHEDULED', fired)).toBeGreaterThan(fired);
    expect(seen.at(-1)).toBe('WORKFLOW_EXECUTION_COMPLETED');
  }
  const review = types('review-deadline.json');
  expect(review.indexOf('UPSERT_WORKFLOW_SEARCH_ATTRIBUTES', review.indexOf('TIMER_FIRED'))).toBeGreaterThan(0);
});
