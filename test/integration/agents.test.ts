/**
 * LLM-backed stages and gates on the real Temporal server, with the real Anthropic SDK client pointed at
 * a local fake Messages API. Cases: structured reply and call log; a malformed reply becoming a rejected
 * attempt whose feedback reaches the next prompt; 429 and 529 waited out inside the attempt (also items at
 * once past the fake's concurrency limit); 500 retried by Temporal; 400 failing at once; a slow reply past the
 * attempt timeout; the llm-judge gate escalating; composed gates; the token budget; conversation memory
 * across stages; usage via the client and the CLI; the document pipeline's LLM variant with the scripted
 * agent and with the fake server.
 */
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { AnthropicAgent } from '../../src/agents/anthropic';
import { defaultAgentProviders } from '../../src/agents';
import { promptHash } from '../../src/agents/prompt-hash';
import { pipeline } from '../../src/kinds/builder';
import type { WorkItemState } from '../../src/model/state';
import { readPipelineFile } from '../../src/pipelines/catalog';
import { startFakeAnthropic, type FakeAnthropic } from '../support/fake-anthropic';
import { eventually, startHarness, type Harness } from '../support/harness';
import {
  ATTEMPT_TIMEOUT,
  ATTEMPT_TIMEOUT_TEXT,
  FAR_TOO_SLOW_MS,
  PROMPT_CANCELLATION,
} from '../support/attempt-timeout';

let fake: FakeAnthropic;
let h: Harness;
beforeAll(async () => {
  fake = await startFakeAnthropic();
  h = await startHarness({
    agents: {
      ...defaultAgentProviders(),
      anthropic: () => new AnthropicAgent({ apiKey: 'test-key', baseURL: fake.baseURL }),
    },
    worker: PROMPT_CANCELLATION,
  });
});
afterAll(async () => {
  await h?.shutdown();
  await fake?.close();
});
beforeEach(() => fake.reset());

const SCHEMA = { type: 'object', properties: { summary: { type: 'string', minLength: 5 } }, required: ['summary'] };
const summarize = (extra: Record<string, unknown> = {}) => ({
  name: 'summarize',
  stages: [
    {
      name: 'summarize',
      run: 'llm',
      agent: 'anthropic',
      with: {
        model: 'claude-sonnet-4-6',
        prompt: 'Summarize for an engineer: {{ input.text }}',
        output_schema: SCHEMA,
      },
      retry_budget: { max_attempts: 3, on_exhausted: 'escalate' },
      activity: { retry: { initial_interval: '100ms', maximum_attempts: 4 } },
      ...extra,
    },
  ],
});
const userPrompt = (i: number): string => {
  const body = fake.requests[i]!.body as { messages: { content: string }[] };
  return body.messages.map((m) => m.content).join('\n');
};
/** Every string in a history, payloads decoded: what anyone who can read the history sees. */
const textOf = (value: unknown): string => {
  if (value instanceof Uint8Array) return Buffer.from(value).toString('utf8');
  if (typeof value === 'string') return value;
  if (value !== null && typeof value === 'object') return Object.values(value).map(textOf).join('\n');
  return '';
};
/** The contents of every file under a blob store's folder. */
const storedTexts = (dir: string): string[] =>
  readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => readFileSync(path.join(entry.parentPath, entry.name), 'utf8'));
const until = (id: string, status: WorkItemState['status']) =>
  eventually(
    async () => {
      const s = await h.client.getState(id);
      return s.status === status ? s : undefined;
    },
    30_000,
    `${id} to be ${status}`,
  );

