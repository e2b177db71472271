/**
 * Schedules (issue 42) through the SDK's `client.schedules`, on the run's dev server with a real worker:
 * - a triggered firing starts an item whose id is `<name>-<firing time>`, with the schedule's priority and
 *   fairness key, which completes on the worker;
 * - a schedule fires on its own at its cron times (`@every 2s`);
 * - `skip`: a firing while the item waits for a review starts nothing and is counted skipped;
 * - `buffer`: such a firing waits (a third is dropped), and its item (an id of its own, though triggered in the
 *   same second) starts when the first one is approved, and completes;
 * - paused, a schedule does not fire over two of its intervals, and shows its note, but a trigger fires it;
 *   unpaused, it fires by time;
 * - a large input is stored once in the blob store, the schedule holding its reference;
 * - refusals: an invalid spec (every problem), a bad name, a name in use, a bad cron, a bad overlap, an unknown name.
 * Every schedule the tests make is deleted after them.
 */
import { isBlobRef } from '../../src/model/shapes';
import type { ScheduleDetail, TreadleError } from '../../src/client';
import { eventually, startHarness, type Harness } from '../support/harness';

/** A pipeline whose item completes at once. */
const QUICK = { name: 'sched-quick', stages: [{ name: 'only', run: 'scripted' }] };
/** A pipeline whose item waits for a person's review. */
const REVIEWED = { name: 'sched-reviewed', stages: [{ name: 'only', run: 'scripted', review_policy: 'always' }] };
/** A cron string that does not fire while the tests run: the tests trigger. */
const NEVER = '0 0 1 1 * 2099';
/** An item id made by a firing: the schedule's name and the firing time, RFC 3339 in UTC to the second. */
const firingId = (name: string): RegExp => new RegExp(`^${name}-\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ$`);

let h: Harness;
const made: string[] = [];
/** A schedule name unique to this run, deleted after the tests. */
const scheduleName = (what: string): string => {
  const name = `${what}-${h.taskQueue}`;
  made.push(name);
  return name;
};

beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  for (const name of made) await h.client.schedules.delete(name).catch(() => undefined);
  await h?.shutdown();
});

/** Waits until item `id` waits for the review of its stage `only`. */
const waitingReview = (id: string): Promise<true> =>
  eventually(async () => ((await h.client.getState(id)).status === 'waiting_review' ? true : undefined), 30_000);

/** Waits until the schedule has started `count` items, and answers its description. */
const fired = (name: string, count: number, timeoutMs = 30_000): Promise<ScheduleDetail> =>
  eventually(
    async () => {
      const detail = await h.client.schedules.describe(name);
      return detail.firings >= count ? detail : undefined;
    },
    timeoutMs,
    `${name} to fire ${count} times`,
  );

it('starts an item <name>-<time> when triggered, which completes on the worker', async () => {
  const name = scheduleName('trig');
  const created = await h.client.schedules.create(name, QUICK, {
    cron: NEVER,
    input: { n: 1 },
    priority: 2,
    fairnessKey: 'ops',
  });
  expect(created).toEqual(
    expect.objectContaining({
      name,
      pipeline: 'sched-quick',
      cron: [NEVER],
      overlap: 'skip',
      paused: false,
      timezone: 'UTC',
      catchupWindowMs: 3_600_000,
      taskQueue: h.taskQueue,
      firings: 0,
      recentFirings: [],
    }),
  );
  const triggered = await h.client.schedules.trigger(name);
  if (triggered.outcome !== 'started') throw new Error(`not started: ${JSON.stringify(triggered)}`);
  expect(triggered.itemId).toMatch(firingId(name));
  expect((await h.client.result(triggered.itemId)).status).toBe('completed');
  const state = await h.client.getState(triggered.itemId);
  expect(state).toEqual(
    expect.objectContaining({ id: triggered.itemId, pipeline: 'sched-quick', status: 'completed' }),
  );
  // Visible as an item of its pipeline, like one `run` started, with the schedule's priority.
  const visible = await h.client.visibleItem(triggered.itemId);
  expect(visible.pipeline).toBe('sched-quick');
  expect((await h.client.items.execution(triggered.itemId)).priority).toEqual(
    expect.objectContaining({ priority: 2, fairnessKey: 'ops' }),
  );

  const detail = await h.client.schedules.describe(name);
  const [firing] = detail.recentFirings;
  expect(firing).toEqual(expect.objectContaining({ itemId: triggered.itemId, status: 'completed' }));
  // The id's time is the firing's, to the second.
  expect(triggered.itemId).toBe(`${name}-${firing!.scheduledAt.replace(/\.\d+Z$/, 'Z')}`);
});

