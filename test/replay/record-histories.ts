/**
 * Records the histories the replay test replays: `npm run record-histories` (runs through jest so it
 * uses the same dev server). Re-record only on purpose: a changed history means a workflow change that
 * running items would see.
 */
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startHarness, type Harness } from '../support/harness';
import { SCENARIOS, SCENARIO_TEST_MS } from '../support/scenarios';
import { PROMPT_CANCELLATION } from '../support/attempt-timeout';
import { recordFailedTddRoot, recordTddTree } from '../support/tdd-recording';
import { runDecisions } from '../support/decision-recording';
import { recordLimiter } from '../support/limiter-recording';
import { recordNotifier } from '../support/notifier-recording';
import { recordItemAnnouncements, recordReviewDeadlines } from '../support/item-announce-recording';
import { recordCancelledChildren } from '../support/busy-children';
import { recordLineage } from '../support/lineage-recording';

let h: Harness;
beforeAll(async () => {
  process.env.TREADLE_LOOP_WORKSPACE = mkdtempSync(path.join(os.tmpdir(), 'record-loops-'));
  h = await startHarness({ worker: PROMPT_CANCELLATION });
});
afterAll(async () => {
  await h?.shutdown();
});

it.each(SCENARIOS.map((s) => [s.name, s] as const))(
  'records %s',
  async (name, scenario) => {
    const id = `replay-${name}`;
    await scenario.run(h, `${id}-${h.taskQueue}`);
    const handle = h.temporal.workflow.getHandle(`${id}-${h.taskQueue}`);
    expect((await h.client.getState(`${id}-${h.taskQueue}`)).status).toBe(scenario.expected);
    const history = await handle.fetchHistory();
    if (scenario.expected === 'waiting_review') await handle.terminate('recorded');
    const file = path.join(__dirname, 'histories', `${name}.json`);
    writeFileSync(file, `${JSON.stringify(JSON.parse(historyToJSON(history)), null, 1)}\n`);
    expect(history.events!.length).toBeGreaterThan(10);
  },
  SCENARIO_TEST_MS,
);

// A TDD tree (seed 001): the root (children, merge handshake, retry, MoreTests) and a child that rebased.
// A limiter (issue 39): its every message, an expired lease, a renewal, and the run it continued as.
// The notifier (issue 40): lanes, a duplicate, a refused delivery retried, and the run it continued as.
// An engine-8 item announcing (issue 40): a review owed, decided, and the item failed.
// Decisions past their deadline (issue 40): a review escalated, a human stage's request announced overdue.
it.each([
  ['tdd-tree', recordTddTree],
  ['tdd-failed-root', recordFailedTddRoot],
  ['limiter', recordLimiter],
  ['notifier', recordNotifier],
  ['item-announces', recordItemAnnouncements],
  ['review-deadlines', recordReviewDeadlines],
] as const)(
  'records %s',
  async (_name, record) => {
    const histories = await record(h);
    for (const [name, history] of Object.entries(histories)) {
      writeFileSync(
        path.join(__dirname, 'histories', `${name}.json`),
        `${JSON.stringify(JSON.parse(historyToJSON(history)), null, 1)}\n`,
      );
      expect(history.events!.length).toBeGreaterThan(20);
    }
  },
  SCENARIO_TEST_MS,
);

// Engine 9's lineage (issue 42): a fork with carried stages, an item that publishes the correlation id it made.
it(
  'records lineage',
  async () => {
    for (const [name, history] of Object.entries(await recordLineage(h))) {
      writeFileSync(
        path.join(__dirname, 'histories', `${name}.json`),
        `${JSON.stringify(JSON.parse(historyToJSON(history)), null, 1)}\n`,
      );
      expect(history.events!.length).toBeGreaterThan(10);
    }
  },
  SCENARIO_TEST_MS,
);

// Cancelled children (issue 40): items cancelled while their TDD tree ran a call in every node and their loop
// an iteration (the items, the tree's root and a child, the loop), on a worker of their own (held agent calls).
it(
  'records cancelled-children',
  async () => {
    for (const [name, history] of Object.entries(await recordCancelledChildren())) {
      writeFileSync(
        path.join(__dirname, 'histories', `${name}.json`),
        `${JSON.stringify(JSON.parse(historyToJSON(history)), null, 1)}\n`,
      );
      expect(history.events!.length).toBeGreaterThan(10);
    }
  },
  SCENARIO_TEST_MS,
);