it('calls the model with the rendered prompt and a forced schema tool, and logs the call', async () => {
  fake.enqueue({
    kind: 'tool',
    input: { summary: 'Durable agents survive crashes.' },
    usage: { input_tokens: 120, output_tokens: 30 },
  });
  const id = h.id();
  await h.client.start(summarize(), { text: 'Temporal keeps agent pipelines alive.' }, { id });
  expect((await h.client.result(id)).status).toBe('completed');
  const state = await h.client.getState(id);
  expect(state.stages.summarize!.artefact).toEqual({ summary: 'Durable agents survive crashes.' });
  const body = fake.requests[0]!.body as { model: string; tool_choice: unknown; tools: { input_schema: unknown }[] };
  expect(body.model).toBe('claude-sonnet-4-6');
  expect(body.tool_choice).toEqual({ type: 'tool', name: 'respond' });
  expect(body.tools[0]!.input_schema).toEqual(SCHEMA);
  expect(userPrompt(0)).toContain('Summarize for an engineer: Temporal keeps agent pipelines alive.');
  const [call] = state.stages.summarize!.attempts[0]!.calls!;
  expect(call).toEqual(
    expect.objectContaining({
      correlationId: `${id}/summarize/1`,
      provider: 'anthropic',
      model: 'claude-sonnet-4-6',
      inputTokens: 120,
      outputTokens: 30,
      status: 'success',
    }),
  );
  // The call log keeps the hash of what was sent, never the prompt: not in the state, the history or the blob store.
  const sent = 'Summarize for an engineer: Temporal keeps agent pipelines alive.';
  expect(call!.promptHash).toBe(
    promptHash({
      model: 'claude-sonnet-4-6',
      messages: [{ role: 'user', content: userPrompt(0) }],
      outputSchema: SCHEMA,
    }),
  );
  const history = textOf(await h.temporal.workflow.getHandle(id).fetchHistory());
  expect(history).toContain(call!.promptHash);
  expect(history).not.toContain(sent);
  expect(JSON.stringify(state)).not.toContain(sent);
  expect(storedTexts(h.blobs.dir).filter((text) => text.includes(sent))).toEqual([]);
  expect(state.usage!.total).toEqual(
    expect.objectContaining({ calls: 1, inputTokens: 120, outputTokens: 30, estimatedCostUsd: 0.00081 }),
  );
});

it('turns a malformed reply into a rejected attempt whose feedback reaches the next prompt', async () => {
  fake.enqueue({ kind: 'tool', input: { summary: 42 } }, { kind: 'tool', input: { summary: 'A proper summary.' } });
  const id = h.id();
  await h.client.start(summarize(), { text: 'x' }, { id });
  expect((await h.client.result(id)).status).toBe('completed');
  const { stages } = await h.client.getState(id);
  const [first, second] = stages.summarize!.attempts;
  expect(first!.verdict?.kind).toBe('rejected');
  expect(first!.feedback?.summary).toMatch(/^the reply did not match the output schema: summary: /);
  expect(second!.verdict).toBeUndefined();
  expect(userPrompt(1)).toContain(
    'Your previous attempt was rejected: the reply did not match the output schema: summary:',
  );
  expect(stages.summarize!.attempts.flatMap((a) => a.calls ?? [])).toHaveLength(2);
});

it('waits out a 429 (retry-after) and a 529 inside the first attempt: no activity retry, no failed attempt', async () => {
  fake.enqueue(
    { kind: 'error', status: 429, type: 'rate_limit_error', message: 'slow down', headers: { 'retry-after': '1' } },
    {
      kind: 'error',
      status: 529,
      type: 'overloaded_error',
      message: 'overloaded',
      headers: { 'retry-after-ms': '200' },
    },
    { kind: 'tool', input: { summary: 'After the storm.' } },
  );
  const id = h.id();
  await h.client.start(summarize(), { text: 'x' }, { id });
  expect((await h.client.result(id)).status).toBe('completed');
  const { stages, usage } = await h.client.getState(id);
  expect(stages.summarize!.attempts).toHaveLength(1);
  expect(stages.summarize!.attempts[0]!.attempt).toBe(1);
  expect(stages.summarize!.attempts[0]!.verdict).toBeUndefined();
  expect(fake.requests).toHaveLength(3);
  // Each pushed-back try is in the attempt's call log, as throttled, with what it waited.
  expect(stages.summarize!.attempts[0]!.calls!.map((c) => [c.status, c.error])).toEqual([
    ['throttled', 'anthropic 429 rate_limit_error: slow down; waited 1000 ms (retry-after)'],
    ['throttled', 'anthropic 529 overloaded_error: overloaded; waited 200 ms (retry-after)'],
    ['success', undefined],
  ]);
  expect(usage!.total).toEqual(expect.objectContaining({ calls: 3 }));
  // One activity execution (Temporal records the last one's number): nothing was retried.
  const history = await h.temporal.workflow.getHandle(id).fetchHistory();
  const starts = history.events!.filter((e) => e.activityTaskStartedEventAttributes);
  expect(starts.map((e) => e.activityTaskStartedEventAttributes!.attempt)).toEqual([1]);
  expect(history.events!.some((e) => e.activityTaskFailedEventAttributes)).toBe(false);
});

