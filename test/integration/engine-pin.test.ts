/**
 * A `treadle worker` on a namespace where `TreadleDecisionAt` is missing and cannot be registered (its
 * server's Datetime columns are all taken) starts items on engine 6, says so in one stderr line, and its
 * items run: engine 7 would have every one's upsert rejected and its workflow task failed.
 */
import { Client, Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time';
import { spawn, type ChildProcess } from 'node:child_process';
import { encodeSearchAttributeIndexedValueType } from '@temporalio/common/lib/search-attributes';
import { TreadleClient } from '../../src/client';
import { SEARCH_ATTRIBUTE_DEFINITIONS, TreadleDecisionAt } from '../../src/model/search-attributes';
import { FAILED_WORKFLOW_ENGINE } from '../../src/model/state';
import { eventually } from '../support/harness';
import { TREADLE_BIN } from '../support/cli';

const address = process.env.TREADLE_TEST_ADDRESS!;
const namespace = `no-decision-at-${Math.random().toString(36).slice(2, 8)}`;
const taskQueue = `pin-${Math.random().toString(36).slice(2, 8)}`;
let connection: Connection;
let worker: ChildProcess | undefined;
let stderr = '';

beforeAll(async () => {
  connection = await Connection.connect({ address });
  await connection.workflowService.registerNamespace({
    namespace,
    workflowExecutionRetentionPeriod: msToTs('1 day'),
  });
  // Treadle's other attributes, and fillers for every Datetime column SQL visibility has.
  const types = { Keyword: 'KEYWORD', KeywordList: 'KEYWORD_LIST', Datetime: 'DATETIME' } as const;
  const others = Object.entries(SEARCH_ATTRIBUTE_DEFINITIONS).filter(([name]) => name !== TreadleDecisionAt.name);
  await eventually(async () => {
    await connection.operatorService.addSearchAttributes({
      namespace,
      searchAttributes: Object.fromEntries([
        ...others.map(([name, type]) => [name, encodeSearchAttributeIndexedValueType(types[type])!]),
        ...['FillerAt1', 'FillerAt2', 'FillerAt3'].map((name) => [
          name,
          encodeSearchAttributeIndexedValueType('DATETIME')!,
        ]),
      ]),
    });
    return true;
  }, 30_000);
  await expect(
    connection.operatorService.addSearchAttributes({
      namespace,
      searchAttributes: { [TreadleDecisionAt.name]: encodeSearchAttributeIndexedValueType('DATETIME')! },
    }),
  ).rejects.toThrow();
}, 60_000);

afterAll(async () => {
  worker?.kill('SIGINT');
  await connection?.close();
});

test('the worker starts items on engine 6, with one stderr line, and they wait for review as they should', async () => {
  worker = spawn(process.execPath, [TREADLE_BIN, 'worker'], {
    env: { ...process.env, TEMPORAL_ADDRESS: address, TEMPORAL_NAMESPACE: namespace, TREADLE_TASK_QUEUE: taskQueue },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  worker.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  await eventually(async () => (stderr.includes('treadle worker: ready') ? true : undefined), 60_000, 'the ready line');
  const pinned = stderr.split('\n').filter((line) => line.includes('items start on engine'));
  expect(pinned).toHaveLength(1);
  expect(pinned[0]).toContain(`items start on engine ${FAILED_WORKFLOW_ENGINE} until a restart finds them`);

  const temporal = new Client({ connection, namespace });
  const client = new TreadleClient(temporal, { taskQueue });
  const id = `pinned-${taskQueue}`;
  await client.start(
    { name: 'pinned', stages: [{ name: 'draft', run: 'scripted', review_policy: 'always' }] },
    {},
    { id },
  );
  await eventually(async () => ((await client.getState(id)).status === 'waiting_review' ? true : undefined), 30_000);
  const history = await temporal.workflow.getHandle(id).fetchHistory();
  const failedTasks = (history.events ?? []).filter((e) => e.workflowTaskFailedEventAttributes);
  expect(failedTasks).toEqual([]);
  expect(
    (await temporal.workflow.getHandle(id).describe()).typedSearchAttributes.get(TreadleDecisionAt),
  ).toBeUndefined();
  await client.approve(id, 'draft', { reviewer: 'pin-test' });
  expect((await client.result(id)).status).toBe('completed');
}, 120_000);
