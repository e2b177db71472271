/**
 * Model capacity made visible (issue 39), on the dev server with the built CLI:
 * - `treadle limits` lists a real limiter whose two slots a capacity gate holds, with a call waiting behind them
 *   ("2/2 calls in flight", text and --json); with no limiter running it says so (exit 0); a limiter no worker
 *   runs is listed as unanswered, quickly, with exit 1;
 * - `treadle status` (text and --json) and the inbox's decision page show a running stage whose activity
 *   heartbeats a capacity wait (`CapacityWaitDetails`), beside a stage waiting for review.
 * `treadle limits` lists every limiter of the namespace, so this file runs on a dev server of its own: another
 * file's limiter, left running after its workers stopped, would be listed as unanswered here.
 */
import { Context } from '@temporalio/activity';
import { Client, Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Registry } from '../../src/activities/registry';
import type { CapacityWaitDetails } from '../../src/capacity/waiting';
import { limiterWorkflowId } from '../../src/capacity/shapes';
import { CapacityGate, type CapacityLease } from '../../src/capacity/worker/gate';
import type { LimiterUsage } from '../../src/client/capacity';
import { EXIT } from '../../src/cli/exit-codes';
import { pipeline } from '../../src/kinds/builder';
import { decisionKey } from '../../src/model/decisions';
import { defaultRegistry } from '../../src/worker';
import { runTreadle, showRun } from '../support/cli';
import { freePort, startDevServer, type DevServer } from '../../src/server/dev-server';
import { eventually, startHarness, type Harness } from '../support/harness';
import { startInbox, type TestInbox } from '../support/inbox';

const WAIT: CapacityWaitDetails = {
  capacity: {
    scope: 'anthropic/claude-sonnet-4-6',
    waitingFor: '8/8 calls in flight, 41k/60k tokens this minute',
    since: new Date().toISOString(),
  },
};

let stopWaiting: () => void = () => undefined;
const waited = new Promise<void>((resolve) => (stopWaiting = resolve));

let server: DevServer;
let h: Harness;
let gate: CapacityGate | undefined;
let inbox: TestInbox | undefined;
beforeAll(async () => {
  const registry = defaultRegistry().merge(
    new Registry()
      .stage('quick', async () => ({ outcome: 'completed', artefact: { text: 'draft' } }))
      // A model call waiting for capacity, as the worker's calls heartbeat it (beside the supervision's beats).
      .stage('capacityWait', async () => {
        const context = Context.current();
        const beat = setInterval(() => context.heartbeat({ ...WAIT, calls: [] }), 100);
        try {
          await Promise.race([waited, context.cancelled.catch(() => undefined)]);
        } finally {
          clearInterval(beat);
        }
        return { outcome: 'completed', artefact: { text: 'written' } };
      }),
  );
  server = await startDevServer({
    port: await freePort(),
    dbFile: path.join(
      mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? os.tmpdir(), 'limits-')),
      'temporal.sqlite',
    ),
    headless: true,
    allowDownload: false,
    progress: () => undefined,
  });
  h = await startHarness({ registry, address: server.address });
}, 120_000);
afterAll(async () => {
  stopWaiting();
  await inbox?.close();
  await gate?.close();
  for await (const execution of h.temporal.workflow.list({
    query: `WorkflowType = 'treadleLimiter' AND ExecutionStatus = 'Running'`,
  }))
    await h.temporal.workflow.getHandle(execution.workflowId).terminate('test over');
  await h?.shutdown();
  await server?.stop();
});

