/**
 * The `fan_out` stage kind and seed 000's `fan_out` outcome on the real server: each element a child work
 * item, at most `max_concurrent` at once, results in input order, a failed element reported without losing
 * the others (or failing the stage), and the parent's history small however large the elements are.
 */
import { pipeline } from '../../src/kinds/builder';
import type { FanOutArtefact } from '../../src/kinds/fan-out/shapes';
import { TreadlePipeline } from '../../src/model/search-attributes';
import type { Json } from '../../src/model/shapes';
import { resolveArtefact } from '../../src/storage/blob-store';
import { startHarness, type Harness } from '../support/harness';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.shutdown();
});

/** An element whose `classify` stage answers with its label (or fails, for "broken"), after a short sleep. */
const email = (subject: string, extra: Record<string, Json> = {}): Json => ({
  subject,
  ...extra,
  script: {
    classify: [
      subject === 'broken'
        ? { error: 'cannot classify this one' }
        : { sleepMs: 300, output: { subject, label: `label of ${subject}` } },
    ],
  },
});

function triage(name: string, fanOut: Record<string, Json>) {
  return pipeline(name)
    .stage('extract', 'scripted')
    .stage('classify', 'fan_out', {
      dependsOn: ['extract'],
      with: { items: 'emails', stage: { run: 'scripted', max_retries: 0 }, ...fanOut },
    })
    .stage('route', 'scripted', { dependsOn: ['classify'] });
}

async function fanOutArtefact(id: string): Promise<FanOutArtefact> {
  const state = await h.client.getState(id);
  return (await resolveArtefact(state.stages['classify']!.artefact, h.blobs)) as unknown as FanOutArtefact;
}

it('runs each element as a child work item, at most max_concurrent at once, results in input order, a failure reported without losing the others', async () => {
  const name = `triage-${h.taskQueue}`;
  const subjects = ['invoice', 'meeting', 'broken', 'lunch', 'report', 'travel'];
  const id = h.id('fan');
  await h.client.start(
    triage(name, { max_concurrent: 2 }),
    { script: { extract: [{ output: { emails: subjects.map((s) => email(s)) } }] } },
    { id },
  );
  const result = await h.client.result(id);
  expect(result.status).toBe('completed');
  const artefact = await fanOutArtefact(id);
  expect(artefact).toMatchObject({ completed: 5, failed: 1 });
  expect(artefact.results.map((r) => [r.index, r.id, r.status])).toEqual(
    subjects.map((s, i) => [i, `${id}.classify.1.${i}`, s === 'broken' ? 'failed' : 'completed']),
  );
  for (const [i, r] of artefact.results.entries()) {
    if (r.status === 'completed')
      expect(r.artefact).toEqual({ subject: subjects[i], label: `label of ${subjects[i]}` });
    else expect(r.error).toContain('cannot classify this one');
  }
  const state = await h.client.getState(id);
  expect(state.stages['classify']!.fanOut).toEqual({ total: 6, running: 0, completed: 5, failed: 1 });
  expect(state.stages['route']!.status).toBe('completed');
  expect(state.events.filter((e) => e.type === 'FanOutItemFailed').map((e) => e.details?.index)).toEqual([2]);

  // Each element is a work item of its own, a child of the stage's fan-out workflow: the element pipeline, its
  // own status; never more than 2 ran at once.
  const spans: [number, number][] = [];
  for (const r of artefact.results) {
    const child = await h.temporal.workflow.getHandle(r.id).describe();
    expect(child.parentExecution?.workflowId).toBe(`${id}.classify.1`);
    expect(child.typedSearchAttributes.get(TreadlePipeline)).toBe(`${name}.classify`);
    spans.push([child.startTime.getTime(), child.closeTime!.getTime()]);
  }
  const overlapAt = (t: number) => spans.filter(([s, e]) => s <= t && t < e).length;
  expect(Math.max(...spans.map(([s]) => overlapAt(s)))).toBeLessThanOrEqual(2);
  expect(Math.max(...spans.map(([s]) => overlapAt(s)))).toBe(2);
}, 90_000);

