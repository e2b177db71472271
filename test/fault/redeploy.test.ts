/**
 * A worker redeployed with changed workflow code. Cases: every recorded history (test/replay/histories)
 * replays against a compatible variant (a log line and an extra query); an item started on the current
 * code finishes on a worker running the compatible variant, replaying its history from the start; an
 * incompatible variant (a timer before the first command) fails the replay of every recorded history with
 * a DeterminismViolationError, which is what the replay test exists to catch before a deploy.
 */
import { bundleWorkflowCode, Worker } from '@temporalio/worker';
import { DeterminismViolationError } from '@temporalio/workflow';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { eventually, startHarness, type Harness } from '../support/harness';
import { draftPublish } from '../support/pipelines';

const HISTORIES = path.join(__dirname, '..', 'replay', 'histories');
const files = readdirSync(HISTORIES).filter((f) => f.endsWith('.json'));
// Each file's name is the workflow id it ran under (a TDD node derives its children's ids from it).
const idOf = (file: string): string => file.replace(/\.json$/, '');
const histories = () =>
  files.map((file) => ({
    workflowId: idOf(file),
    history: JSON.parse(readFileSync(path.join(HISTORIES, file), 'utf8')) as unknown,
  }));

const quiet = {
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  log: () => undefined,
  error: (m: string) => process.stderr.write(`${m}\n`),
};
let compatible: string;
let incompatible: string;
const harnesses: Harness[] = [];

const waitForReview = (h: Harness, id: string, stage: string) =>
  eventually(
    async () => ((await h.client.getState(id)).pendingReviews.some((r) => r.stage === stage) ? true : undefined),
    30_000,
    `${stage} of ${id} to wait for review`,
  );

beforeAll(async () => {
  const bundle = async (file: string) =>
    (await bundleWorkflowCode({ workflowsPath: path.join(__dirname, 'fixtures', file), logger: quiet })).code;
  [compatible, incompatible] = await Promise.all([
    bundle('compatible-workflows.ts'),
    bundle('incompatible-workflows.ts'),
  ]);
});

afterAll(async () => {
  for (const h of harnesses) await h.shutdown();
});

it('has recorded histories to replay', () => {
  expect(files.length).toBeGreaterThanOrEqual(2);
});

it('every recorded history replays against the compatible variant', async () => {
  const results: { workflowId: string; error?: unknown }[] = [];
  for await (const result of Worker.runReplayHistories({ workflowBundle: { code: compatible } }, histories()))
    results.push(result);
  expect(results.map((r) => ({ file: r.workflowId, error: r.error }))).toEqual(
    files.map((file) => ({ file: idOf(file), error: undefined })),
  );
});

it.each(files)('the incompatible variant fails the replay of %s with a nondeterminism error', async (file) => {
  const history = JSON.parse(readFileSync(path.join(HISTORIES, file), 'utf8')) as unknown;
  const error = await Worker.runReplayHistory({ workflowBundle: { code: incompatible } }, history, idOf(file)).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(DeterminismViolationError);
  expect((error as Error).message).toMatch(/^Replay failed with a nondeterminism error\..*Nondeterminism error: /s);
});

it('an item started on the current code finishes on a worker redeployed with the compatible variant', async () => {
  const before = await startHarness();
  harnesses.push(before);
  const id = before.id('redeploy');
  await before.client.start(
    draftPublish({ maxAttempts: 2 }, 'always', 'always'),
    { script: { draft: [{ verdict: 'rejected', summary: 'again' }, {}] } },
    { id },
  );
  await waitForReview(before, id, 'draft');
  await before.shutdown();
  harnesses.pop();

  // maxCachedWorkflows 0: every task of the redeployed worker replays the history the old code wrote.
  const after = await startHarness({
    taskQueue: before.taskQueue,
    worker: { workflowBundle: { code: compatible }, maxCachedWorkflows: 0 },
  });
  harnesses.push(after);
  await after.client.approve(id, 'draft', { reviewer: 'after-deploy' });
  await waitForReview(after, id, 'publish');
  await after.client.approve(id, 'publish', { reviewer: 'after-deploy' });
  expect(await after.client.result(id)).toEqual(expect.objectContaining({ status: 'completed', failedStages: [] }));
  const handle = after.temporal.workflow.getHandle(id);
  expect(await handle.query<string>('deployment')).toBe('compatible-variant');
  const state = await after.client.getState(id);
  expect(state.stages.draft!.attempts.map((a) => a.attempt)).toEqual([1, 2]);
  expect(state.events.map((e) => e.seq)).toEqual(state.events.map((_, i) => i + 1));
  const history = await handle.fetchHistory();
  expect(history.events!.filter((e) => e.workflowTaskFailedEventAttributes)).toEqual([]);
});
