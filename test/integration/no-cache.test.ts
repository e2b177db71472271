/**
 * The same scenarios as the replay recorder with `maxCachedWorkflows: 0`: every workflow task replays the
 * whole history from the start, so any nondeterminism in the workflow shows up as a failure here.
 */
import { startHarness, type Harness } from '../support/harness';
import { SCENARIOS, SCENARIO_TEST_MS } from '../support/scenarios';
import { PROMPT_CANCELLATION } from '../support/attempt-timeout';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ worker: { maxCachedWorkflows: 0, ...PROMPT_CANCELLATION } });
});
afterAll(async () => {
  await h?.shutdown();
});

it.each(SCENARIOS.map((s) => [s.name, s] as const))(
  '%s finishes with every task replayed',
  async (_name, scenario) => {
    const id = h.id();
    await scenario.run(h, id);
    const state = await h.client.getState(id);
    expect(state.status).toBe(scenario.expected);
    if (scenario.expected === 'waiting_review') await h.temporal.workflow.getHandle(id).terminate('scenario over');
    const history = await h.temporal.workflow.getHandle(id).fetchHistory();
    expect(history.events!.some((e) => e.workflowTaskFailedEventAttributes)).toBe(false);
    expect(state.events.map((e) => e.seq)).toEqual(state.events.map((_, i) => i + 1));
  },
  SCENARIO_TEST_MS,
);
