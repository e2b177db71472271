/**
 * Payload discipline on the real server: history grows by a bounded amount per attempt, whatever the size
 * of the input, the artefacts, the gate feedback, the reviewer's edits or the `with:` config.
 *
 * Cases:
 * - a 1 MB document through ten gated stages, each rejected twice with 20 KB of feedback (the run that used
 *   to be terminated for history size), against the same run with a 16 KB document;
 * - one stage taking twenty attempts: an activity's input does not grow with the attempts before it;
 * - a join of 20 stages that each produce 1 MB;
 * - a 1 MB `with:` config, and a 3 MB input (over Temporal's 2 MB payload limit, so it must travel by reference);
 *   the spec carrying that config is itself over 256 KiB and goes through the claim-check (ExternalStorage);
 * - a 400 KB edit sent inline by signal (as `temporal workflow signal` would) reaches dependents by reference;
 * - a rejected 500 KB review signal is recorded by its size, never copied into the event list;
 * - the `state` query pages events, and `watch` reads only new ones.
 */
import { Client } from '@temporalio/client';
import { Registry, type ImplementationContext, type StageContext } from '../../src/activities/registry';
import { TreadleClient } from '../../src/client';
import { pipeline } from '../../src/kinds/builder';
import { isBlobRef, type Json } from '../../src/model/shapes';
import { reviewSignal } from '../../src/workflow-kit/messages';
import { defaultRegistry } from '../../src/worker';
import { eventually, startHarness, type Harness } from '../support/harness';

/** Implementations that move big payloads: the document, its copies, long feedback. */
function bigRegistry(): Registry {
  return defaultRegistry().merge(
    new Registry()
      // A stage that takes a while, for watching an item while it runs.
      .stage('sleep-300', async () => {
        await new Promise((resolve) => setTimeout(resolve, 300));
        return { outcome: 'completed' as const };
      })
      .stage('copy-doc', async (ctx) => ({
        outcome: 'completed' as const,
        ...(await copyDoc(ctx)),
      }))
      // Model calls by the hundred (`with.calls`), from the stage and from a gate that rejects twice.
      .stage(
        'chatty',
        async (ctx) => ({ outcome: 'completed' as const, summary: `${await talk(ctx, ctx.config)} calls` }),
        { usesAgent: true },
      )
      .gate(
        'chatty-reject-twice',
        async (ctx) => {
          await talk(ctx, ctx.config);
          return ctx.attempt >= 3
            ? { kind: 'accepted' }
            : { kind: 'rejected', feedback: { summary: `attempt ${ctx.attempt}: again`, failedCriteria: [] } };
        },
        { usesAgent: true },
      )
      .gate('reject-twice', async (ctx) => {
        if (ctx.attempt >= 3) return { kind: 'accepted' };
        const long = 'the structure is wrong; '.repeat(850); // ~20 KB of feedback
        return {
          kind: 'rejected',
          feedback: {
            summary: `attempt ${ctx.attempt}: ${long}`,
            failedCriteria: [{ name: 'structure', expected: 'sections', actual: long, passed: false }],
          },
        };
      }),
  );
}

/** Calls the scripted model `config.calls` times, each call its own prompt; returns how many. */
async function talk(ctx: ImplementationContext, config: Json | undefined): Promise<number> {
  const calls = (config as { calls?: number } | undefined)?.calls ?? 1;
  const agent = ctx.agent('scripted');
  for (let i = 0; i < calls; i++)
    await agent.run({
      messages: [{ role: 'user', content: `call ${i + 1} of ${ctx.stage}/${ctx.attempt}` }],
      correlationId: ctx.idempotencyKey,
      signal: ctx.signal,
    });
  return calls;
}

