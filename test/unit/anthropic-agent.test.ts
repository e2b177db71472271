/**
 * The Anthropic agent against a local fake Messages API, through the real SDK client. Covers: the request a
 * structured call sends (forced `respond` tool, schema, model, max_tokens, system, messages); valid,
 * malformed and text-only structured replies; text replies; usage and the call record; the error mapping
 * (429 and 529 given up on past the wait bound, spend limits, 500, 400, 401, dropped connection, SDK timeout,
 * abort); the heartbeat; a missing API key. Waiting out 429s and 529s: anthropic-agent-pushback.test.ts.
 */
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { AnthropicAgent, DEFAULT_MAX_TOKENS, DEFAULT_MODEL, RESPOND_TOOL } from '../../src/agents/anthropic';
import {
  ANTHROPIC_REQUEST_ERROR,
  ANTHROPIC_RETRYABLE,
  ANTHROPIC_SPEND_LIMIT,
  callRecordOf,
  retryAfterMs,
} from '../../src/agents/anthropic-errors';
import { ProcessThrottle } from '../../src/agents/call-throttle';
import { promptHash } from '../../src/agents/prompt-hash';
import { AgentUnavailableError, CallRecordSchema, type AgentRequest, type CallRecord } from '../../src/agents/types';
import type { Json } from '../../src/model/shapes';
import { startFakeAnthropic, type FakeAnthropic } from '../support/fake-anthropic';

const API_KEY = 'sk-ant-test-key';
const VERDICT_SCHEMA: Json = {
  type: 'object',
  properties: { verdict: { type: 'string', enum: ['pass', 'fail'] }, score: { type: 'number' } },
  required: ['verdict', 'score'],
  additionalProperties: false,
};
/** Not the default: the SDK warns on every call naming a deprecated model, and the default is one. */
const TEST_MODEL = 'claude-haiku-4-5';
const SECRET_PROMPT = 'Review the launch plan for Project Bluebird';

let fake: FakeAnthropic;

beforeAll(async () => {
  fake = await startFakeAnthropic();
});
afterAll(async () => {
  await fake.close();
});
beforeEach(() => fake.reset());

function agent(options: ConstructorParameters<typeof AnthropicAgent>[0] = {}): AnthropicAgent {
  // An explicit empty env keeps the developer's own ANTHROPIC_* variables out of the tests; a throttle of its
  // own keeps one test's 429 from holding off the next.
  return new AnthropicAgent(
    { apiKey: API_KEY, baseURL: fake.baseURL, throttle: new ProcessThrottle(), ...options },
    {},
  );
}

function request(overrides: Partial<AgentRequest> = {}): AgentRequest {
  return {
    system: 'You are a strict reviewer.',
    messages: [{ role: 'user', content: SECRET_PROMPT }],
    model: TEST_MODEL,
    correlationId: 'item-1/review/1',
    ...overrides,
  };
}

/** Runs a request that must fail and returns the failure with its call record. */
async function failure(run: Promise<unknown>): Promise<{ error: Error; call: CallRecord }> {
  const error = await run.then(
    () => {
      throw new Error('expected the call to fail');
    },
    (e: unknown) => e as Error,
  );
  const call = callRecordOf(error);
  if (!call) throw new Error(`no call record on ${String(error)}`);
  return { error, call };
}

function asApplicationFailure(error: Error): ApplicationFailure {
  expect(error).toBeInstanceOf(ApplicationFailure);
  return error as ApplicationFailure;
}