describe('treadle limits', () => {
  it('shows a limiter whose two slots are held, with a call waiting (text and --json)', async () => {
    const scope = { provider: 'anthropic', model: h.id('model'), keyId: 'k1' };
    gate = new CapacityGate({
      client: h.temporal,
      taskQueue: h.taskQueue,
      scope,
      limits: { concurrency: 2, leaseMs: 30_000 },
    });
    const request = { priority: 1, fairnessKey: 'acme', weight: 1, inputTokens: 100, outputTokens: 50 };
    const held: CapacityLease[] = [await gate.acquire(request), await gate.acquire(request)];
    const third = gate.acquire(request);
    const workflowId = limiterWorkflowId(scope.provider, scope.model, scope.keyId);

    const text = await eventually(async () => {
      const run = await runTreadle(h, ['limits']);
      expect(run.code).toBe(EXIT.completed);
      const row = run.stdout.split('\n').find((l) => l.includes(scope.model));
      return row?.includes('1 (priority 1 acme: 1)') ? { run, row } : undefined;
    });
    expect(text.run.stdout).toMatch(/^PROVIDER\s+MODEL\s+KEY\s+WAITING\s+BINDS\s+IN USE$/m);
    expect(text.row).toMatch(/^anthropic\s+\S+\s+k1\s+1 \(priority 1 acme: 1\)\s+concurrency\s+2\/2 calls in flight$/);

    const json = await runTreadle(h, ['limits', '--json']);
    expect(json.code).toBe(EXIT.completed);
    const limiter = (JSON.parse(json.stdout) as LimiterUsage[]).find((l) => l.workflowId === workflowId);
    expect(limiter).toMatchObject({ provider: 'anthropic', model: scope.model, keyId: 'k1' });
    expect(limiter!.usage!.concurrency).toEqual({ used: 2, limit: 2, configured: 2 });
    expect(limiter!.usage!.inFlight).toBe(2);
    // The SDK part the command reads through.
    const listed = (await h.client.limits.list()).find((l) => l.workflowId === workflowId);
    expect(listed?.usage?.concurrency?.used).toBe(2);

    for (const lease of held) lease.release({ inputTokens: 10, outputTokens: 5 });
    (await third).release();
  }, 60_000);

  it('with no limiter running says so (exit 0); a limiter no worker runs is unanswered, quickly (exit 1)', async () => {
    const namespace = `limits-${h.taskQueue}`;
    await h.temporal.workflowService.registerNamespace({
      namespace,
      workflowExecutionRetentionPeriod: msToTs('1 day'),
    });
    const env = { TEMPORAL_NAMESPACE: namespace };
    const none = await eventually(async () => {
      const run = await runTreadle(h, ['limits'], env);
      return run.code === EXIT.completed ? run : undefined; // the new namespace takes a moment to be known
    }, 30_000);
    expect(none.stdout).toBe(
      'no limiter is running: one starts with the first model call a worker makes under a limits file (docs/configuration.md)\n',
    );
    expect(JSON.parse((await runTreadle(h, ['limits', '--json'], env)).stdout)).toEqual([]);

    // A limiter on a queue no worker polls: its usage query would wait forever without the answer bound.
    const connection = await Connection.connect({ address: h.address });
    try {
      const other = new Client({ connection, namespace });
      const workflowId = limiterWorkflowId('anthropic', 'orphan', 'k2');
      await other.workflow.start('treadleLimiter', {
        workflowId,
        taskQueue: `nobody-${h.taskQueue}`,
        args: [
          {
            scope: { provider: 'anthropic', model: 'orphan', keyId: 'k2' },
            limits: { concurrency: 1, leaseMs: 30_000 },
          },
        ],
      });
      const run = await eventually(async () => {
        const started = Date.now();
        const r = await runTreadle(h, ['limits'], env);
        return r.stdout.includes('orphan') ? { ...r, ms: Date.now() - started } : undefined;
      });
      expect(run.code).toBe(EXIT.failed);
      expect(run.stdout).toMatch(/orphan\s+k2\s+\?\s+\?\s+no answer: /);
      expect(run.stderr).toContain(`treadle: ${workflowId}: `);
      expect(run.stderr).toContain(`nobody-${h.taskQueue}`);
      expect(run.ms).toBeLessThan(15_000);
      await other.workflow.getHandle(workflowId).terminate('test over');
    } finally {
      await connection.close();
    }
  }, 90_000);
});

describe('a stage waiting for capacity', () => {
  it('is shown by treadle status (text and --json) and by the inbox beside a stage waiting for review', async () => {
    const spec = pipeline(`capacity-${h.taskQueue}`)
      .stage('draft', 'quick')
      .reviewPolicy('draft', 'always')
      .stage('write', 'capacityWait');
    const id = h.id('waiting');
    await h.client.start(spec, null, { id });
    const line = 'write: waiting for claude-sonnet-4-6: 8/8 calls in flight, 41k/60k tokens this minute (since ';

    const status = await eventually(async () => {
      const run = await runTreadle(h, ['status', id]);
      return run.stdout.includes(line) && run.stdout.includes('waiting_review') ? run : undefined;
    });
    expect(status.stdout).toMatch(/\n {2}write: waiting for claude-sonnet-4-6: .* \(since \d\d:\d\d:\d\d UTC\)\n/);

    const json = await eventually(async () => {
      const run = await runTreadle(h, ['status', id, '--json']);
      const parsed = JSON.parse(run.stdout) as { capacityWaits?: { stage?: string; scope: string; line: string }[] };
      return parsed.capacityWaits ? parsed : undefined;
    });
    expect(json.capacityWaits).toEqual([
      expect.objectContaining({
        stage: 'write',
        activityType: 'capacityWait',
        scope: 'anthropic/claude-sonnet-4-6',
        waitingFor: WAIT.capacity.waitingFor,
        since: WAIT.capacity.since,
      }),
    ]);

    inbox = await startInbox(h);
    const page = await eventually(async () => {
      const res = await fetch(`${inbox!.url}d/${encodeURIComponent(decisionKey(id, 'review', 'draft'))}`, {
        headers: { authorization: `Bearer ${inbox!.tokens.alice}` },
      });
      const body = await res.text();
      return res.status === 200 && body.includes('data-testid="capacity-waits"') ? body : undefined;
    });
    expect(page).toContain('<strong>write</strong>: waiting for claude-sonnet-4-6: 8/8 calls in flight');

    stopWaiting();
    await h.client.decisions.review(id, 'draft', { kind: 'approve' }, 'alice');
    expect((await h.client.result(id)).status).toBe('completed');
    // A stage no longer waiting has no line.
    const after = await runTreadle(h, ['status', id]);
    expect(after.stdout).not.toContain('waiting for claude');
    expect(showRun(after)).toContain('completed');
  }, 90_000);
});