it("items at once past the provider's concurrency limit all complete on their first attempt", async () => {
  fake.configure({ limits: { 'claude-sonnet-4-6': { maxConcurrent: 1 } }, latencyMs: 300 });
  fake.setDefault({ kind: 'tool', input: { summary: 'One at a time.' } });
  try {
    const ids = [h.id(), h.id(), h.id()];
    await Promise.all(ids.map((id) => h.client.start(summarize(), { text: id }, { id })));
    const results = await Promise.all(ids.map((id) => h.client.result(id)));
    expect(results.map((r) => r.status)).toEqual(['completed', 'completed', 'completed']);
    const stats = fake.stats();
    expect(stats.rateLimited).toBeGreaterThan(0);
    expect(stats.maxInFlight).toBe(1);
    for (const id of ids) {
      const { stages } = await h.client.getState(id);
      expect(stages.summarize!.attempts).toHaveLength(1);
      expect(stages.summarize!.attempts[0]!.calls!.at(-1)!.status).toBe('success');
      // Temporal records the last execution's number: 1, so nothing was retried.
      const history = await h.temporal.workflow.getHandle(id).fetchHistory();
      const starts = history.events!.filter((e) => e.activityTaskStartedEventAttributes);
      expect(starts.map((e) => e.activityTaskStartedEventAttributes!.attempt)).toEqual([1]);
    }
  } finally {
    fake.configure({});
  }
});

it('retries a 500 through Temporal, without spending quality attempts', async () => {
  fake.enqueue(
    { kind: 'error', status: 500, type: 'api_error', message: 'Internal server error' },
    { kind: 'tool', input: { summary: 'After the storm.' } },
  );
  const id = h.id();
  await h.client.start(summarize(), { text: 'x' }, { id });
  expect((await h.client.result(id)).status).toBe('completed');
  const { stages } = await h.client.getState(id);
  expect(stages.summarize!.attempts).toHaveLength(1);
  expect(fake.requests).toHaveLength(2);
  // The calls of the failed execution travelled on heartbeats into the successful one's log.
  expect(stages.summarize!.attempts[0]!.calls!.map((c) => c.status)).toEqual(['error', 'success']);
  const history = await h.temporal.workflow.getHandle(id).fetchHistory();
  const started = history.events!.find((e) => e.activityTaskStartedEventAttributes?.attempt === 2);
  expect(started).toBeDefined();
});

it("fails the stage at once on a 400, with the API's message", async () => {
  fake.enqueue({
    kind: 'error',
    status: 400,
    type: 'invalid_request_error',
    message: 'max_tokens: must be at most 8192',
  });
  const id = h.id();
  await h.client.start(summarize(), { text: 'x' }, { id });
  const result = await h.client.result(id);
  expect(result.status).toBe('failed');
  expect(fake.requests).toHaveLength(1);
  const { stages, usage } = await h.client.getState(id);
  expect(stages.summarize!.error).toContain('anthropic 400 invalid_request_error: max_tokens: must be at most 8192');
  // The failed call is in the log even though the activity failed for good.
  expect(stages.summarize!.attempts[0]!.calls!.map((c) => [c.status, c.error])).toEqual([
    ['error', expect.stringContaining('anthropic 400')],
  ]);
  expect(usage!.total).toEqual(expect.objectContaining({ calls: 1, errors: 1 }));
});