// A loop stage (seed 004): the work item, and the loop's first run (a crash, a resume, then continue-as-new).
it(
  'records loop-item',
  async () => {
    const id = 'loop-item';
    const status = (decision: string) => ({ decision, reason: decision, summary: decision, errors: [] });
    const reply = (n: number, decision = 'continue') => ({
      output: `# ${n}\n`,
      progress: `## Iteration ${n}\n- ${n}\n`,
      status: status(decision),
    });
    const spec = {
      name: 'replayed-loop',
      stages: [
        {
          name: 'work',
          run: 'loop',
          with: {
            stage: { name: 'work', prompt: 'Read ${CTX}', termination: { type: 'judgment', consensus: 2 } },
            max_iterations: 6,
            iterations_per_run: 3,
          },
        },
      ],
    };
    await h.client.start(
      spec,
      { agent_replies: { work: [reply(1), { crash: 'exit 1' }, reply(2), reply(3, 'stop'), reply(4, 'stop')] } },
      { id },
    );
    const loopId = `${id}.work.1`;
    for (;;) {
      const loops = await h.client.loops(id).catch(() => []);
      if (loops.some((l) => l.state.status === 'failed')) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    await h.client.resumeLoop(id);
    expect((await h.client.result(id)).status).toBe('completed');
    const firstRun = (await h.temporal.workflow.getHandle(loopId).describe()).raw.workflowExecutionInfo?.firstRunId;
    const histories = {
      [id]: await h.temporal.workflow.getHandle(id).fetchHistory(),
      [loopId]: await h.temporal.workflow.getHandle(loopId, firstRun ?? undefined).fetchHistory(),
    };
    for (const [name, history] of Object.entries(histories)) {
      writeFileSync(
        path.join(__dirname, 'histories', `${name}.json`),
        `${JSON.stringify(JSON.parse(historyToJSON(history)), null, 1)}\n`,
      );
      expect(history.events!.length).toBeGreaterThan(10);
    }
  },
  SCENARIO_TEST_MS,
);

// A fan_out stage (seed 000 `FanOut`): four elements, two at once, one failing. From engine 5 the elements
// run under a fan-out workflow that continues as new every two elements; its first run is recorded too.
it(
  'records fan-out-item',
  async () => {
    const id = 'fan-out-item';
    const element = (subject: string) => ({
      subject,
      script: { classify: [subject === 'broken' ? { error: 'cannot classify' } : { output: { label: subject } }] },
    });
    const spec = {
      name: 'replayed-fan-out',
      stages: [
        { name: 'extract', run: 'scripted' },
        {
          name: 'classify',
          type: 'fan_out',
          depends_on: ['extract'],
          with: { items: 'emails', stage: { run: 'scripted' }, max_concurrent: 2, elements_per_run: 2 },
        },
      ],
    };
    const emails = ['a', 'broken', 'c', 'd'].map(element);
    await h.client.start(spec, { script: { extract: [{ output: { emails } }] } }, { id });
    expect((await h.client.result(id)).status).toBe('completed');
    const histories: Record<
      string,
      Awaited<ReturnType<ReturnType<typeof h.temporal.workflow.getHandle>['fetchHistory']>>
    > = { [id]: await h.temporal.workflow.getHandle(id).fetchHistory() };
    const fanOutId = `${id}.classify.1`;
    const fanOut = await h.temporal.workflow
      .getHandle(fanOutId)
      .describe()
      .catch(() => undefined);
    if (fanOut?.type === 'fanOut')
      histories[fanOutId] = await h.temporal.workflow
        .getHandle(fanOutId, fanOut.raw.workflowExecutionInfo?.firstRunId ?? undefined)
        .fetchHistory();
    for (const [name, history] of Object.entries(histories)) {
      writeFileSync(
        path.join(__dirname, 'histories', `${name}.json`),
        `${JSON.stringify(JSON.parse(historyToJSON(history)), null, 1)}\n`,
      );
      expect(history.events!.length).toBeGreaterThan(10);
    }
  },
  SCENARIO_TEST_MS,
);

// Engine 7's decisions (a review for a reviewer group, an approval, a TDD node Stuck then answered, a loop
// failed, resumed by someone, failed again and abandoned): every workflow they ran.
it(
  'records decisions',
  async () => {
    for (const id of await runDecisions(h, 'decisions')) {
      const history = await h.temporal.workflow.getHandle(id).fetchHistory();
      writeFileSync(
        path.join(__dirname, 'histories', `${id}.json`),
        `${JSON.stringify(JSON.parse(historyToJSON(history)), null, 1)}\n`,
      );
      expect(history.events!.length).toBeGreaterThan(10);
    }
  },
  SCENARIO_TEST_MS,
);
