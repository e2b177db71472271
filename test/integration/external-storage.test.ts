/**
 * The SDK's claim-check (`ExternalStorage`, experimental in @temporalio/common 1.24) backed by Treadle's blob
 * store, on the real dev server: the safety net for payloads that bypass Treadle's own artefact references.
 *
 * Cases:
 * - without it, a `workItem` started with a 3 MB inline input is refused by the server (2 MB payload limit);
 * - with it on the worker and the client, the same start (plus a 1 MB `with:` config and a 400 KB inline
 *   approve-with-edits update) completes, every stage sees the full values, and the history stays a few KB;
 *   the started event's input is an `ExternalStorageReference` naming the blob;
 * - the history replays with the driver configured;
 * - the driver round-trips binary metadata and refuses a blob whose content does not match its reference.
 */
import { Client, Connection } from '@temporalio/client';
import { type Payload } from '@temporalio/common';
import { NativeConnection, Worker } from '@temporalio/worker';
import { mkdtempSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Registry, type StageContext } from '../../src/activities/registry';
import { TreadleClient } from '../../src/client';
import { pipeline } from '../../src/kinds/builder';
import type { Json } from '../../src/model/shapes';
import type { WorkItemInput } from '../../src/model/state';
import { FileBlobStore, MemoryBlobStore } from '../../src/storage/blob-store';
import { BLOB_STORE_DRIVER_NAME, blobStoreDriver, treadleExternalStorage } from '../../src/storage/external-storage';
import { resolveReviewUpdate } from '../../src/workflow-kit/messages';
import { createWorker, defaultRegistry } from '../../src/worker';
import { eventually, HARNESS_ANSWER_WAIT_MS, testAddress } from '../support/harness';

const MB = 1024 * 1024;
const THRESHOLD = 256 * 1024;

/** A stage that reports, by size, what it received: the work item input, its `with:` config, its upstream. */
function measuringRegistry(): Registry {
  return defaultRegistry().merge(
    new Registry().stage('measure', async (ctx: StageContext) => ({
      outcome: 'completed' as const,
      artefact: {
        inputChars: JSON.stringify(ctx.input ?? null).length,
        configChars: ctx.config === undefined ? 0 : JSON.stringify(ctx.config).length,
        upstreamChars: Object.values(ctx.upstream).reduce<number>((n, a) => n + JSON.stringify(a ?? null).length, 0),
      },
      summary: 'measured',
    })),
  );
}

let blobs: FileBlobStore;
let nativeConnection: NativeConnection;
let connection: Connection;
let worker: Worker;
let running: Promise<void>;
let client: Client;
let plain: Client;
let treadle: TreadleClient;
const taskQueue = `extstore-${Math.random().toString(36).slice(2, 10)}`;

beforeAll(async () => {
  const address = testAddress();
  blobs = new FileBlobStore(mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'extstore-blobs-')));
  const externalStorage = treadleExternalStorage(blobs, THRESHOLD);
  nativeConnection = await NativeConnection.connect({ address });
  worker = await createWorker({
    connection: nativeConnection,
    taskQueue,
    registry: measuringRegistry(),
    blobs,
    workflowBundle: { codePath: process.env.TREADLE_TEST_BUNDLE! },
    // The wiring under test: the worker's data converter offloads and resolves payloads.
    worker: { dataConverter: { externalStorage } },
  });
  running = worker.run();
  connection = await Connection.connect({ address });
  client = new Client({ connection, dataConverter: { externalStorage } });
  plain = new Client({ connection });
  treadle = new TreadleClient(client, { taskQueue, blobs, answerWaitMs: HARNESS_ANSWER_WAIT_MS });
});

afterAll(async () => {
  worker?.shutdown();
  await running;
  await connection?.close();
  await nativeConnection?.close();
});

/** The server's own count of the history's size. */
async function historySizeBytes(workflowId: string): Promise<number> {
  const description = await client.workflow.getHandle(workflowId).describe();
  return Number(description.raw.workflowExecutionInfo?.historySizeBytes);
}

function text(bytes: Uint8Array | null | undefined): string {
  return Buffer.from(bytes ?? new Uint8Array()).toString('utf8');
}

/** A work item's input built by hand, so that nothing is offloaded by Treadle before the SDK sees it. */
function inlineStart(
  id: string,
  spec: ReturnType<typeof pipeline>,
  input: Json,
): { taskQueue: string; workflowId: string; args: [WorkItemInput] } {
  return { taskQueue, workflowId: id, args: [{ pipeline: spec.toJSON(), input, itemId: id }] };
}

it('is needed: without it the server refuses a 3 MB workflow input', async () => {
  const spec = pipeline('extstore-refused').stage('only', 'measure');
  const refused = await plain.workflow
    .start('workItem', inlineStart(`refused-${taskQueue}`, spec, { doc: 'x'.repeat(3 * MB) }))
    .then(
      () => undefined,
      (error: Error) => error,
    );
  expect((refused?.cause as Error | undefined)?.message).toMatch(/Blob data size exceeds limit/);
});

