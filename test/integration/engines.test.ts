/**
 * `treadle engines` and TreadleClient.openItemsByEngine on the dev server: an item started on engine 4 and
 * one on the live engine, both waiting for review on one task queue, are counted under their versions (the
 * engine-4 item served by a live worker, as after a deploy); once both finish, none is open. Also the CLI's
 * table and JSON.
 */
import { eventually, startHarness, type Harness } from '../support/harness';
import { runTreadle } from '../support/cli';
import { draftPublish } from '../support/pipelines';
import { ENGINE_VERSION } from '../../src/model/state';
import type { EngineCount } from '../../src/client/engine-versions';

let live: Harness | undefined;

afterAll(async () => {
  await live?.shutdown();
});

const waitingForReview = async (h: Harness, id: string): Promise<void> => {
  await eventually(async () => ((await h.client.getState(id)).status === 'waiting_review' ? true : undefined));
};

it('counts open work items per engine version, across a deploy, until they finish', async () => {
  const old = await startHarness({ engineVersion: 4 });
  const taskQueue = old.taskQueue;
  const oldId = old.id('engine-4');
  try {
    await old.client.start(draftPublish({ maxAttempts: 1 }, 'always'), null, { id: oldId });
    await waitingForReview(old, oldId);
  } finally {
    await old.shutdown();
  }
  // The deploy: a live worker takes over the queue and starts new items on the live engine.
  live = await startHarness({ taskQueue });
  const h = live;
  const newId = h.id('engine-live');
  await h.client.start(draftPublish({ maxAttempts: 1 }, 'always'), null, { id: newId });
  await waitingForReview(h, newId);

  const counts = await eventually(async () => {
    const c = await h.client.openItemsByEngine({ taskQueue });
    return c.reduce((n, e) => n + e.openItems, 0) === 2 ? c : undefined;
  });
  expect(counts).toEqual([
    { version: ENGINE_VERSION, openItems: 1, oldestStart: expect.any(String) as string, examples: [newId] },
    { version: 4, openItems: 1, oldestStart: expect.any(String) as string, examples: [oldId] },
  ]);

  const json = await runTreadle(h, ['engines', '--task-queue', taskQueue, '--json']);
  expect(json.code).toBe(0);
  expect((JSON.parse(json.stdout) as EngineCount[]).map((c) => [c.version, c.openItems])).toEqual([
    [ENGINE_VERSION, 1],
    [4, 1],
  ]);
  const table = await runTreadle(h, ['engines', '--task-queue', taskQueue]);
  expect(table.stdout).toMatch(new RegExp(`${ENGINE_VERSION} \\(live\\)\\s+1\\s+.*${newId}`));
  expect(table.stdout).toMatch(new RegExp(`\\n4\\s+1\\s+.*${oldId}`));

  // The engine-4 item finishes on the live worker; then nothing of either version is open.
  for (const id of [oldId, newId]) {
    await h.client.approve(id, 'draft');
    expect((await h.client.result(id)).status).toBe('completed');
  }
  await eventually(async () => ((await h.client.openItemsByEngine({ taskQueue })).length === 0 ? true : undefined));
  const none = await runTreadle(h, ['engines', '--task-queue', taskQueue]);
  expect(none.stdout).toMatch(/^no open work items\n/);
}, 120_000);
