/**
 * Correlation ids and tracing (seed 003) on the real server: one UUID per run on its state, search
 * attribute, activity inputs and model call records; with tracing on, the client's start, the workflow, its
 * activities and the model calls are spans of one trace per work item, exported through the span processor
 * (here an in-memory exporter).
 */
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, NativeConnection, type Worker } from '@temporalio/worker';
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { mkdtempSync } from 'node:fs';
import path from 'node:path';
import { TreadleClient } from '../../src/client';
import { TreadleCorrelationId } from '../../src/model/search-attributes';
import { FileBlobStore } from '../../src/storage/blob-store';
import { createTracing, WORKFLOW_TRACING_MODULE, type TreadleTracing } from '../../src/observability/tracing';
import { createWorker } from '../../src/worker';
import { HARNESS_ANSWER_WAIT_MS, testAddress } from '../support/harness';

const quiet = {
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  log: () => undefined,
  error: (m: string) => process.stderr.write(`${m}\n`),
};
const exporter = new InMemorySpanExporter();
let tracing: TreadleTracing;
let worker: Worker;
let running: Promise<void>;
let client: TreadleClient;
let connections: { close(): Promise<void> }[] = [];
const taskQueue = `tracing-${Math.random().toString(36).slice(2, 10)}`;

beforeAll(async () => {
  tracing = createTracing({ spanProcessor: new SimpleSpanProcessor(exporter), serviceName: 'treadle-test' });
  const blobs = new FileBlobStore(mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'blobs-')));
  // Workflow spans need the tracing interceptor in the bundle (a worker that bundles at start adds it itself).
  const bundle = await bundleWorkflowCode({
    workflowsPath: require.resolve('../../src/workflows'),
    workflowInterceptorModules: [WORKFLOW_TRACING_MODULE],
    logger: quiet,
  });
  const nativeConnection = await NativeConnection.connect({ address: testAddress() });
  worker = await createWorker({ connection: nativeConnection, taskQueue, blobs, workflowBundle: bundle, tracing });
  running = worker.run();
  const connection = await Connection.connect({ address: testAddress() });
  connections = [connection, nativeConnection];
  client = new TreadleClient(new Client({ connection, plugins: [tracing.plugin] }), {
    taskQueue,
    blobs,
    answerWaitMs: HARNESS_ANSWER_WAIT_MS,
  });
}, 120_000);
afterAll(async () => {
  worker?.shutdown();
  await running;
  for (const c of connections) await c.close();
  await tracing?.shutdown();
});

const spec = {
  name: 'traced',
  stages: [
    { name: 'fetch', run: 'scripted' },
    {
      name: 'classify',
      run: 'llm',
      agent: 'scripted',
      depends_on: ['fetch'],
      with: { prompt: 'Classify {{ input.subject }}' },
    },
  ],
};

it('gives each run a correlation id, on its state, search attribute, activity inputs and call records', async () => {
  const started = await client.start(
    spec,
    { subject: 'invoice', agent_replies: { classify: ['finance'] } },
    { id: `traced-${taskQueue}-1` },
  );
  expect((await client.result(started.id)).status).toBe('completed');
  const state = await client.getState(started.id);
  expect(state.correlationId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  const description = await client.client.workflow.getHandle(started.id).describe();
  expect(description.typedSearchAttributes.get(TreadleCorrelationId)).toBe(state.correlationId);
  const calls = state.stages['classify']!.attempts.flatMap((a) => a.calls ?? []);
  expect(calls.length).toBe(1);
  expect(calls[0]!.runCorrelationId).toBe(state.correlationId);
  const history = (await client.client.workflow.getHandle(started.id).fetchHistory()).events!;
  const activityInputs = history
    .filter((e) => e.activityTaskScheduledEventAttributes)
    .map((e) => Buffer.from(e.activityTaskScheduledEventAttributes!.input!.payloads![0]!.data!).toString());
  expect(activityInputs.length).toBeGreaterThanOrEqual(2);
  for (const input of activityInputs) expect(JSON.parse(input).correlationId).toBe(state.correlationId);
}, 60_000);

it('traces a run as one trace: the client start, the workflow, each activity and the model call', async () => {
  exporter.reset();
  const started = await client.start(
    spec,
    { subject: 'meeting', agent_replies: { classify: ['calendar'] } },
    { id: `traced-${taskQueue}-2` },
  );
  expect((await client.result(started.id)).status).toBe('completed');
  const spans = await waitForSpans(
    (all) =>
      all.some((s) => s.name === 'treadle.model_call') &&
      all.some((s) => s.name === 'RunActivity:llm') &&
      all.some((s) => s.name.startsWith('RunWorkflow')),
  );
  // The client's start is the root; everything of the run is in its trace, and nothing else is.
  const root = spans.find(
    (s) => s.name === 'StartWorkflow:workItem' && s.attributes['temporalWorkflowId'] === started.id,
  )!;
  expect(root).toBeDefined();
  const ofRun = spans.filter((s) => s.spanContext().traceId === root.spanContext().traceId);
  const names = ofRun.map((s) => s.name);
  expect(names).toEqual(
    expect.arrayContaining([
      'StartWorkflow:workItem',
      'RunWorkflow:workItem',
      'StartActivity:scripted',
      'RunActivity:scripted',
      'StartActivity:llm',
      'RunActivity:llm',
      'treadle.model_call',
    ]),
  );
  // Every activity of the run is in it (the local activity that validates the spec too).
  const history = (await client.client.workflow.getHandle(started.id).fetchHistory()).events!;
  expect(ofRun.filter((s) => s.name.startsWith('RunActivity:')).length).toBe(
    history.filter((e) => e.activityTaskCompletedEventAttributes).length + 1,
  );
  const model = ofRun.find((s) => s.name === 'treadle.model_call')!;
  const runActivity = ofRun.find((s) => s.name === 'RunActivity:llm')!;
  expect(model.parentSpanId).toBe(runActivity.spanContext().spanId);
  const state = await client.getState(started.id);
  expect(model.attributes).toMatchObject({
    'treadle.provider': 'scripted',
    'treadle.correlation_id': state.correlationId,
  });
}, 60_000);

async function waitForSpans(ready: (spans: ReadableSpan[]) => boolean): Promise<ReadableSpan[]> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const spans = exporter.getFinishedSpans();
    if (ready(spans) || Date.now() > deadline) return spans;
    await new Promise((r) => setTimeout(r, 200));
  }
}