/** Copies the document into its artefact and reports what it received, by size. */
async function copyDoc(ctx: StageContext): Promise<{ artefact: Json; summary: string }> {
  const doc = (ctx.input as { doc: string }).doc;
  const upstreamChars = Object.values(ctx.upstream).reduce<number>(
    (n, a) => n + ((a as { text?: string }).text?.length ?? 0),
    0,
  );
  const feedbackChars = ctx.feedback ? JSON.stringify(ctx.feedback).length : 0;
  const configChars = ctx.config !== undefined ? JSON.stringify(ctx.config).length : 0;
  return {
    artefact: {
      text: `${ctx.stage}/${ctx.attempt}:${doc}`,
      upstreamChars,
      feedbackChars,
      configChars,
      previous: ctx.previousAttempts.length,
    },
    summary: `${doc.length} chars`,
  };
}

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ registry: bigRegistry() });
});
afterAll(async () => {
  await h?.shutdown();
});

async function historyBytes(id: string): Promise<{ bytes: number; events: number }> {
  const description = await h.temporal.workflow.getHandle(id).describe();
  return { bytes: description.historySize ?? Number.NaN, events: description.historyLength };
}

function tenGatedStages() {
  let p = pipeline('ten-gated');
  for (let i = 1; i <= 10; i++) {
    p = p.stage(`s${i}`, 'copy-doc').qualityGate(`s${i}`, 'reject-twice').retryBudget(`s${i}`, { maxAttempts: 3 });
    if (i > 1) p = p.dependency(`s${i}`, `s${i - 1}`);
  }
  return p;
}

it('keeps a 1 MB document through ten gated stages with two rejections each as small as a 16 KB one', async () => {
  const big = h.id('big');
  const small = h.id('small');
  await h.client.start(tenGatedStages(), { doc: 'x'.repeat(1024 * 1024) }, { id: big });
  await h.client.start(tenGatedStages(), { doc: 'x'.repeat(16 * 1024) }, { id: small });
  const [bigResult, smallResult] = await Promise.all([h.client.result(big), h.client.result(small)]);
  expect(bigResult.status).toBe('completed');
  expect(smallResult.status).toBe('completed');

  const state = await h.client.getState(big);
  for (let i = 1; i <= 10; i++) {
    const stage = state.stages[`s${i}`]!;
    expect(stage.attempts).toHaveLength(3);
    // Long feedback is kept by reference in the history; the implementation received all of it.
    expect(stage.attempts[0]!.feedback!.ref).toMatch(/^sha256:/);
    const output = (await h.client.readArtefact(stage.artefact)) as {
      text: string;
      upstreamChars: number;
      feedbackChars: number;
      previous: number;
    };
    expect(output.text.length).toBe(1024 * 1024 + `s${i}/3:`.length);
    expect(output.feedbackChars).toBeGreaterThan(20_000);
    expect(output.previous).toBe(2);
    if (i > 1) expect(output.upstreamChars).toBe(1024 * 1024 + `s${i - 1}/3:`.length);
    expect(isBlobRef(stage.artefact)).toBe(true);
  }
  const bigHistory = await historyBytes(big);
  const smallHistory = await historyBytes(small);
  // 30 attempts (stage + gate each): at most ~10 KB per attempt, and the payload size does not show.
  expect(bigHistory.bytes).toBeLessThan(30 * 10 * 1024);
  expect(Math.abs(bigHistory.bytes - smallHistory.bytes)).toBeLessThan(4 * 1024);
  expect(bigHistory.events).toBe(smallHistory.events);
  process.stdout.write(
    `history of 30 attempts: 1 MB document ${bigHistory.bytes} bytes, 16 KB document ${smallHistory.bytes} bytes, ${bigHistory.events} events\n`,
  );
});