it('with on_item_failure: fail, a failed element fails the stage after the others finished', async () => {
  const id = h.id('fan-fail');
  await h.client.start(
    triage(`triage-fail-${h.taskQueue}`, { on_item_failure: 'fail' }),
    { script: { extract: [{ output: { emails: [email('a'), email('broken'), email('b')] } }] } },
    { id },
  );
  const result = await h.client.result(id);
  expect(result.status).toBe('failed');
  const state = await h.client.getState(id);
  expect(state.stages['classify']!.error).toMatch(
    /^1 of 3 elements failed \(on_item_failure: fail\): 1: .*cannot classify this one/,
  );
  expect(state.stages['classify']!.fanOut).toEqual({ total: 3, running: 0, completed: 2, failed: 1 });
  expect(state.stages['route']!.status).toBe('skipped');
}, 60_000);

it("fans out when a stage returns seed 000's fan_out outcome, with the list and the element stage in its artefact", async () => {
  const id = h.id('outcome');
  const spec = pipeline(`outcome-${h.taskQueue}`)
    .stage('split', 'scripted')
    .stage('after', 'scripted', { dependsOn: ['split'] });
  const items = ['x', 'y', 'z'].map((s) => ({ name: s, script: { split: [{ output: { upper: s.toUpperCase() } }] } }));
  await h.client.start(
    spec,
    { script: { split: [{ outcome: 'fan_out', output: { items, stage: { run: 'scripted' }, max_concurrent: 3 } }] } },
    { id },
  );
  expect(await h.client.result(id)).toEqual(expect.objectContaining({ status: 'completed' }));
  const state = await h.client.getState(id);
  const artefact = (await resolveArtefact(state.stages['split']!.artefact, h.blobs)) as unknown as FanOutArtefact;
  expect(artefact.results.map((r) => r.artefact)).toEqual([{ upper: 'X' }, { upper: 'Y' }, { upper: 'Z' }]);
  expect(state.stages['after']!.status).toBe('completed');
}, 60_000);

it('refuses a fan_out whose element stage is invalid, listing every problem before anything starts', async () => {
  const spec = pipeline('bad-fan')
    .stage('extract', 'scripted')
    .stage('classify', 'fan_out', {
      dependsOn: ['extract'],
      with: { stage: { run: 'scriptd', retry_budget: { max_attempts: 0 } }, max_concurrent: 0, extra: true },
    });
  await expect(h.client.start(spec, null)).rejects.toThrow(
    [
      'pipeline bad-fan is invalid:',
      '  - stage classify: with.max_concurrent: must be at least 1',
      '  - stage classify: with.extra: unknown field; the fields here are: from, items, stage, max_concurrent, on_item_failure, elements_per_run',
      // The element stage is checked too, though the settings around it are wrong.
      '  - stage classify: with.stage.retry_budget.max_attempts: must be at least 1 (it includes the first attempt)',
    ].join('\n'),
  );
  const inner = pipeline('bad-inner')
    .stage('extract', 'scripted')
    .stage('classify', 'fan_out', {
      dependsOn: ['extract'],
      with: { stage: { run: 'scriptd', retry_budget: { max_attempts: 0 } } },
    });
  await expect(h.client.start(inner, null)).rejects.toThrow(
    [
      'pipeline bad-inner is invalid:',
      '  - stage classify: with.stage.retry_budget.max_attempts: must be at least 1 (it includes the first attempt)',
    ].join('\n'),
  );
  // The client knows no implementations; the worker checks the element stage's against its own, before any stage runs.
  const unknown = pipeline(`unknown-inner-${h.taskQueue}`)
    .stage('extract', 'scripted')
    .stage('classify', 'fan_out', { dependsOn: ['extract'], with: { stage: { run: 'scriptd' } } });
  const id = h.id('unknown-inner');
  await h.client.start(unknown, null, { id });
  const result = await h.client.result(id);
  expect(result.status).toBe('failed');
  expect(result.error).toContain(
    'stage classify: with.stage: unknown stage implementation "scriptd" (did you mean "scripted"?)',
  );
  expect((await h.client.getState(id)).stages).toEqual({});
}, 30_000);