describe('structured replies', () => {
  test('a reply matching the schema is returned as output, and the request forces the respond tool', async () => {
    fake.enqueue({ kind: 'tool', input: { verdict: 'pass', score: 0.9 } });

    const result = await agent().run(
      request({ outputSchema: VERDICT_SCHEMA, model: 'claude-opus-4-1', maxTokens: 1024, temperature: 0.2 }),
    );

    expect(result.output).toEqual({ verdict: 'pass', score: 0.9 });
    expect(result.text).toBe('{"verdict":"pass","score":0.9}');
    expect(result.invalidOutput).toBeUndefined();
    expect(fake.requests).toHaveLength(1);
    const sent = fake.requests[0]!;
    expect(sent.method).toBe('POST');
    expect(sent.path).toBe('/v1/messages');
    // This SDK version sends the key as a bearer token; one try only, since Temporal owns retries.
    expect(sent.headers.authorization).toBe(`Bearer ${API_KEY}`);
    expect(sent.headers['x-stainless-retry-count']).toBe('0');
    expect(sent.body).toEqual({
      model: 'claude-opus-4-1',
      max_tokens: 1024,
      temperature: 0.2,
      system: 'You are a strict reviewer.',
      messages: [{ role: 'user', content: SECRET_PROMPT }],
      tools: [{ name: RESPOND_TOOL, description: expect.any(String), input_schema: VERDICT_SCHEMA }],
      tool_choice: { type: 'tool', name: RESPOND_TOOL },
    });
  });

  test('a reply not matching the schema is invalidOutput with the first issues quoted, not a throw', async () => {
    fake.enqueue({ kind: 'tool', input: { verdict: 'maybe', score: 'high' } });

    const result = await agent().run(request({ outputSchema: VERDICT_SCHEMA }));

    expect(result.output).toBeUndefined();
    expect(result.invalidOutput?.raw).toBe('{"verdict":"maybe","score":"high"}');
    expect(result.invalidOutput?.issues).toHaveLength(2);
    expect(result.invalidOutput?.issues[0]).toMatch(/^verdict: Invalid option: expected one of "pass"\|"fail"/);
    expect(result.invalidOutput?.issues[1]).toMatch(/^score: Invalid input: expected number, received string/);
    expect(result.call.status).toBe('success');
  });

  test('a reply cut off at max_tokens says so first', async () => {
    fake.enqueue({ kind: 'tool', input: { verdict: 'pass' }, stopReason: 'max_tokens' });

    const result = await agent().run(request({ outputSchema: VERDICT_SCHEMA, maxTokens: 64 }));

    expect(result.invalidOutput?.issues[0]).toBe('the reply was cut off at max_tokens (64)');
    expect(result.invalidOutput?.issues[1]).toMatch(/^score: /);
  });

  test('a text-only answer to a structured request is invalidOutput with the text as raw', async () => {
    fake.enqueue({ kind: 'text', text: 'I think it passes. '.repeat(200) });

    const result = await agent().run(request({ outputSchema: VERDICT_SCHEMA }));

    expect(result.invalidOutput?.issues).toEqual([
      'the reply did not use the respond tool (stop_reason end_turn); it answered with text only',
    ]);
    expect(result.invalidOutput?.raw).toHaveLength(2_000);
    expect(result.invalidOutput?.raw.startsWith('I think it passes. ')).toBe(true);
  });

  test('a schema for a non-object is wrapped as the value of an object tool input and unwrapped', async () => {
    const schema: Json = { type: 'array', items: { type: 'string' } };
    fake.enqueue({ kind: 'tool', input: { value: ['a', 'b'] } });

    const result = await agent().run(request({ outputSchema: schema }));

    expect(result.output).toEqual(['a', 'b']);
    expect((fake.requests[0]!.body as { tools: { input_schema: unknown }[] }).tools[0]!.input_schema).toEqual({
      type: 'object',
      properties: { value: schema },
      required: ['value'],
    });
  });
});