it('fires on its own at its cron times', async () => {
  const name = scheduleName('time');
  await h.client.schedules.create(name, QUICK, { cron: '@every 2s' });
  const detail = await fired(name, 2);
  await h.client.schedules.delete(name);
  const ids = detail.recentFirings.map((f) => f.itemId);
  expect(new Set(ids).size).toBe(ids.length);
  for (const id of ids) {
    expect(id).toMatch(firingId(name));
    expect((await h.client.result(id)).status).toBe('completed');
  }
});

it('skips a firing while its item waits for a review (overlap skip)', async () => {
  const name = scheduleName('skip');
  await h.client.schedules.create(name, REVIEWED, { cron: NEVER, overlap: 'skip' });
  const first = await h.client.schedules.trigger(name);
  if (first.outcome !== 'started') throw new Error(`not started: ${JSON.stringify(first)}`);
  await waitingReview(first.itemId);

  expect(await h.client.schedules.trigger(name)).toEqual({ outcome: 'skipped', running: [first.itemId] });
  const detail = await h.client.schedules.describe(name);
  expect(detail).toEqual(expect.objectContaining({ firings: 1, skippedOverlap: 1, runningItems: [first.itemId] }));
  expect(detail.recentFirings.map((f) => [f.itemId, f.status])).toEqual([[first.itemId, 'waiting_review']]);

  await h.client.approve(first.itemId, 'only');
  expect((await h.client.result(first.itemId)).status).toBe('completed');
  expect((await h.client.schedules.describe(name)).firings).toBe(1);
});

it('buffers one firing until its item ends, then starts it (overlap buffer)', async () => {
  const name = scheduleName('buffer');
  await h.client.schedules.create(name, REVIEWED, { cron: NEVER, overlap: 'buffer' });
  const first = await h.client.schedules.trigger(name);
  if (first.outcome !== 'started') throw new Error(`not started: ${JSON.stringify(first)}`);
  // At once: the trigger waits for a second of its own, so the buffered item's id is not the first's.
  expect(await h.client.schedules.trigger(name)).toEqual({ outcome: 'buffered', running: [first.itemId] });
  // One firing waits already: a third is dropped.
  expect(await h.client.schedules.trigger(name)).toEqual({ outcome: 'skipped', running: [first.itemId] });
  await waitingReview(first.itemId);
  expect(await h.client.schedules.describe(name)).toEqual(expect.objectContaining({ firings: 1, buffered: 1 }));

  await h.client.approve(first.itemId, 'only');
  const detail = await fired(name, 2);
  const second = detail.recentFirings[0]!.itemId;
  expect(second).toMatch(firingId(name));
  expect(second).not.toBe(first.itemId);
  await waitingReview(second);
  await h.client.approve(second, 'only');
  expect((await h.client.result(second)).status).toBe('completed');
  expect((await h.client.result(first.itemId)).status).toBe('completed');
});

it('does not fire by time while paused (a trigger fires it), shows its note, and fires again once unpaused', async () => {
  const name = scheduleName('paused');
  const created = await h.client.schedules.create(name, QUICK, { cron: '@every 2s', paused: true, note: 'holiday' });
  expect(created).toEqual(expect.objectContaining({ paused: true, note: 'holiday' }));
  // Two of its times pass with nothing started.
  const second = Date.parse(created.nextFirings[1]!);
  await eventually(async () => (Date.now() > second + 1_000 ? true : undefined), 10_000, 'two intervals');
  expect(await h.client.schedules.describe(name)).toEqual(
    expect.objectContaining({ paused: true, note: 'holiday', firings: 0, recentFirings: [] }),
  );
  const listed = await eventually(async () => (await h.client.schedules.list()).find((s) => s.name === name));
  expect(listed).toEqual(expect.objectContaining({ pipeline: 'sched-quick', paused: true, note: 'holiday' }));

  // A trigger fires it all the same.
  const triggered = await h.client.schedules.trigger(name);
  if (triggered.outcome !== 'started') throw new Error(`not started: ${JSON.stringify(triggered)}`);
  expect((await h.client.result(triggered.itemId)).status).toBe('completed');

  await h.client.schedules.unpause(name, 'back');
  const detail = await fired(name, 2);
  expect(detail).toEqual(expect.objectContaining({ paused: false, note: 'back' }));
  await h.client.schedules.pause(name, 'done');
  expect(await h.client.schedules.describe(name)).toEqual(expect.objectContaining({ paused: true, note: 'done' }));
});