it('times out a slow reply, aborts the request, and retries with timeout feedback', async () => {
  fake.enqueue(
    { kind: 'slow', delayMs: FAR_TOO_SLOW_MS, then: { kind: 'tool', input: { summary: 'too late' } } },
    { kind: 'tool', input: { summary: 'In time this time.' } },
  );
  const id = h.id();
  await h.client.start(
    summarize({ retry_budget: { max_attempts: 2, attempt_timeout: ATTEMPT_TIMEOUT } }),
    { text: 'x' },
    { id },
  );
  expect((await h.client.result(id)).status).toBe('completed');
  const { stages, usage } = await h.client.getState(id);
  expect(stages.summarize!.attempts[0]).toEqual(
    expect.objectContaining({ timedOut: true, feedback: expect.objectContaining({ summary: ATTEMPT_TIMEOUT_TEXT }) }),
  );
  expect(stages.summarize!.attempts[1]!.timedOut).toBeUndefined();
  expect(stages.summarize!.artefact).toEqual({ summary: 'In time this time.' });
  expect(userPrompt(1)).toContain(ATTEMPT_TIMEOUT_TEXT);
  // The call the timeout cut off is in the attempt's call log and in the usage (the budget counts it).
  expect(stages.summarize!.attempts[0]!.calls!.map((c) => [c.correlationId, c.status])).toEqual([
    [`${id}/summarize/1`, 'timeout'],
  ]);
  expect(usage!.total.calls).toBe(2);
  // Attempts never overlap: attempt 2 is scheduled only after attempt 1's activity acknowledged the cancellation.
  const history = await h.temporal.workflow.getHandle(id).fetchHistory();
  const cancelled = history.events!.find((e) => e.activityTaskCanceledEventAttributes)!;
  const scheduled = history.events!.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'llm');
  expect(cancelled).toBeDefined();
  expect(scheduled).toHaveLength(2);
  expect(Number(String(scheduled[1]!.eventId))).toBeGreaterThan(Number(String(cancelled.eventId)));
}, 90_000);

it('an expired budget review whose policy approves lets the stage continue, as approval would', async () => {
  fake.enqueue(
    { kind: 'tool', input: { summary: 'x' }, usage: { input_tokens: 800, output_tokens: 300 } },
    { kind: 'tool', input: { summary: 'after the budget' } },
  );
  const id = h.id();
  await h.client.start(
    summarize({ review_ttl: '1s', on_review_expired: 'approve' }),
    { text: 'x' },
    { id, tokenBudget: 1000 },
  );
  expect((await h.client.result(id)).status).toBe('completed');
  const { stages, events } = await h.client.getState(id);
  expect(events.map((e) => e.type)).toContain('ReviewExpired');
  // Expiry approved spending more: the stage ran attempt 2 and completed with its output.
  expect(fake.requests).toHaveLength(2);
  expect(stages.summarize!.attempts).toHaveLength(2);
  expect(stages.summarize!.artefact).toEqual({ summary: 'after the budget' });
});

it('an llm-judge gate rejects with per-criterion feedback and escalates when the budget is spent', async () => {
  const spec = pipeline('judged')
    .stage('draft', 'llm', { with: { prompt: 'Write about {{ input.topic }}' } })
    .qualityGate('draft', 'llm-judge', {
      criteria: [
        { name: 'cites_sources', description: 'every claim has a source' },
        { name: 'concise', description: 'under 200 words' },
      ],
    })
    .retryBudget('draft', { maxAttempts: 2, onExhausted: 'escalate' });
  const raw = {
    ...spec.toJSON(),
    stages: (spec.toJSON().stages as object[]).map((s) => ({ ...s, agent: 'anthropic' })),
  };
  const judge = (cites: boolean) => ({
    kind: 'tool' as const,
    input: {
      criteria: [
        { name: 'cites_sources', passed: cites, actual: cites ? 'all cited' : 'no sources' },
        { name: 'concise', passed: true, actual: '120 words' },
      ],
    },
  });
  fake.enqueue({ kind: 'text', text: 'draft one' }, judge(false), { kind: 'text', text: 'draft two' }, judge(false));
  const id = h.id();
  await h.client.start(raw, { topic: 'durability' }, { id });
  const waiting = await until(id, 'waiting_review');
  const [first] = waiting.stages.draft!.attempts;
  expect(first!.verdict).toEqual({
    kind: 'rejected',
    feedback: expect.objectContaining({
      summary: '1 of 2 criteria not met: cites_sources',
      failedCriteria: [
        expect.objectContaining({ name: 'cites_sources', expected: 'every claim has a source', actual: 'no sources' }),
      ],
    }),
  });
  expect(first!.calls).toHaveLength(2);
  expect(waiting.pendingReviews[0]).toEqual(expect.objectContaining({ stage: 'draft', reason: 'escalated' }));
  expect(userPrompt(2)).toContain('no sources');
  await h.client.approve(id, 'draft');
  expect((await h.client.result(id)).status).toBe('completed');
});