it('keeps the parent history small however large the elements: they travel to their children by reference', async () => {
  const id = h.id('large');
  const big = 'x'.repeat(50_000);
  const emails = Array.from({ length: 20 }, (_, i) => ({
    subject: `mail ${i}`,
    body: big,
    script: { classify: [{ output: { n: i } }] },
  }));
  await h.client.start(
    triage(`triage-large-${h.taskQueue}`, { max_concurrent: 5 }),
    { script: { extract: [{ output: { emails } }] } },
    { id },
  );
  expect((await h.client.result(id)).status).toBe('completed');
  const description = await h.temporal.workflow.getHandle(id).describe();
  // 20 elements of 50 KB: 1 MB of elements, and the parent's history holds references only.
  expect(description.historySize).toBeLessThan(60_000);
  expect((await fanOutArtefact(id)).results.map((r) => r.artefact)).toEqual(emails.map((_, i) => ({ n: i })));
}, 90_000);

/** The runs of a workflow that continued as new, first to last: each run's id and its history. */
async function runsOf(
  workflowId: string,
): Promise<{ runId: string; bytes: number; payloadBytes: number; events: number }[]> {
  const first =
    (await h.temporal.workflow.getHandle(workflowId).describe()).raw.workflowExecutionInfo?.firstRunId ?? undefined;
  const runs: { runId: string; bytes: number; payloadBytes: number; events: number }[] = [];
  for (let runId: string | undefined = first; runId;) {
    const handle = h.temporal.workflow.getHandle(workflowId, runId);
    const history = await handle.fetchHistory();
    runs.push({
      runId,
      bytes: (await handle.describe()).historySize ?? 0,
      payloadBytes: payloadBytes(history),
      events: history.events!.length,
    });
    runId = history.events!.at(-1)?.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId ?? undefined;
  }
  return runs;
}

/** The bytes of every payload in a history: what its inputs, results and signals weigh. */
function payloadBytes(value: unknown): number {
  if (Array.isArray(value)) return value.reduce<number>((n, v) => n + payloadBytes(v), 0);
  if (typeof value !== 'object' || value === null) return 0;
  const data = (value as { data?: unknown }).data;
  if (data instanceof Uint8Array && 'metadata' in value) return data.length;
  return Object.values(value).reduce<number>((n, v) => n + payloadBytes(v), 0);
}

/** An element of exactly `bytes` bytes of JSON whose `classify` stage answers `{n: i}` (or fails, for `broken`). */
function sized(i: number, bytes: number, broken = false): Json {
  const answer: Json = broken ? { error: 'cannot classify this one' } : { output: { n: i } };
  const element = { s: '', script: { classify: [answer] } };
  const padding = bytes - JSON.stringify(element).length;
  if (padding < 0) throw new Error(`an element cannot be as small as ${bytes} B`);
  return { ...element, s: 'x'.repeat(padding) };
}

it("runs a fan-out over several runs of the fan-out workflow: results in input order, a failure reported, every run's history bounded", async () => {
  const id = h.id('wide');
  const count = 120;
  const elements = Array.from({ length: count }, (_, i) => sized(i, 80, i === 77));
  await h.client.start(
    triage(`triage-wide-${h.taskQueue}`, { max_concurrent: 10, elements_per_run: 25 }),
    { script: { extract: [{ output: { emails: elements } }] } },
    { id },
  );
  const result = await h.client.result(id);
  expect(result.status).toBe('completed');
  const artefact = await fanOutArtefact(id);
  expect(artefact).toMatchObject({ completed: count - 1, failed: 1 });
  expect(artefact.results.map((r) => [r.index, r.id, r.status])).toEqual(
    elements.map((_, i) => [i, `${id}.classify.1.${i}`, i === 77 ? 'failed' : 'completed']),
  );
  expect(artefact.results.map((r) => r.artefact ?? null)).toEqual(elements.map((_, i) => (i === 77 ? null : { n: i })));
  expect(artefact.results[77]!.error).toContain('cannot classify this one');
  const state = await h.client.getState(id);
  expect(state.stages['classify']!.fanOut).toEqual({ total: count, running: 0, completed: count - 1, failed: 1 });
  expect(state.events.filter((e) => e.type === 'FanOutItemFailed').map((e) => e.details?.index)).toEqual([77]);
  expect(state.events.find((e) => e.type === 'FanOutCompleted')?.details).toEqual({
    completed: count - 1,
    failed: 1,
    runs: 5,
  });
  expect(state.stages['route']!.status).toBe('completed');

  // Five runs of 25 elements (the last of 20), each its history under 2 KB per element it ran; the work item
  // holds the one fan-out.
  const runs = await runsOf(`${id}.classify.1`);
  expect(runs).toHaveLength(5);
  for (const run of runs) expect(run.bytes).toBeLessThan(25 * 2_000 + 10_000);
  const item = await h.temporal.workflow.getHandle(id).describe();
  expect(item.historySize).toBeLessThan(30_000);
  // Elements are children of the fan-out workflow, each a work item of its own.
  const child = await h.temporal.workflow.getHandle(`${id}.classify.1.119`).describe();
  expect(child.parentExecution?.workflowId).toBe(`${id}.classify.1`);
  expect(child.typedSearchAttributes.get(TreadlePipeline)).toBe(`triage-wide-${h.taskQueue}.classify`);
}, 240_000);

