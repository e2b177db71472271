/**
 * Faults of a self-hosted Temporal server (PostgreSQL 15, one process per service; src/server/cluster.ts) under
 * running work items, each on a cluster of its own: every server process SIGKILLed and started again, and
 * PostgreSQL restarted (an immediate shutdown, as a crash, then recovery) under a running server. For each:
 *
 * - before the fault, an item waits for a stage review, one for two approvals (one approved before the fault),
 *   and one runs a stage the test holds open across the fault;
 * - while it lasts, the commands a reviewer runs (`treadle review`, `treadle approve`, `treadle status`) fail with
 *   exit 1 and a message that says the server cannot be reached or did not answer, within a bounded time (a
 *   decision sent then may still be taken: Temporal can apply an update whose answer never came back);
 * - afterwards, the same commands succeed, whether the server took them before failing or not (a repeat gets the
 *   first one's answer); every item finishes; an item started after the fault runs too;
 * - nothing is lost or run twice: the item's audit has one review decision, each approval is decided once and
 *   executed once, the approved action took effect once per request (its activity may run again when the database
 *   lost its completion; the idempotency key makes that repeat change nothing), the held stage ran once, every
 *   stage has one attempt, and the call log has one record for each model call (made before the fault, in the
 *   held stage, or after it).
 */
import { mkdtempSync } from 'node:fs';
import path from 'node:path';
import type { StageContext } from '../../src/activities/registry';
import type { ActionCatalog } from '../../src/kinds/approval/worker/activities';
import { pipeline } from '../../src/kinds/builder';
import type { WorkItemState } from '../../src/model/state';
import type { Json } from '../../src/model/shapes';
import { startCluster, type Cluster } from '../../src/server/cluster';
import { SqliteCallLog } from '../../src/storage/sqlite-call-log';
import { defaultRegistry } from '../../src/worker';
import { runTreadle, showRun } from '../support/cli';
import { eventually, startHarness, type Harness } from '../support/harness';

/** How long a command run during the outage may take to say so. */
const OUTAGE_ANSWER_MS = 45_000;
const FAULT_TEST_MS = 300_000;
/**
 * Longer than the outage: a running activity whose heartbeats stop for its heartbeat timeout is run again (Temporal's
 * at-least-once; test/fault/worker-crash.test.ts shows the idempotency key that makes that safe), so an outage
 * shorter than it costs a running stage nothing.
 */
const HELD_HEARTBEAT_TIMEOUT = '120s';

/** A model call (the scripted provider's, logged like any other) made by a stage's execution. */
const callModel = (ctx: StageContext, what: string) =>
  ctx.agent('scripted').run({ messages: [{ role: 'user', content: what }], correlationId: ctx.idempotencyKey });

/** A stage that calls the model, then runs until the test releases it, counting its executions. */
let release: () => void = () => undefined;
let released = new Promise<void>((resolve) => (release = resolve));
let heldExecutions = 0;

/**
 * The approval action, keeping `ActionCatalog`'s contract as the shipped actions do: its effect happens at most once
 * per idempotency key, and a repeat returns the recorded result. A repeat is Temporal's at-least-once activity at
 * work (an action whose completion the crashed database lost runs again), so effects are counted, not calls.
 */
const actionRuns = new Map<string, number>();
const applied = new Map<string, Json>();
const catalog: ActionCatalog = {
  validatePayload: (type) => (type === 'note' ? [] : [`unknown action type "${type}"`]),
  summarize: (_type, payload) => `note "${(payload as { title: string }).title}"`,
  names: () => ['note'],
  execute: async (_type, _payload, { idempotencyKey }) => {
    const recorded = applied.get(idempotencyKey);
    if (recorded !== undefined) return recorded;
    actionRuns.set(idempotencyKey, (actionRuns.get(idempotencyKey) ?? 0) + 1);
    const result = { noted: true };
    applied.set(idempotencyKey, result);
    return result;
  },
};

let cluster: Cluster | undefined;
let h: Harness | undefined;