it('composes gates: all of a local and a model gate, feedback merged', async () => {
  const id = h.id();
  const spec = {
    name: 'composed',
    stages: [
      {
        name: 'draft',
        run: 'scripted',
        agent: 'anthropic',
        gate: {
          all: [
            'scripted',
            { run: 'llm-judge', with: { criteria: [{ name: 'clear', description: 'reads clearly' }] } },
          ],
        },
        retry_budget: { max_attempts: 2 },
      },
    ],
  };
  fake.enqueue(
    { kind: 'tool', input: { criteria: [{ name: 'clear', passed: false, actual: 'muddled' }] } },
    { kind: 'tool', input: { criteria: [{ name: 'clear', passed: true, actual: 'clear' }] } },
  );
  await h.client.start(
    spec,
    { script: { draft: [{ verdict: 'rejected', summary: 'too short', criteria: ['length'] }, {}] } },
    { id },
  );
  expect((await h.client.result(id)).status).toBe('completed');
  const { stages } = await h.client.getState(id);
  const feedback = stages.draft!.attempts[0]!.feedback!;
  expect(feedback.summary).toBe('scripted: too short; llm-judge: 1 of 1 criteria not met: clear');
  expect(feedback.failedCriteria.map((c) => c.name)).toEqual(['length', 'clear']);
  const history = await h.temporal.workflow.getHandle(id).fetchHistory();
  const types = history
    .events!.filter((e) => e.activityTaskScheduledEventAttributes)
    .map((e) => e.activityTaskScheduledEventAttributes!.activityType!.name);
  expect(types).toEqual(['scripted', 'gate:scripted', 'gate:llm-judge', 'scripted', 'gate:scripted', 'gate:llm-judge']);
});

it('escalates to review instead of calling the model once the token budget is spent', async () => {
  fake.enqueue({ kind: 'tool', input: { summary: 'x' }, usage: { input_tokens: 800, output_tokens: 300 } });
  const id = h.id();
  await h.client.start(summarize(), { text: 'x' }, { id, tokenBudget: 1000 });
  const waiting = await until(id, 'waiting_review');
  expect(fake.requests).toHaveLength(1);
  expect(waiting.pendingReviews[0]).toEqual(
    expect.objectContaining({
      stage: 'summarize',
      reason: 'budget_exhausted',
      message:
        "token budget spent: 1100 of 1000 tokens used; attempt 2 would call the model again (approve to let this stage continue, reject to fail it, or approve an earlier attempt's output)",
    }),
  );
  expect(waiting.usage!.total.inputTokens + waiting.usage!.total.outputTokens).toBe(1100);
  expect(waiting.stages.summarize!.attempts).toHaveLength(1);
  // Approving lets the stage spend beyond the budget: attempt 2 calls the model.
  fake.enqueue({ kind: 'tool', input: { summary: 'worth the tokens' } });
  await h.client.approve(id, 'summarize', { reviewer: 'finance' });
  expect((await h.client.result(id)).status).toBe('completed');
  const done = await h.client.getState(id);
  expect(done.stages.summarize!.attempts).toHaveLength(2);
  expect(done.stages.summarize!.artefact).toEqual({ summary: 'worth the tokens' });
  expect(fake.requests).toHaveLength(2);
});

it('a rejected budget review fails the stage without another call', async () => {
  fake.enqueue({ kind: 'tool', input: { summary: 'x' }, usage: { input_tokens: 800, output_tokens: 300 } });
  const id = h.id();
  await h.client.start(summarize(), { text: 'x' }, { id, tokenBudget: 1000 });
  await until(id, 'waiting_review');
  await h.client.reject(id, 'summarize', 'over budget');
  expect((await h.client.result(id)).status).toBe('failed');
  expect(fake.requests).toHaveLength(1);
});

it('continues one conversation across stages that share a conversation id', async () => {
  const stage = (name: string, prompt: string, deps: string[] = []) => ({
    name,
    run: 'llm',
    agent: 'anthropic',
    depends_on: deps,
    with: { prompt, conversation: '{{ item_id }}-design' },
  });
  fake.enqueue({ kind: 'text', text: 'Use a queue.' }, { kind: 'text', text: 'Because it decouples.' });
  const id = h.id();
  await h.client.start(
    { name: 'chat', stages: [stage('propose', 'Propose a design.'), stage('explain', 'Why?', ['propose'])] },
    null,
    { id },
  );
  expect((await h.client.result(id)).status).toBe('completed');
  const second = fake.requests[1]!.body as { messages: { role: string; content: string }[] };
  expect(second.messages).toEqual([
    { role: 'user', content: 'Propose a design.' },
    { role: 'assistant', content: 'Use a queue.' },
    { role: 'user', content: 'Why?' },
  ]);
});