it('carries a 3 MB input, a 1 MB config and a 400 KB update argument by reference, with a history of a few KB', async () => {
  const id = `big-${taskQueue}`;
  const spec = pipeline('extstore-big')
    .stage('draft', 'measure', { with: { glossary: 'g'.repeat(MB) } })
    .reviewPolicy('draft', 'always')
    .stage('publish', 'measure')
    .dependency('publish', 'draft');
  await client.workflow.start('workItem', inlineStart(id, spec, { doc: 'x'.repeat(3 * MB) }));
  await eventually(
    async () => ((await treadle.getState(id)).status === 'waiting_review' ? true : undefined),
    40_000,
    'the review',
  );

  // An inline 400 KB edit through the update (over the 256 KiB threshold, under the workflow's own 512 KB
  // cap on inline edits), bypassing TreadleClient.approveWithEdits's own offloading.
  const edit = { text: 'e'.repeat(400 * 1024) };
  const accepted = await client.workflow.getHandle(id).executeUpdate(resolveReviewUpdate, {
    args: [{ stage: 'draft', outcome: { kind: 'approve_with_edits', artefact: edit }, reviewer: 'ann' }],
  });
  expect(accepted.outcome).toBe('approve_with_edits');
  expect((await treadle.result(id)).status).toBe('completed');

  const state = await treadle.getState(id);
  const draft = (await treadle.readArtefact(state.stages.draft!.attempts[0]!.artefact)) as {
    inputChars: number;
    configChars: number;
  };
  expect(draft.inputChars).toBe(JSON.stringify({ doc: 'x'.repeat(3 * MB) }).length);
  expect(draft.configChars).toBe(JSON.stringify({ glossary: 'g'.repeat(MB) }).length);
  const publish = (await treadle.readArtefact(state.stages.publish!.artefact)) as { upstreamChars: number };
  expect(publish.upstreamChars).toBe(JSON.stringify(edit).length);

  // More than 4 MB moved through this execution; the server's history holds references only.
  const bytes = await historySizeBytes(id);
  expect(bytes).toBeLessThan(64 * 1024);
  process.stdout.write(`history of a work item that moved 3 MB + 1 MB + 400 KB through Temporal: ${bytes} bytes\n`);

  // What the history (and `temporal workflow show`, and the Web UI) shows for the input: a reference.
  const history = await client.workflow.getHandle(id).fetchHistory();
  const input = history.events![0]!.workflowExecutionStartedEventAttributes!.input!.payloads![0]! as Payload;
  expect(text(input.metadata!.encoding)).toBe('json/protobuf');
  expect(text(input.metadata!.messageType)).toBe('temporal.api.sdk.v1.ExternalStorageReference');
  const reference = JSON.parse(text(input.data)) as { driverName: string; claimData: Record<string, string> };
  expect(reference.driverName).toBe(BLOB_STORE_DRIVER_NAME);
  expect(reference.claimData.ref).toMatch(/^sha256:[0-9a-f]{64}$/);
  expect(reference.claimData['meta:encoding']).toBe('json/plain');
  // The blob is the payload's JSON itself, readable without Temporal.
  const stored = JSON.parse((await blobs.get(reference.claimData.ref!)).toString('utf8')) as WorkItemInput;
  expect((stored.input as { doc: string }).doc).toHaveLength(3 * MB);

  // Treadle's own references keep the result small, so a client without the driver still reads it (one that
  // met an offloaded payload would throw ExternalStorageNotConfiguredError instead).
  expect(((await plain.workflow.getHandle(id).result()) as { status: string }).status).toBe('completed');

  // Replay resolves the references through the driver (a replay worker never stores). Without the driver it
  // fails with ExternalStorageNotConfiguredError (TMPRL1105): recorded histories need their blobs.
  const bundle = { codePath: process.env.TREADLE_TEST_BUNDLE! };
  await Worker.runReplayHistory(
    { workflowBundle: bundle, dataConverter: { externalStorage: treadleExternalStorage(blobs, THRESHOLD) } },
    history,
    id,
  );
});

describe('blobStoreDriver', () => {
  it('round-trips text and binary metadata, keeping the blob to the payload data', async () => {
    const store = new MemoryBlobStore();
    const driver = blobStoreDriver(store);
    const payload: Payload = {
      metadata: { encoding: Buffer.from('binary/encrypted'), 'encryption-key-id': Buffer.from([0, 255, 7]) },
      data: Buffer.from('secret bytes'),
    };
    const [claim] = await driver.store(
      { target: { kind: 'workflow', namespace: 'default', id: 'w', type: 'workItem' } },
      [payload],
    );
    expect(claim!.claimData).toMatchObject({
      'meta:encoding': 'binary/encrypted',
      'meta64:encryption-key-id': 'AP8H',
      bytes: '12',
    });
    expect((await store.get(claim!.claimData.ref!)).toString()).toBe('secret bytes');
    const [back] = await driver.retrieve({}, [claim!]);
    expect(Buffer.from(back!.data!).toString()).toBe('secret bytes');
    expect(Buffer.from(back!.metadata!['encryption-key-id']!)).toEqual(Buffer.from([0, 255, 7]));
    expect(text(back!.metadata!.encoding)).toBe('binary/encrypted');
  });

  it('refuses a blob whose content does not match its reference', async () => {
    const dir = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'extstore-corrupt-'));
    const store = new FileBlobStore(dir);
    const driver = blobStoreDriver(store);
    const [claim] = await driver.store({}, [
      { metadata: { encoding: Buffer.from('json/plain') }, data: Buffer.from('"original"') },
    ]);
    const hex = claim!.claimData.ref!.slice('sha256:'.length);
    writeFileSync(path.join(dir, hex.slice(0, 2), hex.slice(2)), '"tampered"');
    await expect(driver.retrieve({}, [claim!])).rejects.toThrow(/the store is corrupt/);
  });
});
