/**
 * Seed 003's run contract on the real server: a run's id derives from its pipeline and input, so starting
 * the same input again returns the run it started (running or finished); the seed's retry names become the
 * stage activity's retry policy, and exhausted retries fail the run with the error recorded.
 */
import { pipeline } from '../../src/kinds/builder';
import { runIdFor } from '../../src/client';
import { Registry } from '../../src/activities/registry';
import { defaultRegistry } from '../../src/worker';
import { idempotencyKey, inputHash } from '../../src/model/hashing';
import { eventually, startHarness, type Harness } from '../support/harness';
import { runTreadle } from '../support/cli';

/** Every key the `keyed` stage saw, by work item. */
const keys = new Map<string, { stepKey: string; idempotencyKey: string }[]>();
let h: Harness;
beforeAll(async () => {
  const keyed = new Registry().stage('keyed', async (ctx) => {
    keys.set(ctx.itemId, [
      ...(keys.get(ctx.itemId) ?? []),
      { stepKey: ctx.stepKey, idempotencyKey: ctx.idempotencyKey },
    ]);
    return { outcome: 'completed', artefact: { attempt: ctx.attempt } };
  });
  h = await startHarness({ registry: defaultRegistry().merge(keyed) });
});
afterAll(async () => {
  await h?.shutdown();
});

it('derives the run id from the pipeline and the input; the same input returns the same run, before and after it finished', async () => {
  const name = `dup-${h.taskQueue}`;
  const spec = pipeline(name)
    .stage('work', 'scripted')
    .stage('after', 'scripted', { dependsOn: ['work'] })
    .reviewPolicy('work', 'always');
  const input = { b: 2, a: [1, { y: 'x', x: 'y' }] };
  const first = await h.client.start(spec, input);
  expect(first).toMatchObject({ id: runIdFor(name, input), pipeline: name, existing: false });
  expect(first.id).toMatch(new RegExp(`^${name}-[0-9a-f]{16}$`));
  // Key order does not make another input.
  const again = await h.client.start(spec, { a: [1, { x: 'y', y: 'x' }], b: 2 });
  expect(again).toEqual({ ...first, existing: true });
  const other = await h.client.start(spec, { ...input, b: 3 });
  expect(other.id).not.toBe(first.id);
  expect(other.existing).toBe(false);

  await eventually(
    async () => ((await h.client.getState(first.id)).status === 'waiting_review' ? true : undefined),
    30_000,
    'the review',
  );
  await h.client.approve(first.id, 'work');
  expect((await h.client.result(first.id)).status).toBe('completed');
  const afterwards = await h.client.start(spec, input);
  expect(afterwards).toEqual({ ...first, existing: true });
  // One run: nothing was started the second and third time.
  const runs = [];
  for await (const execution of h.temporal.workflow.list({ query: `WorkflowId = '${first.id}'` }))
    runs.push(execution.runId);
  expect(runs).toEqual([first.runId]);
}, 60_000);