it('keeps three attempts of 400 model calls each (stage and gate) under 10 KB each, smaller than three of 4, and counts every call', async () => {
  const chatty = (calls: number) =>
    pipeline(`chatty-${calls}`)
      .stage('talk', 'chatty', { with: { calls } })
      .qualityGate('talk', 'chatty-reject-twice', { calls })
      .retryBudget('talk', { maxAttempts: 3 });
  const many = h.id('many-calls');
  const few = h.id('few-calls');
  await h.client.start(chatty(200), {}, { id: many });
  await h.client.start(chatty(2), {}, { id: few });
  expect((await h.client.result(many)).status).toBe('completed');
  expect((await h.client.result(few)).status).toBe('completed');

  const state = await h.client.getState(many);
  const attempts = state.stages.talk!.attempts;
  expect(attempts).toHaveLength(3);
  for (const attempt of attempts) {
    // Stage and gate: 400 calls, their totals inline, their records in two stored batches.
    expect(attempt.usage).toMatchObject({ calls: 400, errors: 0 });
    expect(attempt.calls).toBeUndefined();
    expect(attempt.storedCalls!.map((s) => s.count)).toEqual([200, 200]);
  }
  expect(state.usage!.total.calls).toBe(1200);
  // The stored records are the calls: their tokens add up to the totals the history carries.
  const stored = (
    await Promise.all(
      attempts
        .flatMap((a) => a.storedCalls!)
        .map(async (s) => JSON.parse((await h.blobs.get(s.ref)).toString('utf8')) as { inputTokens: number }[]),
    )
  ).flat();
  expect(stored).toHaveLength(1200);
  expect(stored.reduce((sum, c) => sum + c.inputTokens, 0)).toBe(state.usage!.total.inputTokens);
  const fewState = await h.client.getState(few);
  expect(fewState.stages.talk!.attempts.map((a) => [a.calls?.length, a.storedCalls])).toEqual([
    [4, undefined],
    [4, undefined],
    [4, undefined],
  ]);

  const manyHistory = await historyBytes(many);
  const fewHistory = await historyBytes(few);
  expect(manyHistory.bytes).toBeLessThan(3 * 10 * 1024);
  // Two references an attempt take less room than four inline records: the number of calls does not show.
  expect(manyHistory.bytes).toBeLessThan(fewHistory.bytes);
  expect(manyHistory.events).toBe(fewHistory.events);
  // The audit reads them all back: a line per call.
  expect((await h.client.audit(many)).filter((e) => e.kind === 'model_call')).toHaveLength(1200);
  process.stdout.write(
    `history of 3 attempts: 400 model calls each ${manyHistory.bytes} bytes, 4 calls each ${fewHistory.bytes} bytes\n`,
  );
});

it('joins twenty 1 MB artefacts by reference', async () => {
  let p = pipeline('wide-join').stage('join', 'copy-doc');
  for (let i = 1; i <= 20; i++) p = p.stage(`part${i}`, 'copy-doc').dependency('join', `part${i}`);
  const id = h.id('join');
  await h.client.start(p, { doc: 'y'.repeat(1024 * 1024) }, { id });
  expect((await h.client.result(id)).status).toBe('completed');
  const join = (await h.client.readArtefact((await h.client.getState(id)).stages.join!.artefact)) as {
    upstreamChars: number;
  };
  expect(join.upstreamChars).toBeGreaterThan(20 * 1024 * 1024);
  const { bytes } = await historyBytes(id);
  // 21 attempts, each input naming up to 20 references.
  expect(bytes).toBeLessThan(21 * 10 * 1024);
});

it('takes a 3 MB input and a 1 MB with: config by reference', async () => {
  const id = h.id('config');
  const config = { glossary: 'z'.repeat(1024 * 1024) };
  const spec = pipeline('big-config').stage('only', 'copy-doc', { with: config as Json });
  await h.client.start(spec, { doc: 'w'.repeat(3 * 1024 * 1024) }, { id });
  expect((await h.client.result(id)).status).toBe('completed');
  const output = (await h.client.readArtefact((await h.client.getState(id)).stages.only!.artefact)) as {
    text: string;
    configChars: number;
  };
  expect(output.text.length).toBeGreaterThan(3 * 1024 * 1024);
  expect(output.configChars).toBe(JSON.stringify(config).length);
  // The spec (with its 1 MB config) is the run's input: over 256 KiB, so the claim-check stores it; the
  // prepare step stores the config, so activities get a reference.
  const { bytes } = await historyBytes(id);
  expect(bytes).toBeLessThan(40 * 1024);
  const started = (await h.temporal.workflow.getHandle(id).fetchHistory()).events![0]!
    .workflowExecutionStartedEventAttributes!;
  expect(
    started.input!.payloads![0]!.metadata!.messageType &&
      Buffer.from(started.input!.payloads![0]!.metadata!.messageType).toString(),
  ).toBe('temporal.api.sdk.v1.ExternalStorageReference');
});

