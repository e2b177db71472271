/**
 * A new stage kind is its folder plus one registration on each side (docs/stage-kinds.md): the `tally` kind
 * in test/fixtures/kinds/tally/ registers its workflow side (bundled through its own entry, which imports
 * src/workflows unchanged) and its worker side (config check, activity), and a pipeline runs it end to end
 * on the dev server like any stage: gate-free, its artefact the sum of its activity's results.
 */
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, NativeConnection, type Worker } from '@temporalio/worker';
import { mkdtempSync } from 'node:fs';
import path from 'node:path';
import { TreadleClient } from '../../src/client';
import { validatePipeline } from '../../src/kinds/pipeline';
import { defaultRegistry } from '../../src/worker/registries';
import { FileBlobStore } from '../../src/storage/blob-store';
import { createWorker } from '../../src/worker';
import { TALLY_STEP_ACTIVITY } from '../fixtures/kinds/tally/kind';
// Registers the kind's worker side in the table of kinds (src/kinds/index.ts).
import '../fixtures/kinds/tally/worker/kind';
import { HARNESS_ANSWER_WAIT_MS, testAddress } from '../support/harness';

const quiet = {
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  log: () => undefined,
  error: (m: string) => process.stderr.write(`${m}\n`),
};
const taskQueue = `test-kind-${Math.random().toString(36).slice(2, 10)}`;
let worker: Worker;
let running: Promise<void>;
let client: TreadleClient;
let temporal: Client;
const closing: { close(): Promise<void> }[] = [];

beforeAll(async () => {
  const blobs = new FileBlobStore(mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'blobs-')));
  // The fixture's bundle entry: every Treadle workflow plus the kind's workflow side.
  const bundle = await bundleWorkflowCode({
    workflowsPath: require.resolve('../fixtures/kinds/tally/workflows'),
    logger: quiet,
  });
  const nativeConnection = await NativeConnection.connect({ address: testAddress() });
  // No registry given: the worker's default one, which names every kind in the table, the fixture's too.
  worker = await createWorker({ connection: nativeConnection, taskQueue, blobs, workflowBundle: bundle });
  running = worker.run();
  const connection = await Connection.connect({ address: testAddress() });
  closing.push(connection, nativeConnection);
  temporal = new Client({ connection });
  client = new TreadleClient(temporal, { taskQueue, blobs, answerWaitMs: HARNESS_ANSWER_WAIT_MS });
}, 120_000);

afterAll(async () => {
  worker?.shutdown();
  await running;
  for (const c of closing) await c.close();
});

const spec = (count: unknown) => ({
  name: 'tally-kind',
  stages: [
    { name: 'count', run: 'tally', with: { count } },
    { name: 'after', run: 'scripted', dependsOn: ['count'] },
  ],
});

it('runs a kind registered from test/fixtures end to end: its workflow side schedules its own activity', async () => {
  const id = `tally-${taskQueue}`;
  await client.start(spec(3), {}, { id });
  const result = await client.result(id);
  expect(result.status).toBe('completed');
  expect(result.artefacts.count).toEqual({ total: 60, steps: 3 });
  // The downstream stage received the kind's artefact like any stage's.
  const { stages } = await client.getState(id);
  expect((stages.after!.artefact as { upstream: Record<string, unknown> }).upstream.count).toEqual({
    total: 60,
    steps: 3,
  });
  // The kind ran in workflow code: three of its activities, and no activity named after the kind.
  const history = await temporal.workflow.getHandle(id).fetchHistory();
  const types = (history.events ?? []).flatMap((e) => e.activityTaskScheduledEventAttributes?.activityType?.name ?? []);
  expect(types.filter((t) => t === TALLY_STEP_ACTIVITY)).toHaveLength(3);
  expect(types).not.toContain('tally');
});

it("checks the kind's with: through the table, with the kind's own message", () => {
  const bad = validatePipeline(spec('many'), defaultRegistry().names());
  expect(bad.ok).toBe(false);
  expect(JSON.stringify(bad)).toContain('stage count: with.count: must be a whole number from 1 to 10');
  expect(validatePipeline(spec(3), defaultRegistry().names()).ok).toBe(true);
});