it('retries a step as max_retries and backoff say, and fails the run with the error once they are spent', async () => {
  const name = `retries-${h.taskQueue}`;
  const spec = {
    name,
    stages: [
      { name: 'flaky', run: 'scripted', max_retries: 3, backoff_seconds: 0.2, backoff_coefficient: 2 },
      { name: 'broken', run: 'scripted', max_retries: 1, backoff_seconds: 0.1 },
    ],
  };
  const id = h.id('retries');
  await h.client.start(
    spec,
    {
      script: { flaky: [{ error: 'the service hiccuped', errorTimes: 2 }], broken: [{ error: 'the service is down' }] },
    },
    { id },
  );
  const result = await h.client.result(id);
  expect(result.status).toBe('failed');
  expect(result.failedStages).toEqual(['broken']);
  const state = await h.client.getState(id);
  expect(state.stages['flaky']!.status).toBe('completed');
  expect(state.stages['broken']!.error).toContain('the service is down');

  const events = (await h.temporal.workflow.getHandle(id).fetchHistory()).events!;
  // The stage is named in the activity's summary ("flaky · attempt 1/1").
  const scheduled = (stage: string) =>
    events.find(
      (e) =>
        e.activityTaskScheduledEventAttributes?.activityType?.name === 'scripted' &&
        Buffer.from(e.userMetadata?.summary?.data ?? new Uint8Array())
          .toString()
          .includes(`${stage} ·`),
    );
  const flaky = scheduled('flaky')!.activityTaskScheduledEventAttributes!;
  expect(flaky.retryPolicy).toMatchObject({ maximumAttempts: 4, backoffCoefficient: 2 });
  expect(
    Number(flaky.retryPolicy!.initialInterval!.nanos) / 1e6 +
      Number(flaky.retryPolicy!.initialInterval!.seconds ?? 0) * 1000,
  ).toBe(200);
  const attemptOf = (e: (typeof events)[number] | undefined) =>
    events.find((s) => String(s.activityTaskStartedEventAttributes?.scheduledEventId) === String(e?.eventId))
      ?.activityTaskStartedEventAttributes?.attempt;
  // Two failures then success: the third try; the broken step tried twice (max_retries 1) and gave up.
  expect(attemptOf(scheduled('flaky'))).toBe(3);
  expect(attemptOf(scheduled('broken'))).toBe(2);
}, 60_000);

it("shows seed 003's status words: a stage on its second attempt is retrying, and an activity Temporal retries is listed with its last failure", async () => {
  const spec = {
    name: `words-${h.taskQueue}`,
    stages: [
      // Rejected once by its gate, then a slow second attempt: the stage is retrying meanwhile.
      { name: 'draft', run: 'scripted', gate: 'scripted', retry_budget: { max_attempts: 2 } },
      // Fails three times with a long backoff: Temporal is retrying its activity meanwhile.
      { name: 'send', run: 'scripted', max_retries: 5, backoff_seconds: 3 },
    ],
  };
  const id = h.id('words');
  await h.client.start(
    spec,
    {
      script: {
        draft: [{ verdict: 'rejected', summary: 'too short' }, { sleepMs: 8_000 }],
        send: [{ error: 'the mail server is down', errorTimes: 2 }],
      },
    },
    { id },
  );
  const status = await eventually(
    async () => {
      const run = await runTreadle(h, ['status', id]);
      return run.stdout.includes('Retrying (Temporal activity retries):') && /draft +retrying +2\/2/.test(run.stdout)
        ? run
        : undefined;
    },
    30_000,
    'both kinds of retry to show',
  );
  expect(status.stdout).toMatch(/scripted: try [23], last failure: the mail server is down/);
  expect((await h.client.result(id)).status).toBe('completed');
}, 60_000);

it("gives each step seed 003's key, sha256(runId + step + inputHash): the same on every attempt, another for another run or input", async () => {
  const spec = (name: string) => ({
    name,
    stages: [{ name: 'write', run: 'keyed', gate: 'scripted', retry_budget: { max_attempts: 2 } }],
  });
  const input = { script: { write: [{ verdict: 'rejected', summary: 'again' }, {}] }, note: 'x' };
  const a = h.id('key-a');
  const b = h.id('key-b');
  await h.client.start(spec(`keys-${h.taskQueue}`), input, { id: a });
  await h.client.start(spec(`keys-${h.taskQueue}`), input, { id: b });
  expect((await h.client.result(a)).status).toBe('completed');
  expect((await h.client.result(b)).status).toBe('completed');
  const [first, second] = keys.get(a)!;
  // Two attempts: each its own attempt key, one step key.
  expect(first!.idempotencyKey).not.toBe(second!.idempotencyKey);
  expect(second!.stepKey).toBe(first!.stepKey);
  expect(first!.stepKey).toBe(idempotencyKey(a, 'write', inputHash({ input, upstream: {}, config: null })));
  expect(keys.get(b)![0]!.stepKey).not.toBe(first!.stepKey);
}, 60_000);