it('stores an inline edit sent by signal once, and records a rejected signal by its size only', async () => {
  const spec = pipeline('edit-signal')
    .stage('draft', 'copy-doc')
    .stage('publish', 'copy-doc')
    .dependency('publish', 'draft')
    .reviewPolicy('draft', 'always');
  const id = h.id('edit');
  await h.client.start(spec, { doc: 'short' }, { id });
  await eventually(
    async () => ((await h.client.getState(id)).status === 'waiting_review' ? true : undefined),
    30_000,
    'the review',
  );
  const handle = h.temporal.workflow.getHandle(id);
  const before = await historyBytes(id);

  // Bad input (an unknown stage) carrying 500 KB: recorded as what was wrong and how big, not what it held.
  await handle.signal(reviewSignal, {
    stage: 'nope',
    outcome: { kind: 'approve_with_edits', artefact: { text: 'b'.repeat(500 * 1024) } },
    reviewer: 'eve',
  });
  const rejected = await eventually(
    async () => (await h.client.events(id)).find((e) => e.type === 'ReviewInputRejected'),
    20_000,
    'the rejected signal',
  );
  expect(rejected.stage).toBe('nope');
  expect(rejected.details).toEqual({ outcomeKind: 'approve_with_edits', payloadBytes: expect.any(Number) });
  expect(rejected.details!.payloadBytes as number).toBeGreaterThan(500 * 1024);
  expect(JSON.stringify(await h.client.getState(id)).length).toBeLessThan(20 * 1024);

  // A 400 KB edit sent inline: the signal itself is in the history once, dependents get a reference.
  await handle.signal(reviewSignal, {
    stage: 'draft',
    outcome: { kind: 'approve_with_edits', artefact: { text: 'e'.repeat(400 * 1024) } },
    reviewer: 'ann',
  });
  expect((await h.client.result(id)).status).toBe('completed');
  const state = await h.client.getState(id);
  expect(isBlobRef(state.stages.draft!.artefact)).toBe(true);
  const publish = (await h.client.readArtefact(state.stages.publish!.artefact)) as { upstreamChars: number };
  expect(publish.upstreamChars).toBe(400 * 1024);
  const after = await historyBytes(id);
  // Two signals (500 KB + 400 KB) are history by nature; what follows them adds little.
  expect(after.bytes - before.bytes).toBeLessThan(900 * 1024 + 40 * 1024);
});

