/**
 * Records the histories the replay test replays: `npm run record-histories` (runs through jest so it
 * uses the same dev server). Re-record only on purpose: a changed history means a workflow change that
 * running items would see.
 */
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { startHarness, type Harness } from '../support/harness';
import { SCENARIOS, SCENARIO_TEST_MS } from '../support/scenarios';
import { PROMPT_CANCELLATION } from '../support/attempt-timeout';
import { recordTddTree } from '../support/tdd-recording';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ worker: PROMPT_CANCELLATION });
});
afterAll(async () => {
  await h?.shutdown();
});

it.each(SCENARIOS.map((s) => [s.name, s] as const))('records %s', async (name, scenario) => {
  const id = `replay-${name}`;
  await scenario.run(h, `${id}-${h.taskQueue}`);
  const handle = h.temporal.workflow.getHandle(`${id}-${h.taskQueue}`);
  expect((await h.client.getState(`${id}-${h.taskQueue}`)).status).toBe(scenario.expected);
  const history = await handle.fetchHistory();
  if (scenario.expected === 'waiting_review') await handle.terminate('recorded');
  const file = path.join(__dirname, 'histories', `${name}.json`);
  writeFileSync(file, `${JSON.stringify(JSON.parse(historyToJSON(history)), null, 1)}\n`);
  expect(history.events!.length).toBeGreaterThan(10);
}, SCENARIO_TEST_MS);

// A TDD tree (seed 001): the root (children, merge handshake, retry, MoreTests) and a child that rebased.
it('records tdd-tree', async () => {
  const histories = await recordTddTree(h);
  for (const [name, history] of Object.entries(histories)) {
    writeFileSync(path.join(__dirname, 'histories', `${name}.json`), `${JSON.stringify(JSON.parse(historyToJSON(history)), null, 1)}\n`);
    expect(history.events!.length).toBeGreaterThan(20);
  }
}, SCENARIO_TEST_MS);