afterEach(async () => {
  release();
  await h?.shutdown();
  await cluster?.stop();
  h = undefined;
  cluster = undefined;
});

interface Fault {
  name: string;
  down(cluster: Cluster): Promise<void>;
  up(cluster: Cluster): Promise<void>;
  /** What a command run during the outage says on stderr. */
  says: RegExp;
}

const FAULTS: Fault[] = [
  {
    name: 'every server process SIGKILLed, then started again',
    down: (c) => c.killServer(),
    up: (c) => c.startServer(),
    says: /cannot reach the Temporal server at 127\.0\.0\.1:\d+/,
  },
  {
    name: 'PostgreSQL crashed (immediate shutdown) and restarted under the running server',
    down: (c) => c.postgres.stop('immediate'),
    up: (c) => c.postgres.start(),
    says: /^treadle: the Temporal server at 127\.0\.0\.1:\d+ could not do this now \((UNAVAILABLE|DEADLINE_EXCEEDED|INTERNAL)\b.*run the command again once it answers \(a decision it took before failing is not taken twice\)\n$/,
  },
];

describe.each(FAULTS)('$name', (fault) => {
  it(
    'items waiting for a review, for approvals and in a running stage finish; commands in the outage say so, and repeating them after it is safe',
    async () => {
      heldExecutions = 0;
      actionRuns.clear();
      applied.clear();
      released = new Promise<void>((resolve) => (release = resolve));
      const dir = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'cluster-fault-'));
      cluster = await startCluster({ dir, layout: 'per-service', progress: () => undefined });
      const registry = defaultRegistry()
        .stage(
          'held',
          async (ctx) => {
            heldExecutions++;
            await callModel(ctx, 'before the fault');
            await Promise.race([
              released,
              new Promise((_, reject) =>
                ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason), { once: true }),
              ),
            ]);
            return { outcome: 'completed', artefact: { released: true }, summary: 'released' };
          },
          { usesAgent: true },
        )
        .stage(
          'call',
          async (ctx) => {
            await callModel(ctx, `${ctx.stage} after the fault`);
            return { outcome: 'completed', artefact: null };
          },
          { usesAgent: true },
        );
      const callLog = new SqliteCallLog(path.join(dir, 'calls.sqlite'));
      h = await startHarness({ address: cluster.address, registry, approvalActions: catalog, callLog });
      const harness = h;
      const until = (id: string, done: (state: WorkItemState) => boolean, what: string) =>
        eventually(
          async () => {
            const state = await harness.client.getState(id);
            return done(state) ? state : undefined;
          },
          60_000,
          `${id} ${what}`,
        );

      const name = `fault-${harness.taskQueue}`;
      const ids = { review: harness.id('review'), approvals: harness.id('approvals'), held: harness.id('held') };
      await harness.client.start(
        pipeline(name)
          .stage('check', 'scripted')
          .stage('after', 'call', { dependsOn: ['check'] })
          .reviewPolicy('check', 'always'),
        null,
        { id: ids.review },
      );
      await harness.client.start(
        pipeline(name)
          .stage('draft', 'scripted')
          .stage('approve', 'approval', { dependsOn: ['draft'], with: { action: 'note', items: 'notes' } }),
        { script: { draft: [{ output: { notes: [{ title: 'one' }, { title: 'two' }] } }] } },
        { id: ids.approvals },
      );
      await harness.client.start(
        pipeline(name)
          .stage('work', 'held')
          .stage('after', 'call', { dependsOn: ['work'] })
          .activityOptions('work', { heartbeatTimeout: HELD_HEARTBEAT_TIMEOUT, retry: { initialInterval: '100ms' } }),
        null,
        { id: ids.held },
      );
      await until(ids.review, (s) => s.status === 'waiting_review', 'to wait for review');
      await until(ids.approvals, (s) => s.status === 'waiting_approval', 'to wait for approval');
      await until(ids.held, (s) => s.stages.work?.status === 'running', 'to run its held stage');
      const requests = await eventually(
        async () => {
          const listed = (await harness.client.listApprovals()).filter((r) => r.itemId === ids.approvals);
          return listed.length === 2 ? listed : undefined;
        },
        60_000,
        'two pending approvals',
      );
      const [first, second] = requests;
      const approvedBefore = await runTreadle(harness, ['approve', first!.id, '--by', 'ann']);
      expect(approvedBefore.code).toBe(0);

      await fault.down(cluster);
      // While the fault lasts, each command ends with exit 1 and says what happened, in bounded time.
      const answers: { args: string[]; code: number; stdout: string; stderr: string; tookMs: number }[] = [];
      for (const args of [
        ['review', ids.review, 'check', '--approve', '--reviewer', 'bob'],
        ['approve', second!.id, '--by', 'bob'],
        ['status', ids.held],
      ]) {
        const started = Date.now();
        const run = await runTreadle(harness, args);
        answers.push({ args, ...run, tookMs: Date.now() - started });
      }
      for (const answer of answers) {
        expect({ ...answer, tookMs: undefined }).toEqual({
          args: answer.args,
          code: 1,
          stdout: '',
          stderr: expect.stringMatching(fault.says),
          tookMs: undefined,
        });
      }
      expect(
        answers.map((a) => `${a.args[0]} ${a.tookMs < OUTAGE_ANSWER_MS ? 'in time' : `took ${a.tookMs} ms`}`),
      ).toEqual(answers.map((a) => `${a.args[0]} in time`));
      await fault.up(cluster);

      // The same commands, once it is over (a reviewer tries again until the worker answers): each succeeds, once.
      for (const args of [
        ['review', ids.review, 'check', '--approve', '--reviewer', 'bob'],
        ['approve', second!.id, '--by', 'bob'],
      ]) {
        const run = await eventually(
          async () => {
            const attempt = await runTreadle(harness, args);
            if (attempt.code !== 0 && !/no worker answered/.test(attempt.stderr)) throw new Error(showRun(attempt));
            return attempt.code === 0 ? attempt : undefined;
          },
          120_000,
          `${args.join(' ')} to be accepted after the fault`,
        );
        expect(run.stderr).toBe('');
      }
      release();
      const after = harness.id('after');
      await harness.client.start(pipeline(name).stage('only', 'scripted'), null, { id: after });

      for (const id of [ids.review, ids.approvals, ids.held, after])
        await until(id, (s) => s.status === 'completed', 'to complete');

      // Nothing lost or run twice.
      const reviews = (await harness.client.audit(ids.review)).filter((e) => e.kind === 'review');
      expect(reviews.map((e) => e.message)).toEqual([expect.stringMatching(/^review of check: approve by bob /)]);
      const approvalLines = (await harness.client.audit(ids.approvals))
        .filter((e) => e.kind === 'approval')
        .map((e) => e.message);
      for (const [id, by] of [
        [first!.id, 'ann'],
        [second!.id, 'bob'],
      ]) {
        expect(approvalLines.filter((m) => m.startsWith(`${id} approved by ${by}`))).toHaveLength(1);
        expect(approvalLines.filter((m) => m.startsWith(`${id} approved by`))).toHaveLength(1);
        expect(approvalLines.filter((m) => m.startsWith(`${id} executed`))).toHaveLength(1);
      }
      expect([...actionRuns.values()]).toEqual([1, 1]);
      expect(heldExecutions).toBe(1);
      for (const id of [ids.review, ids.approvals, ids.held, after]) {
        const state = await harness.client.getState(id);
        for (const [stage, record] of Object.entries(state.stages))
          expect({ id, stage, attempts: record.attempts.map((a) => a.attempt) }).toEqual({
            id,
            stage,
            attempts: record.attempts.map((_, i) => i + 1),
          });
      }
      const calls = (await callLog.query()).filter((row) => Object.values(ids).includes(row.workflowId));
      const perStage = calls.map((row) => `${row.workflowId === ids.review ? 'review' : 'held'} ${row.stage}`).sort();
      expect(perStage).toEqual(['held after', 'held work', 'review after']);
      await callLog.close();
    },
    FAULT_TEST_MS,
  );
});