describe('text replies and the call record', () => {
  test('text blocks are concatenated; defaults for model and max_tokens; no tools sent', async () => {
    fake.enqueue({ kind: 'text', text: 'Looks good.' });
    // The SDK warns that the default model is deprecated; that is for operators, not test output.
    const warn = jest.spyOn(console, 'warn').mockImplementation(() => undefined);

    const result = await agent()
      .run(request({ system: undefined, model: undefined }))
      .finally(() => warn.mockRestore());

    expect(result.text).toBe('Looks good.');
    expect(result.output).toBeUndefined();
    expect(result.invalidOutput).toBeUndefined();
    expect(fake.requests[0]!.body).toEqual({
      model: DEFAULT_MODEL,
      max_tokens: DEFAULT_MAX_TOKENS,
      messages: [{ role: 'user', content: SECRET_PROMPT }],
    });
  });

  test('usage and the call record come from the reply; the record holds the prompt hash, never the prompt', async () => {
    fake.enqueue({
      kind: 'text',
      text: 'ok',
      usage: { input_tokens: 321, output_tokens: 54, cache_read_input_tokens: 200 },
    });
    const req = request({ model: 'claude-haiku-4-5' });
    const before = Date.now();

    const result = await agent().run(req);

    expect(result.usage).toEqual({ inputTokens: 321, outputTokens: 54, cacheReadTokens: 200 });
    const call = CallRecordSchema.parse(result.call);
    expect(call).toEqual({
      correlationId: 'item-1/review/1',
      provider: 'anthropic',
      model: 'claude-haiku-4-5',
      promptHash: promptHash(req),
      inputTokens: 321,
      outputTokens: 54,
      cacheReadTokens: 200,
      latencyMs: expect.any(Number),
      status: 'success',
      at: expect.any(String),
    });
    expect(call.promptHash).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(JSON.stringify(call)).not.toContain('Bluebird');
    expect(Date.parse(call.at)).toBeGreaterThanOrEqual(before - 1);
    expect(call.latencyMs).toBeGreaterThanOrEqual(0);
  });

  test('the default model and base URL come from the environment when not given', async () => {
    fake.enqueue({ kind: 'text', text: 'ok' });
    const fromEnv = new AnthropicAgent(
      {},
      { ANTHROPIC_API_KEY: 'sk-from-env', ANTHROPIC_BASE_URL: fake.baseURL, TREADLE_MODEL: 'claude-env-model' },
    );

    const result = await fromEnv.run(request({ model: undefined }));

    expect(result.call.model).toBe('claude-env-model');
    expect(fake.requests[0]!.headers.authorization).toBe('Bearer sk-from-env');
    expect((fake.requests[0]!.body as { model: string }).model).toBe('claude-env-model');
  });

  test('an unscripted request fails loudly, naming it', async () => {
    const { error } = await failure(agent().run(request()));

    expect(error.message).toBe(
      'anthropic 500 api_error: fake-anthropic: no scripted reply for request #1 (POST /v1/messages, model claude-haiku-4-5); enqueue one or set a default',
    );
  });
});