it('stores a large input once in the blob store: the schedule holds its reference, each item reads it', async () => {
  const name = scheduleName('large');
  // The scripted stage outputs what the input's script says: the item has read the whole input.
  const text = 'x'.repeat(10_000);
  const input = { script: { only: [{ output: { text } }] } };
  await h.client.schedules.create(name, QUICK, { cron: NEVER, input });
  const action = (await h.temporal.schedule.getHandle(name).describe()).action;
  const stored = (action.args as [{ input: unknown }])[0].input;
  expect(isBlobRef(stored)).toBe(true);
  const triggered = await h.client.schedules.trigger(name);
  if (triggered.outcome !== 'started') throw new Error(`not started: ${JSON.stringify(triggered)}`);
  expect((await h.client.result(triggered.itemId)).status).toBe('completed');
  const artefact = (await h.client.getState(triggered.itemId)).stages.only!.artefact;
  expect(await h.client.readArtefact(artefact)).toEqual({ text });
});

it('refuses what cannot work, each in one clear error', async () => {
  const refusal = (promise: Promise<unknown>) =>
    promise.then(
      () => undefined,
      (error: unknown) => error as TreadleError,
    );
  const create = (name: string, spec: unknown, options: Record<string, unknown> = {}) =>
    refusal(h.client.schedules.create(name, spec, { cron: NEVER, ...options }));
  const name = scheduleName('refusals');

  const invalid = await create(name, { name: 'broken', stages: [{ name: 'a', run: 'nosuch' }, { name: 'a' }] });
  expect(invalid).toEqual(expect.objectContaining({ code: 'invalid_pipeline' }));
  expect(invalid!.problems.length).toBeGreaterThanOrEqual(2);
  expect(invalid!.message).toMatch(/^pipeline broken is invalid:\n {2}- /);
  expect(await create('no good', QUICK)).toEqual(
    expect.objectContaining({ code: 'invalid_input', message: expect.stringContaining('cannot name a schedule') }),
  );
  expect(await create(name, QUICK, { cron: '0 0 32 * *' })).toEqual(
    expect.objectContaining({
      code: 'invalid_input',
      message: `schedule ${name} is invalid: DayOfMonth is not in range [1-31]`,
    }),
  );
  expect(await create(name, QUICK, { overlap: 'never' })).toEqual(
    expect.objectContaining({ code: 'invalid_input', message: 'overlap must be skip or buffer, got never' }),
  );
  expect(await create(name, QUICK, { input: { at: new Date() } })).toEqual(
    expect.objectContaining({ code: 'invalid_input', message: expect.stringContaining('input.at is a Date') }),
  );
  // Nothing was made by the refusals; a name in use is one too.
  expect(await refusal(h.client.schedules.describe(name))).toEqual(expect.objectContaining({ code: 'not_found' }));
  await h.client.schedules.create(name, QUICK, { cron: NEVER });
  expect(await create(name, QUICK)).toEqual(
    expect.objectContaining({ code: 'invalid_input', message: expect.stringContaining(`"${name}" exists already`) }),
  );

  const unknown = `nosuch-${h.taskQueue}`;
  for (const call of [
    () => h.client.schedules.describe(unknown),
    () => h.client.schedules.pause(unknown),
    () => h.client.schedules.unpause(unknown),
    () => h.client.schedules.trigger(unknown),
    () => h.client.schedules.delete(unknown),
  ])
    expect(await refusal(call())).toEqual(
      expect.objectContaining({ code: 'not_found', message: `no schedule named "${unknown}" in namespace default` }),
    );
});
