/**
 * Attempt timeouts on the real server, where they meet cancellation:
 * - a composed gate whose gates stop at different speeds: the next attempt starts only after every gate of
 *   the timed-out one has stopped, and each gate's calls are kept;
 * - a stage activity cut off by its timeout still names the attempt log it stored, so the next attempt's
 *   input stays the same size however many attempts timed out before it.
 */
import { Registry, type GateImplementation } from '../../src/activities/registry';
import { pipeline } from '../../src/kinds/builder';
import { defaultRegistry } from '../../src/worker';
import { startHarness, type Harness } from '../support/harness';

/** When each implementation started and stopped, by attempt (wall clock of this process). */
const ledger: { what: string; attempt: number; start: number; end: number }[] = [];

function untilAborted(signal: AbortSignal, lingerMs: number): Promise<void> {
  return new Promise((resolve) => {
    const stop = (): void => void setTimeout(resolve, lingerMs);
    if (signal.aborted) stop();
    else signal.addEventListener('abort', stop, { once: true });
  });
}

/** A gate that accepts, except on attempt 1, where it waits for the abort and stops `lingerMs` after it. */
function hangingGate(what: string, lingerMs: number): GateImplementation {
  return async (ctx) => {
    if (ctx.attempt > 1) return { kind: 'accepted' };
    const start = Date.now();
    await untilAborted(ctx.signal, lingerMs);
    ledger.push({ what, attempt: ctx.attempt, start, end: Date.now() });
    return { kind: 'accepted' };
  };
}

let h: Harness;
beforeAll(async () => {
  const registry = defaultRegistry().merge(
    new Registry()
      .stage('quick', async (ctx) => {
        ledger.push({ what: 'stage', attempt: ctx.attempt, start: Date.now(), end: Date.now() });
        return { outcome: 'completed', artefact: { attempt: ctx.attempt } };
      })
      .stage('hang-until-4', async (ctx) => {
        if (ctx.attempt < 4) await untilAborted(ctx.signal, 0);
        return { outcome: 'completed', artefact: { attempt: ctx.attempt, previous: ctx.previousAttempts.length } };
      })
      // Both gates hang on attempt 1; on abort, "fast" stops at once and "slow" only after 2 s.
      .gate('fast', hangingGate('fast', 0))
      .gate('slow', hangingGate('slow', 2_000)),
  );
  h = await startHarness({ registry });
});
afterAll(async () => {
  await h?.shutdown();
});

it('starts the next attempt only after every gate of a timed-out attempt has stopped', async () => {
  const id = h.id('gates');
  const spec = pipeline('composed-timeout')
    .stage('s', 'quick')
    .retryBudget('s', { maxAttempts: 2, attemptTimeout: '3s' });
  const json = spec.toJSON() as { stages: Record<string, unknown>[] };
  json.stages[0]!.gate = { all: ['fast', 'slow'] };
  await h.client.start(json, null, { id });
  expect((await h.client.result(id)).status).toBe('completed');
  const state = await h.client.getState(id);
  expect(state.stages.s!.attempts.map((a) => a.timedOut ?? false)).toEqual([true, false]);
  const slow = ledger.find((e) => e.what === 'slow' && e.attempt === 1)!;
  const second = ledger.find((e) => e.what === 'stage' && e.attempt === 2)!;
  expect(slow.end - slow.start).toBeGreaterThanOrEqual(3_000);
  expect(second.start).toBeGreaterThanOrEqual(slow.end);
  const history = await h.temporal.workflow.getHandle(id).fetchHistory();
  expect(history.events!.filter((e) => e.activityTaskCanceledEventAttributes)).toHaveLength(2);
}, 60_000);

it('keeps the input of an attempt after timed-out ones the same size', async () => {
  const id = h.id('hang');
  const spec = pipeline('hang-timeout')
    .stage('s', 'hang-until-4')
    .retryBudget('s', { maxAttempts: 4, attemptTimeout: '2s' });
  await h.client.start(spec, null, { id });
  expect((await h.client.result(id)).status).toBe('completed');
  const state = await h.client.getState(id);
  expect(state.stages.s!.attempts.map((a) => a.timedOut ?? false)).toEqual([true, true, true, false]);
  expect(await h.client.readArtefact(state.stages.s!.artefact)).toEqual({ attempt: 4, previous: 3 });
  const history = await h.temporal.workflow.getHandle(id).fetchHistory();
  const inputs = history
    .events!.filter((e) => e.activityTaskScheduledEventAttributes)
    .map(
      (e) =>
        JSON.parse(Buffer.from(e.activityTaskScheduledEventAttributes!.input!.payloads![0]!.data!).toString()) as {
          previousAttempts: { log: string | null; recent: unknown[] };
        },
    );
  // Attempt 2 carries attempt 1; attempts 3 and 4 name the log the cut-off attempt stored, plus one record.
  expect(inputs.map((i) => [i.previousAttempts.log === null, i.previousAttempts.recent.length])).toEqual([
    [true, 0],
    [true, 1],
    [false, 1],
    [false, 1],
  ]);
}, 60_000);
