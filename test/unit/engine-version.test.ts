/**
 * The engine version a worker starts items on (docs/versioning.md): the newest by default, pinned to an
 * older one with `TREADLE_ENGINE_VERSION` (or `engineVersion`) while a deploy that raises it rolls out.
 */
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { loadConfig } from '../../src/config';
import { createActivities } from '../../src/activities';
import { PREPARE_PIPELINE_ACTIVITY } from '../../src/model/activity-types';
import { ENGINE_VERSION, type PreparePipelineResult } from '../../src/model/state';
import { MemoryBlobStore } from '../../src/storage/blob-store';
import { defaultRegistry } from '../../src/worker';

const prepare = async (engineVersion?: number | (() => number)): Promise<PreparePipelineResult> => {
  const activities = createActivities({
    registry: defaultRegistry(),
    blobs: new MemoryBlobStore(),
    ...(engineVersion !== undefined ? { engineVersion } : {}),
  });
  const env = new MockActivityEnvironment({}, { logger: new DefaultLogger('ERROR') });
  return (await env.run(
    activities[PREPARE_PIPELINE_ACTIVITY] as (input: { pipeline: unknown }) => Promise<PreparePipelineResult>,
    { pipeline: { name: 'p', stages: [{ name: 'a', run: 'scripted' }] } },
  )) as PreparePipelineResult;
};

test('TREADLE_ENGINE_VERSION is the newest engine unless pinned to an older one; anything else is refused, naming the range', () => {
  expect(loadConfig({}).engineVersion).toBe(ENGINE_VERSION);
  expect(loadConfig({ TREADLE_ENGINE_VERSION: ' 3 ' }).engineVersion).toBe(3);
  for (const bad of ['0', String(ENGINE_VERSION + 1), '3.5', 'newest']) {
    expect(() => loadConfig({ TREADLE_ENGINE_VERSION: bad })).toThrow(
      `TREADLE_ENGINE_VERSION must be a whole number from 1 to ${ENGINE_VERSION} (this worker's newest engine), got "${bad}"`,
    );
  }
});

test('the prepare step records the engine the worker starts items on', async () => {
  expect(await prepare()).toMatchObject({ ok: true, engine: ENGINE_VERSION });
  expect(await prepare(3)).toMatchObject({ ok: true, engine: 3 });
  expect(() =>
    createActivities({ registry: defaultRegistry(), blobs: new MemoryBlobStore(), engineVersion: ENGINE_VERSION + 1 }),
  ).toThrow(`engineVersion must be a whole number from 1 to ${ENGINE_VERSION}`);
});

it('asks an engine version given as a function at every prepare (runWorker lowers it until the attributes are confirmed)', async () => {
  let engine = 6;
  const activities = createActivities({
    registry: defaultRegistry(),
    blobs: new MemoryBlobStore(),
    engineVersion: () => engine,
  });
  const env = new MockActivityEnvironment({}, { logger: new DefaultLogger('ERROR') });
  const run = () =>
    env.run(activities[PREPARE_PIPELINE_ACTIVITY] as (input: { pipeline: unknown }) => Promise<PreparePipelineResult>, {
      pipeline: { name: 'p', stages: [{ name: 'a', run: 'scripted' }] },
    });
  expect(await run()).toMatchObject({ ok: true, engine: 6 });
  engine = ENGINE_VERSION;
  expect(await run()).toMatchObject({ ok: true, engine: ENGINE_VERSION });
  engine = ENGINE_VERSION + 1;
  await expect(run()).rejects.toThrow(`engineVersion must be a whole number from 1 to ${ENGINE_VERSION}`);
});