it('costs the fan-out the same bytes per element for 60 B and 250 B elements: they travel by page and place', async () => {
  // Ids of the same length: the elements' ids are in their inputs and results.
  const base = h.id('sizes');
  const payloads: Record<number, number> = {};
  for (const [bytes, suffix] of [
    [60, 'a'],
    [250, 'b'],
  ] as const) {
    const id = `${base}-${suffix}`;
    const elements = Array.from({ length: 20 }, (_, i) => sized(i, bytes));
    expect(elements.every((e) => JSON.stringify(e).length === bytes)).toBe(true);
    await h.client.start(
      triage(`triage-sizes-${h.taskQueue}`, { max_concurrent: 5 }),
      { script: { extract: [{ output: { emails: elements } }] } },
      { id },
    );
    expect((await h.client.result(id)).status).toBe('completed');
    const [run, ...more] = await runsOf(`${id}.classify.1`);
    expect(more).toEqual([]);
    payloads[bytes] = run!.payloadBytes;
  }
  // Every input, result and signal of the fan-out workflow weighs the same, byte for byte.
  expect(payloads[250]).toBe(payloads[60]);
}, 120_000);

it('refuses a list over the limit with the limit and what to do', async () => {
  const id = h.id('too-many');
  const spec = pipeline(`too-many-${h.taskQueue}`).stage('classify', 'fan_out', {
    with: { stage: { run: 'scripted' } },
  });
  await h.client.start(
    spec,
    Array.from({ length: 1_000_001 }, () => 0),
    { id },
  );
  expect((await h.client.result(id)).status).toBe('failed');
  expect((await h.client.getState(id)).stages['classify']!.error).toContain(
    'input has 1000001 elements; a fan_out takes at most 1000000',
  );
}, 120_000);

it('runs an item started on engine 4 as engine 4 did: every element a child of the work item, at most 2,000', async () => {
  const old = await startHarness({ engineVersion: 4 });
  try {
    const id = old.id('engine-4');
    await old.client.start(
      triage(`triage-engine-4-${old.taskQueue}`, { max_concurrent: 2 }),
      { script: { extract: [{ output: { emails: [email('a'), email('broken'), email('b')] } }] } },
      { id },
    );
    expect((await old.client.result(id)).status).toBe('completed');
    const state = await old.client.getState(id);
    expect(state.stages['classify']!.fanOut).toEqual({ total: 3, running: 0, completed: 2, failed: 1 });
    expect((await old.temporal.workflow.getHandle(`${id}.classify.1.1`).describe()).parentExecution?.workflowId).toBe(
      id,
    );
    await expect(old.temporal.workflow.getHandle(`${id}.classify.1`).describe()).rejects.toThrow(/not found/i);

    const wide = old.id('engine-4-wide');
    await old.client.start(
      pipeline(`engine-4-wide-${old.taskQueue}`).stage('classify', 'fan_out', { with: { stage: { run: 'scripted' } } }),
      Array.from({ length: 2_001 }, () => 0),
      { id: wide },
    );
    expect((await old.client.result(wide)).status).toBe('failed');
    expect((await old.client.getState(wide)).stages['classify']!.error).toContain(
      'input has 2001 elements; a fan_out takes at most 2000 (each is a child workflow)',
    );
  } finally {
    await old.shutdown();
  }
}, 120_000);