it('treadle usage prints per-stage and total tokens and cost', async () => {
  fake.enqueue({
    kind: 'tool',
    input: { summary: 'short one' },
    usage: { input_tokens: 1000, output_tokens: 100, cache_read_input_tokens: 50 },
  });
  const id = h.id();
  await h.client.start(summarize(), { text: 'x' }, { id });
  await h.client.result(id);
  const cli = (args: string[]) =>
    new Promise<string>((resolve, reject) =>
      execFile(
        process.execPath,
        [path.join(__dirname, '..', '..', 'bin', 'treadle.js'), ...args],
        { env: { ...process.env, TEMPORAL_ADDRESS: h.address, TREADLE_TASK_QUEUE: h.taskQueue } },
        (error, stdout, stderr) => (error ? reject(new Error(stderr)) : resolve(stdout)),
      ),
    );
  const json = JSON.parse(await cli(['usage', id, '--json']));
  expect(json.total).toEqual(
    expect.objectContaining({ calls: 1, inputTokens: 1000, outputTokens: 100, cacheReadTokens: 50, errors: 0 }),
  );
  expect(json.stages.summarize.estimatedCostUsd).toBeCloseTo(0.004515, 6);
  const text = await cli(['usage', id]);
  expect(text).toMatch(/summarize\s+1\s+0\s+1000\s+100\s+50/);
  expect(text).toMatch(/TOTAL\s+1\s+0\s+1000\s+100\s+50\s+\d+ms\s+\$0\.0045/);
});

describe('the document pipeline, LLM variant', () => {
  const examples = path.join(__dirname, '..', '..', 'examples', 'documents');
  const spec = readPipelineFile(path.join(examples, 'pipeline-llm.yaml'));
  const input = JSON.parse(readFileSync(path.join(examples, 'report-llm.json'), 'utf8')) as Record<string, unknown>;

  it('runs end to end offline with the scripted agent', async () => {
    const id = h.id('docs-llm');
    await h.client.start(spec, input, { id });
    const waiting = await until(id, 'waiting_review');
    expect(waiting.stages.pdf_to_markdown!.attempts.map((a) => a.verdict?.kind)).toEqual(['rejected', 'accepted']);
    expect(waiting.stages.pdf_to_markdown!.attempts[1]!.calls![0]!.provider).toBe('scripted');
    expect(waiting.pendingReviews.map((r) => r.stage)).toEqual(['final_review']);
    await h.client.approve(id, 'final_review');
    expect((await h.client.result(id)).status).toBe('completed');
  });

  it('runs end to end against the fake Anthropic server', async () => {
    const replies = input.agent_replies as Record<string, unknown[]>;
    const { agent_replies: _replies, ...plain } = input;
    // The same canned replies, now served by the fake API to the real SDK client.
    fake.enqueue(
      ...replies.pdf_to_markdown!.slice(0, 2).map((r) => ({ kind: 'tool' as const, input: r })),
      ...replies.extract_concepts!.slice(0, 1).map((r) => ({ kind: 'tool' as const, input: r })),
    );
    const withAgent = {
      ...(spec as object),
      stages: (spec as { stages: object[] }).stages.map((s) => ({ ...s, agent: 'anthropic' })),
    };
    const id = h.id('docs-fake');
    await h.client.start(withAgent, plain, { id });
    const waiting = await until(id, 'waiting_review');
    expect(fake.requests).toHaveLength(3);
    expect(waiting.stages.pdf_to_markdown!.attempts.map((a) => a.verdict?.kind)).toEqual(['rejected', 'accepted']);
    expect(userPrompt(1)).toContain('was rejected');
    expect(waiting.usage!.stages.pdf_to_markdown!.calls).toBe(2);
    await h.client.approve(id, 'final_review');
    expect((await h.client.result(id)).status).toBe('completed');
  });
});