describe('error mapping', () => {
  test('429 whose retry-after is past the wait bound: gives up at once, retryable, next retry after 7 s, call record in details; the SDK does not retry', async () => {
    fake.enqueue({
      kind: 'error',
      status: 429,
      type: 'rate_limit_error',
      message: 'Number of request tokens has exceeded your per-minute rate limit',
      headers: { 'retry-after': '7' },
    });
    const started = Date.now();

    const { error, call } = await failure(agent({ maxThrottleWaitMs: 1_000 }).run(request()));

    expect(Date.now() - started).toBeLessThan(1_000);
    const f = asApplicationFailure(error);
    expect(f.type).toBe(ANTHROPIC_RETRYABLE);
    expect(f.nonRetryable).toBe(false);
    expect(f.nextRetryDelay).toBe(7_000);
    expect(f.message).toMatch(
      /^anthropic 429 rate_limit_error: Number of request tokens has exceeded your per-minute rate limit \(gave up waiting: 7000 ms more would pass maxThrottleWaitMs \(1000 ms\), after \d+ ms of waiting\)$/,
    );
    expect(call).toMatchObject({
      correlationId: 'item-1/review/1',
      provider: 'anthropic',
      status: 'error',
      error: f.message,
      inputTokens: 0,
      outputTokens: 0,
    });
    expect(fake.requests).toHaveLength(1);
  });

  test('429 naming a spend limit: non-retryable', async () => {
    fake.enqueue({
      kind: 'error',
      status: 429,
      type: 'rate_limit_error',
      message: 'You have reached your specified workspace spend limit.',
      headers: { 'retry-after': '60' },
    });

    const { error, call } = await failure(agent().run(request()));

    const f = asApplicationFailure(error);
    expect(f.type).toBe(ANTHROPIC_SPEND_LIMIT);
    expect(f.nonRetryable).toBe(true);
    expect(f.message).toBe('anthropic 429 rate_limit_error: You have reached your specified workspace spend limit.');
    expect(call.status).toBe('error');
    // Not waited out: a spend limit does not pass in a minute.
    expect(fake.requests).toHaveLength(1);
  });

  test('429 with a spend-limit error code: non-retryable whatever the wording', async () => {
    fake.enqueue({
      kind: 'error',
      status: 429,
      type: 'rate_limit_error',
      message: 'Request refused.',
      details: { error_code: 'enforced_spend_limit_reached' },
    });

    const f = asApplicationFailure((await failure(agent().run(request()))).error);

    expect(f.type).toBe(ANTHROPIC_SPEND_LIMIT);
    expect(f.nonRetryable).toBe(true);
  });

  test('529 overloaded past the wait bound: retryable, delay from retry-after-ms', async () => {
    fake.enqueue({
      kind: 'error',
      status: 529,
      type: 'overloaded_error',
      message: 'Overloaded',
      headers: { 'retry-after-ms': '1500' },
    });

    const f = asApplicationFailure((await failure(agent({ maxThrottleWaitMs: 1_000 }).run(request()))).error);

    expect(f.type).toBe(ANTHROPIC_RETRYABLE);
    expect(f.nonRetryable).toBe(false);
    expect(f.nextRetryDelay).toBe(1_500);
    expect(f.message).toMatch(/^anthropic 529 overloaded_error: Overloaded \(gave up waiting: 1500 ms more would pass/);
    expect(fake.requests).toHaveLength(1);
  });

  test('500: retryable with Temporal backoff (no delay of its own)', async () => {
    fake.enqueue({ kind: 'error', status: 500, type: 'api_error', message: 'Internal server error' });

    const f = asApplicationFailure((await failure(agent().run(request()))).error);

    expect(f.type).toBe(ANTHROPIC_RETRYABLE);
    expect(f.nonRetryable).toBe(false);
    expect(f.nextRetryDelay).toBeUndefined();
    expect(f.message).toBe('anthropic 500 api_error: Internal server error');
  });

  test('400: non-retryable with a one-line message', async () => {
    fake.enqueue({
      kind: 'error',
      status: 400,
      type: 'invalid_request_error',
      message: 'max_tokens: must be ≤ 8192\n(got 100000)',
    });

    const { error, call } = await failure(agent().run(request({ maxTokens: 9_000 })));

    const f = asApplicationFailure(error);
    expect(f.type).toBe(ANTHROPIC_REQUEST_ERROR);
    expect(f.nonRetryable).toBe(true);
    expect(f.message).toBe('anthropic 400 invalid_request_error: max_tokens: must be ≤ 8192 (got 100000)');
    expect(call.error).toBe(f.message);
  });

  test('a request the SDK refuses to send (max_tokens too large without streaming): non-retryable, nothing sent', async () => {
    const { error, call } = await failure(agent().run(request({ maxTokens: 100_000 })));

    const f = asApplicationFailure(error);
    expect(f.type).toBe(ANTHROPIC_REQUEST_ERROR);
    expect(f.nonRetryable).toBe(true);
    expect(f.message).toMatch(
      /^anthropic request refused by the SDK: Streaming is required for operations that may take longer than 10 minutes/,
    );
    expect(call.status).toBe('error');
    expect(fake.requests).toHaveLength(0);
  });

  test('401: non-retryable with a one-line message', async () => {
    fake.enqueue({ kind: 'error', status: 401, type: 'authentication_error', message: 'invalid x-api-key' });

    const f = asApplicationFailure((await failure(agent().run(request()))).error);

    expect(f.type).toBe(ANTHROPIC_REQUEST_ERROR);
    expect(f.nonRetryable).toBe(true);
    expect(f.message).toBe('anthropic 401 authentication_error: invalid x-api-key');
  });

  test('a dropped connection: retryable', async () => {
    fake.enqueue({ kind: 'drop' });

    const { error, call } = await failure(agent().run(request()));

    const f = asApplicationFailure(error);
    expect(f.type).toBe(ANTHROPIC_RETRYABLE);
    expect(f.nonRetryable).toBe(false);
    expect(f.message).toMatch(/^anthropic connection error: Connection error\. \(fetch failed: /);
    expect(call.status).toBe('error');
  });

  test('the SDK timing out: retryable, call status timeout', async () => {
    fake.enqueue({ kind: 'slow', delayMs: 5_000, then: { kind: 'text', text: 'too late' } });

    const { error, call } = await failure(agent({ timeoutMs: 100 }).run(request()));

    const f = asApplicationFailure(error);
    expect(f.type).toBe(ANTHROPIC_RETRYABLE);
    expect(f.nonRetryable).toBe(false);
    expect(f.message).toBe('anthropic timeout: Request timed out.');
    expect(call.status).toBe('timeout');
  });

  test('a slow reply aborted by the signal: CancelledFailure, call status timeout', async () => {
    fake.enqueue({ kind: 'slow', delayMs: 10_000, then: { kind: 'text', text: 'too late' } });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    const started = Date.now();

    const { error, call } = await failure(agent().run(request({ signal: controller.signal })));

    expect(error).toBeInstanceOf(CancelledFailure);
    expect(error.message).toBe('anthropic call aborted: the attempt timed out or the work item was cancelled');
    expect(call.status).toBe('timeout');
    expect(call.latencyMs).toBeGreaterThanOrEqual(90);
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  test('callRecordOf reads nothing from errors that carry no call record', () => {
    expect(callRecordOf(new Error('plain'))).toBeUndefined();
    expect(callRecordOf(ApplicationFailure.nonRetryable('other', 'Other', { not: 'a call' }))).toBeUndefined();
    expect(callRecordOf(undefined)).toBeUndefined();
  });

  test('retry-after as an HTTP date', () => {
    const now = Date.parse('2025-01-01T00:00:00Z');
    expect(retryAfterMs(new Headers({ 'retry-after': 'Wed, 01 Jan 2025 00:00:30 GMT' }), now)).toBe(30_000);
    expect(retryAfterMs(new Headers({ 'retry-after': 'Tue, 31 Dec 2024 23:59:00 GMT' }), now)).toBeUndefined();
    expect(retryAfterMs(new Headers({ 'retry-after': 'soon' }), now)).toBeUndefined();
    expect(retryAfterMs(new Headers(), now)).toBeUndefined();
  });
});

describe('heartbeat and availability', () => {
  test('heartbeats while the call is in flight, and stops when it returns', async () => {
    fake.enqueue({ kind: 'slow', delayMs: 400, then: { kind: 'text', text: 'done' } });
    let beats = 0;

    const result = await agent({ heartbeatIntervalMs: 50 }).run(request({ heartbeat: () => (beats += 1) }));

    expect(result.text).toBe('done');
    expect(beats).toBeGreaterThanOrEqual(4);
    const afterReturn = beats;
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(beats).toBe(afterReturn);
  });

  test('a missing API key: non-retryable, naming ANTHROPIC_API_KEY and the offline alternative', () => {
    let thrown: unknown;
    try {
      new AnthropicAgent({ baseURL: fake.baseURL }, {});
    } catch (error) {
      thrown = error;
    }

    const f = asApplicationFailure(thrown as Error);
    expect(f.nonRetryable).toBe(true);
    expect(f.type).toBe('AgentUnavailableError');
    expect(f.cause).toBeInstanceOf(AgentUnavailableError);
    // Without a key the default agent is scripted: the step named anthropic, which TREADLE_AGENT does not override.
    expect(f.message).toBe(
      'the anthropic agent needs an API key: set ANTHROPIC_API_KEY on the worker, or to run offline with canned replies ' +
        "change the step's `agent: anthropic` to `agent: scripted` (TREADLE_AGENT only picks the agent of steps that name none)",
    );
    expect(f.message).not.toContain('set TREADLE_AGENT=scripted');
  });

  test('a missing API key with TREADLE_AGENT=anthropic: the hint is to unset it', () => {
    expect(() => new AnthropicAgent({ baseURL: fake.baseURL }, { TREADLE_AGENT: 'anthropic' })).toThrow(
      'the anthropic agent needs an API key: set ANTHROPIC_API_KEY on the worker, ' +
        'or unset TREADLE_AGENT (or set it to scripted) to run offline with canned replies',
    );
  });
});
