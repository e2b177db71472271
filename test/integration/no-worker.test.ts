/**
 * No worker, no answer (issue 26 §4, issue 37 §3): a query or update that no worker answers within 2 s falls back
 * on what Temporal knows without one, whatever its poller list says, so every command answers within 5 s:
 * - a queue nobody ever polled: `status` prints visibility and exits 0; `watch`, `usage`, `review` exit 1;
 * - a `treadle worker` stopped with SIGTERM, and one killed with SIGKILL, both still in the poller list: the same
 *   answers, and `review` and `approve` say that nothing was sent, which stays true when a worker starts again;
 * - an answer to a decision someone already took is told who took it, from the item's history.
 * The < 5 s bounds are part of the behaviour under test, not a benchmark.
 */
import { Client, Connection } from '@temporalio/client';
import { mkdtempSync } from 'node:fs';
import path from 'node:path';
import { TreadleClient } from '../../src/client';
import { decisionKey } from '../../src/model/decisions';
import { pipeline } from '../../src/kinds/builder';
import { FileBlobStore } from '../../src/storage/blob-store';
import { startHarness, eventually, testAddress, type Harness } from '../support/harness';
import { approveBatchInTerminal, runCli, runTreadle, type CliRun } from '../support/cli';
import { startTreadleWorker, type TreadleWorkerProcess } from '../support/worker-process';

/** How long each run took, by name: checked last, so that a slow run still shows what it answered. */
type Took = Record<string, number>;

/** Runs `run`, noting in `took` how long it took. */
async function timed<T>(took: Took, name: string, run: () => Promise<T>): Promise<T> {
  const started = Date.now();
  try {
    return await run();
  } finally {
    took[name] = Date.now() - started;
  }
}

/** Every run noted in `took` answered within 5 s. */
function expectQuick(took: Took): void {
  const slow = Object.entries(took).filter(([, ms]) => ms >= 5_000);
  expect(slow.map(([name, ms]) => `${name}: ${ms} ms`)).toEqual([]);
}

describe('a queue no worker ever polled', () => {
  let h: Harness;
  let elsewhere: TreadleClient;
  const queue = `nobody-polls-${Math.random().toString(36).slice(2, 8)}`;
  // Not the default queue: `treadle worker` alone would poll another one.
  const noAnswer = `no worker answered on task queue ${queue} within 2s; start one with \`TREADLE_TASK_QUEUE=${queue} treadle worker\``;

  beforeAll(async () => {
    h = await startHarness();
    // A client whose items land on a queue no worker polls.
    elsewhere = await TreadleClient.connect({ address: h.address, taskQueue: queue, blobs: h.blobs });
  });
  afterAll(async () => {
    await elsewhere?.close();
    await h?.shutdown();
  });

  test('status prints what visibility knows and exits 0; watch, usage and review exit 1 with the message, each within 5 s', async () => {
    const id = h.id('no-worker');
    await elsewhere.start({ name: 'unserved', stages: [{ name: 'only', run: 'scripted' }] }, null, { id });
    const took: Took = {};

    const status = await timed(took, 'status', () => runTreadle(h, ['status', id]));
    expect(status.code).toBe(0);
    expect(status.stdout).toContain(`${id} · pipeline unserved · running (Temporal: RUNNING)`);
    expect(status.stderr).toBe(`treadle: ${noAnswer}\n`);

    const watch = await timed(took, 'watch', () => runTreadle(h, ['watch', id]));
    expect({ code: watch.code, stderr: watch.stderr }).toEqual({ code: 1, stderr: `treadle: ${noAnswer}\n` });
    expect(watch.stdout).toContain(`${id} · pipeline unserved · running (Temporal: RUNNING)`);
    const usage = await timed(took, 'usage', () => runTreadle(h, ['usage', id]));
    expect({ code: usage.code, stderr: usage.stderr }).toEqual({ code: 1, stderr: `treadle: ${noAnswer}\n` });
    const review = await timed(took, 'review', () => runTreadle(h, ['review', id, 'only', '--approve']));
    expect({ code: review.code, stderr: review.stderr }).toEqual({
      code: 1,
      stderr: `treadle: the review of only of ${id} was not sent: ${noAnswer}, then send it again\n`,
    });
    expectQuick(took);
  }, 60_000);

  test('the SDK says the same: getState rejects with a no_worker TreadleError within 5 s', async () => {
    const id = h.id('no-worker-sdk');
    await elsewhere.start({ name: 'unserved', stages: [{ name: 'only', run: 'scripted' }] }, null, { id });
    const took: Took = {};
    await timed(took, 'getState', () =>
      expect(elsewhere.getState(id)).rejects.toMatchObject({ code: 'no_worker', message: noAnswer }),
    );
    // A closed item's result needs no worker: status shows it. (Its query fails at once, no poller being listed.)
    await h.temporal.workflow.getHandle(id).terminate('gone');
    const status = await timed(took, 'status', () => runTreadle(h, ['status', id]));
    const notPolled = `no worker is polling task queue ${queue}; start one with \`TREADLE_TASK_QUEUE=${queue} treadle worker\``;
    expect({ code: status.code, stderr: status.stderr }).toEqual({ code: 0, stderr: `treadle: ${notPolled}\n` });
    expect(status.stdout).toMatch(/\(Temporal: TERMINATED\)\nfailure: .*gone/);
    expectQuick(took);
  }, 60_000);
});