it('pages events in the state query and watches only new ones', async () => {
  const id = h.id('pages');
  await h.client.start(tenGatedStages(), { doc: 'p' }, { id });
  await h.client.result(id);
  const all = await h.client.events(id);
  expect(all.map((e) => e.seq)).toEqual(all.map((_, i) => i + 1));
  const page = await h.client.getState(id, { eventsAfter: 10, eventLimit: 5 });
  expect(page.events.map((e) => e.seq)).toEqual([11, 12, 13, 14, 15]);
  expect(page.eventCount).toBe(all.length);
  const seen: number[] = [];
  await h.client.watch(id, (e) => seen.push(e.seq), { afterSeq: all.length - 3 });
  expect(seen).toEqual([all.length - 2, all.length - 1, all.length]);

  // While an item runs, watch polls the light `events` query (no stages, only new events); it reads the whole
  // state once, at the end. A client interceptor records every query it sends, with each answer's fields.
  const queries: { type: string; args: unknown; fields: string[] }[] = [];
  const recording = new Client({
    connection: h.temporal.connection,
    namespace: h.temporal.options.namespace,
    interceptors: {
      workflow: [
        {
          async query(input, next) {
            const answer = (await next(input)) as Record<string, unknown>;
            queries.push({ type: input.queryType, args: input.args[0], fields: Object.keys(answer ?? {}).sort() });
            return answer;
          },
        },
      ],
    },
  });
  const watcher = new TreadleClient(recording, { taskQueue: h.taskQueue, blobs: h.blobs });
  const slow = h.id('pages-watched');
  await h.client.start(
    pipeline('watched')
      .stage('a', 'sleep-300')
      .stage('b', 'sleep-300', { dependsOn: ['a'] })
      .stage('c', 'sleep-300', { dependsOn: ['b'] }),
    null,
    { id: slow },
  );
  const watched: number[] = [];
  const final = await watcher.watch(slow, (e) => watched.push(e.seq));
  expect(final.status).toBe('completed');
  expect(watched).toEqual(watched.map((_, i) => i + 1));
  const polls = queries.filter((q) => q.type === 'events');
  // About a second of polling every 500 ms; each poll asked only for events after the last one seen.
  expect(polls.length).toBeGreaterThanOrEqual(2);
  for (const poll of polls) {
    expect(poll.fields).not.toContain('stages');
    expect(poll.args).toEqual({ eventsAfter: expect.any(Number) });
  }
  expect(polls.map((p) => (p.args as { eventsAfter: number }).eventsAfter)).toEqual(
    [...polls.map((p) => (p.args as { eventsAfter: number }).eventsAfter)].sort((a, b) => a - b),
  );
  expect(queries.filter((q) => q.type === 'state')).toHaveLength(1);
  expect(queries.at(-1)!.type).toBe('state');
});

it('grows by a bounded amount per attempt however many attempts a stage takes', async () => {
  // One stage, twenty attempts, each a 1 MB artefact rejected with 20 KB of feedback (accepted at 20).
  const registry = new Registry().gate('reject-until-20', async (ctx) =>
    ctx.attempt >= 20
      ? { kind: 'accepted' }
      : {
          kind: 'rejected',
          feedback: { summary: `attempt ${ctx.attempt}: ${'too vague; '.repeat(2000)}`, failedCriteria: [] },
        },
  );
  const many = await startHarness({ registry: bigRegistry().merge(registry) });
  try {
    const id = many.id('many');
    const spec = pipeline('many-attempts')
      .stage('only', 'copy-doc')
      .qualityGate('only', 'reject-until-20')
      .retryBudget('only', { maxAttempts: 20 });
    await many.client.start(spec, { doc: 'm'.repeat(1024 * 1024) }, { id });
    expect((await many.client.result(id)).status).toBe('completed');
    const history = await many.temporal.workflow.getHandle(id).fetchHistory();
    // Bytes of the stage activity's input per attempt: what the previous attempts add to it.
    const inputs = history
      .events!.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'copy-doc')
      .map((e) => e.activityTaskScheduledEventAttributes!.input!.payloads![0]!.data!.length);
    expect(inputs).toHaveLength(20);
    process.stdout.write(`stage input bytes by attempt: ${inputs.join(' ')}\n`);
    const { bytes } = await many.temporal.workflow
      .getHandle(id)
      .describe()
      .then((d) => ({ bytes: d.historySize ?? Number.NaN }));
    process.stdout.write(`history of 20 attempts: ${bytes} bytes\n`);
    expect(bytes).toBeLessThan(20 * 10 * 1024);
    // From the third attempt on, the input stays the same size: the log is named, not carried.
    expect(inputs[19]!).toBeLessThan(inputs[2]! + 100);
  } finally {
    await many.shutdown();
  }
});