describe('a worker stopped a moment ago, still in the poller list', () => {
  const suffix = Math.random().toString(36).slice(2, 8);
  let root: string;
  let env: NodeJS.ProcessEnv;
  let connection: Connection;
  let client: TreadleClient;
  const restarted: TreadleWorkerProcess[] = [];

  /** What one queue holds when its worker stops: items waiting for a person, and decisions already taken. */
  interface Stopped {
    signal: 'SIGTERM' | 'SIGKILL';
    queue: string;
    /** Waits for the review of `draft`. */
    waiting: string;
    /** `draft` approved by alice; waits for the review of `publish`. */
    decided: string;
    /** Work item with two approval requests: `pending` waits, `approved` was approved by bob. */
    approvals: { item: string; pending: string; approved: string };
  }
  const stopped: Stopped[] = [];

  const reviewed = (name: string) =>
    pipeline(name)
      .stage('draft', 'scripted')
      .stage('publish', 'scripted')
      .dependency('publish', 'draft')
      .reviewPolicy('draft', 'always')
      .reviewPolicy('publish', 'always');
  const approvalSpec = {
    name: `no-worker-approvals-${suffix}`,
    stages: [
      { name: 'draft', run: 'scripted' },
      { name: 'approve', type: 'approval', depends_on: ['draft'], with: { action: 'create_task', items: 'tasks' } },
    ],
  };
  const twoTasks = { script: { draft: [{ output: { tasks: [{ title: 'one' }, { title: 'two' }] } }] } };

  const treadle = (args: string[]): Promise<CliRun> => runCli(args, { env, cwd: root, timeoutMs: 60_000 });
  const onQueue = (queue: string): NodeJS.ProcessEnv => ({ ...env, TREADLE_TASK_QUEUE: queue });
  const noAnswer = (queue: string) =>
    `no worker answered on task queue ${queue} within 2s; start one with \`TREADLE_TASK_QUEUE=${queue} treadle worker\``;

  /** Starts a worker on a queue of its own, leaves items waiting for people, then stops it with `signal`. */
  async function stopAfterWork(signal: Stopped['signal']): Promise<Stopped> {
    const queue = `no-worker-${signal.toLowerCase()}-${suffix}`;
    const worker = await startTreadleWorker({ env: onQueue(queue), cwd: root });
    const on = new TreadleClient(client.client, { taskQueue: queue, blobs: new FileBlobStore(blobDir()) });
    const [waiting, decided, item] = ['waiting', 'decided', 'approvals'].map((what) => `${what}-${queue}`) as [
      string,
      string,
      string,
    ];
    await on.start(reviewed(`no-worker-${suffix}`), null, { id: waiting });
    await on.start(reviewed(`no-worker-${suffix}`), null, { id: decided });
    await on.start(approvalSpec, twoTasks, { id: item });
    const waitsFor = async (id: string, stage: string) =>
      eventually(async () =>
        (await on.getState(id)).pendingReviews.some((r) => r.stage === stage) ? true : undefined,
      );
    await waitsFor(decided, 'draft');
    await on.approve(decided, 'draft', { reviewer: 'alice' });
    await Promise.all([waitsFor(waiting, 'draft'), waitsFor(decided, 'publish')]);
    const requests = await eventually(async () => {
      const state = await on.getState(item);
      return state.approvals?.length === 2 ? state.approvals : undefined;
    });
    await on.decideApproval(requests[0]!.id, 'approve', { by: 'bob' });
    // Visibility (the listings, the memo) has caught up with the decisions before the worker goes.
    await eventually(async () =>
      (await on.listApprovals()).filter((r) => r.itemId === item).length === 1 ? true : undefined,
    );
    await worker.kill(signal);
    return {
      signal,
      queue,
      waiting,
      decided,
      approvals: { item, pending: requests[1]!.id, approved: requests[0]!.id },
    };
  }

  const blobDir = () => path.join(root, 'home', 'blobs');

  beforeAll(async () => {
    root = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'no-worker-'));
    const settings = /^(TREADLE_|TEMPORAL_|ANTHROPIC_|OTEL_|CLAUDE_)/;
    env = {
      ...Object.fromEntries(Object.entries(process.env).filter(([name]) => !settings.test(name))),
      TEMPORAL_ADDRESS: testAddress(),
      TREADLE_HOME: path.join(root, 'home'),
      TREADLE_AGENT: 'scripted',
    };
    connection = await Connection.connect({ address: testAddress() });
    client = new TreadleClient(new Client({ connection }), { blobs: new FileBlobStore(blobDir()) });
    stopped.push(...(await Promise.all([stopAfterWork('SIGTERM'), stopAfterWork('SIGKILL')])));
  }, 240_000);

  afterAll(async () => {
    for (const worker of restarted) await worker.stop();
    await connection?.close();
  });

  test('Temporal still lists both stopped workers as polling', async () => {
    for (const { queue } of stopped) expect(await client.workersPolling(queue)).not.toEqual([]);
  });

  test.each(['SIGTERM', 'SIGKILL'] as const)(
    'after %s, review, approve, status, watch and usage each answer within 5 s, saying no worker answered',
    async (signal) => {
      const { queue, waiting, approvals } = stopped.find((s) => s.signal === signal)!;
      // Every command runs before anything is checked: the answers sent here are looked for once workers run again.
      const runs: Record<string, CliRun> = {};
      const took: Took = {};
      for (const [name, args] of [
        ['review', ['review', waiting, 'draft', '--approve', '--reviewer', 'late']],
        ['approve', ['approve', approvals.pending, '--by', 'late']],
        ['status', ['status', waiting]],
        ['approvalStatus', ['status', approvals.item]],
        ['watch', ['watch', waiting]],
        ['usage', ['usage', waiting]],
      ] as const)
        runs[name] = await timed(took, name, () => treadle([...args]));

      const line = `treadle: ${noAnswer(queue)}\n`;
      const shown = `${waiting} · pipeline no-worker-${suffix} · waiting_review (Temporal: RUNNING)\n  waiting for review: draft (always)`;
      expect({ code: runs.review!.code, stderr: runs.review!.stderr }).toEqual({
        code: 1,
        stderr: `treadle: the review of draft of ${waiting} was not sent: ${noAnswer(queue)}, then send it again\n`,
      });
      expect({ code: runs.approve!.code, stderr: runs.approve!.stderr }).toEqual({
        code: 1,
        stderr: `treadle: the decision on ${approvals.pending} (work item ${approvals.item}) was not sent: ${noAnswer(queue)}, then send it again\n`,
      });
      expect({ code: runs.status!.code, stderr: runs.status!.stderr }).toEqual({ code: 0, stderr: line });
      expect(runs.status!.stdout).toContain(shown);
      expect(runs.approvalStatus!.stdout).toMatch(
        new RegExp(
          `waiting_approval \\(Temporal: RUNNING\\)\\n  waiting for approval: ${approvals.pending} \\(approve\\)`,
        ),
      );
      expect({ code: runs.watch!.code, stderr: runs.watch!.stderr }).toEqual({ code: 1, stderr: line });
      expect(runs.watch!.stdout).toContain(shown);
      expect({ code: runs.usage!.code, stderr: runs.usage!.stderr }).toEqual({ code: 1, stderr: line });
      expectQuick(took);
    },
    120_000,
  );

  test('an answer to a decision already taken is told who took it, from the history', async () => {
    const { decided, approvals } = stopped.find((s) => s.signal === 'SIGKILL')!;
    const took: Took = {};
    const review = await timed(took, 'review', () => treadle(['review', decided, 'draft', '--reject', 'too late']));
    expect(review.code).toBe(1);
    expect(review.stderr).toMatch(
      new RegExp(
        `^treadle: review refused: stage draft of ${decided} was already decided \\(approve by alice at \\d{4}-\\S+, as its history records\\)\\n$`,
      ),
    );
    const approve = await timed(took, 'approve reject', () =>
      treadle(['approve', 'reject', approvals.approved, '--by', 'late']),
    );
    expect(approve.code).toBe(1);
    expect(approve.stderr).toMatch(
      new RegExp(
        `^treadle: decision refused: approval request ${approvals.approved} is already approved by bob at \\d{4}-\\S+ \\(as work item ${approvals.item}'s history records\\)\\n$`,
      ),
    );

    // The SDK answers it as an outcome, as it does when a worker refuses the late answer.
    const late = await timed(took, 'decide review', () =>
      client.decide(decisionKey(decided, 'review', 'draft'), { action: 'approve' }, 'carl'),
    );
    expect(late).toMatchObject({ status: 'already_decided', by: 'alice', outcome: 'approve' });
    const lateApproval = await timed(took, 'decide approval', () =>
      client.decide(
        decisionKey(approvals.item, 'approval', approvals.approved),
        { action: 'reject', reason: 'no' },
        'carl',
      ),
    );
    expect(lateApproval).toMatchObject({ status: 'already_decided', by: 'bob', outcome: 'approved' });
    expectQuick(took);
  }, 60_000);

  test("the SDK's reads fall back within 5 s: getState is no_worker, the inbox's detail is the listing's (live: false)", async () => {
    const { queue, waiting } = stopped.find((s) => s.signal === 'SIGKILL')!;
    const took: Took = {};
    await timed(took, 'getState', () =>
      expect(client.getState(waiting)).rejects.toMatchObject({ code: 'no_worker', message: noAnswer(queue) }),
    );
    const detail = await timed(took, 'decisionDetail', () =>
      client.decisionDetail(decisionKey(waiting, 'review', 'draft')),
    );
    expect(detail).toMatchObject({ live: false, decision: { workflowId: waiting, stage: 'draft' } });
    expectQuick(took);
  }, 30_000);

  test('approve batch stops at the first request no worker answers for, saying so, and exits 1', async () => {
    // Both stopped queues hold a pending request of this pipeline; the first one read gets no answer.
    const batch = await approveBatchInTerminal([], env, approvalSpec.name);
    expect(batch.output).toMatch(/no worker answered on task queue no-worker-sig(term|kill)-\w+ within 2s/);
    expect(batch.output).not.toContain('meanwhile');
    expect(batch.output).toContain('0 approved, 0 rejected, 0 skipped');
    expect(batch.code).toBe(1);
  }, 60_000);

  test('what was not sent stays unsent: workers started again find the review and the approval still waiting', async () => {
    restarted.push(
      ...(await Promise.all(stopped.map(({ queue }) => startTreadleWorker({ env: onQueue(queue), cwd: root })))),
    );
    // A worker just started replays each item first: on a busy machine that may take longer than the usual wait.
    const patient = new TreadleClient(client.client, { blobs: new FileBlobStore(blobDir()), answerWaitMs: 60_000 });
    for (const { waiting, approvals } of stopped) {
      // The workers have run what was pending for these items (an update left with the server would be in it).
      for (const id of [waiting, approvals.item])
        await eventually(async () => {
          const { raw } = await client.client.workflow.getHandle(id).describe();
          return raw.pendingWorkflowTask ? undefined : true;
        });
      const state = await patient.getState(waiting);
      expect({ id: waiting, draft: state.stages['draft']?.status }).toEqual({ id: waiting, draft: 'waiting_review' });
      const request = (await patient.getState(approvals.item)).approvals?.find((r) => r.id === approvals.pending);
      expect({ id: approvals.pending, status: request?.status }).toEqual({ id: approvals.pending, status: 'pending' });
    }
  }, 240_000);
});
