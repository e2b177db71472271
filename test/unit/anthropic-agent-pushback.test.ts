/**
 * The Anthropic agent waiting out the provider's pushback, through the real SDK client against the local fake
 * Messages API: a 429 with retry-after waited out and the call sent again (a `throttled` record, then the
 * answer); a 529 without retry-after on a backoff; heartbeats while waiting; an abort while waiting; the give-up
 * bound (maxThrottleWaitMs, the attempt's end); one call's 429 holding off the others of the process; a burst
 * of runs past the fake's concurrency and token limits all answered. And the process throttle and backoff.
 */
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { AnthropicAgent } from '../../src/agents/anthropic';
import { ANTHROPIC_RETRYABLE, callRecordOf } from '../../src/agents/anthropic-errors';
import { backoffMs, keyIdOf, ProcessThrottle } from '../../src/agents/call-throttle';
import { callRecordsOf } from '../../src/agents/recording';
import { CallRecordSchema, type AgentRequest } from '../../src/agents/types';
import { startFakeAnthropic, type FakeAnthropic, type FakeReply } from '../support/fake-anthropic';

const API_KEY = 'sk-ant-test-key';
const TEST_MODEL = 'claude-haiku-4-5';
const RATE_LIMITED = 'anthropic 429 rate_limit_error: slow down';

let fake: FakeAnthropic;

beforeAll(async () => {
  fake = await startFakeAnthropic();
});
afterAll(async () => {
  await fake.close();
});
beforeEach(() => {
  fake.reset();
  fake.configure({});
});

/** An agent with a throttle of its own unless given one, so that no test's 429 holds off another's calls. */
function agent(options: ConstructorParameters<typeof AnthropicAgent>[0] = {}): AnthropicAgent {
  return new AnthropicAgent(
    { apiKey: API_KEY, baseURL: fake.baseURL, throttle: new ProcessThrottle(), ...options },
    {},
  );
}

function request(overrides: Partial<AgentRequest> = {}): AgentRequest {
  return {
    messages: [{ role: 'user', content: 'Summarize the plan.' }],
    model: TEST_MODEL,
    correlationId: 'item-1/summarize/1',
    ...overrides,
  };
}

function tooMany(retryAfter?: string): FakeReply {
  return {
    kind: 'error',
    status: 429,
    type: 'rate_limit_error',
    message: 'slow down',
    ...(retryAfter !== undefined ? { headers: { 'retry-after': retryAfter } } : {}),
  };
}

async function rejection(run: Promise<unknown>): Promise<Error> {
  return run.then(
    () => {
      throw new Error('expected the call to fail');
    },
    (e: unknown) => e as Error,
  );
}

describe('waiting out pushback', () => {
  test('a 429 with retry-after 1 s: waits at least that long, sends the call again, and answers; the try is a throttled record', async () => {
    fake.enqueue(tooMany('1'), { kind: 'text', text: 'The plan, in short.' });
    const started = Date.now();

    const result = await agent().run(request());

    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
    expect(result.text).toBe('The plan, in short.');
    expect(fake.requests).toHaveLength(2);
    expect(result.calls.map((c) => c.status)).toEqual(['throttled', 'success']);
    const [throttled, answered] = result.calls;
    expect(CallRecordSchema.parse(throttled)).toEqual(throttled);
    expect(throttled).toMatchObject({
      correlationId: 'item-1/summarize/1',
      inputTokens: 0,
      outputTokens: 0,
      error: `${RATE_LIMITED}; waited 1000 ms (retry-after)`,
    });
    expect(answered!.promptHash).toBe(throttled!.promptHash);
    expect(Date.parse(answered!.at) - Date.parse(throttled!.at)).toBeGreaterThanOrEqual(950);
    expect(result.call).toBe(answered);
  });

  test('a 529 without retry-after: waits a backoff, again and again, until answered', async () => {
    const overloaded: FakeReply = { kind: 'error', status: 529, type: 'overloaded_error', message: 'Overloaded' };
    fake.enqueue(overloaded, overloaded, { kind: 'text', text: 'ok' });

    const result = await agent({ throttleBackoff: { initialMs: 40, maxMs: 80 } }).run(request());

    expect(result.text).toBe('ok');
    expect(result.calls.map((c) => c.status)).toEqual(['throttled', 'throttled', 'success']);
    expect(result.calls[0]!.error).toMatch(
      /^anthropic 529 overloaded_error: Overloaded; waited (2\d|3\d|40) ms \(backoff\)$/,
    );
    expect(result.calls[1]!.error).toMatch(
      /^anthropic 529 overloaded_error: Overloaded; waited ([4-7]\d|80) ms \(backoff\)$/,
    );
  });

  test('heartbeats while it waits', async () => {
    fake.enqueue(tooMany('1'), { kind: 'text', text: 'ok' });
    let beats = 0;

    await agent({ heartbeatIntervalMs: 50 }).run(request({ heartbeat: () => (beats += 1) }));

    expect(beats).toBeGreaterThanOrEqual(10);
  });

  test('aborted while waiting: CancelledFailure at once, the try recorded as throttled and cut short', async () => {
    fake.enqueue(tooMany('30'));
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 300);
    const started = Date.now();

    const error = await rejection(agent().run(request({ signal: controller.signal })));

    expect(Date.now() - started).toBeLessThan(3_000);
    expect(error).toBeInstanceOf(CancelledFailure);
    const call = callRecordOf(error)!;
    expect(call.status).toBe('throttled');
    expect(call.error).toMatch(
      new RegExp(`^${RATE_LIMITED}; cancelled after waiting \\d+ of 30000 ms \\(retry-after\\)$`),
    );
    expect(fake.requests).toHaveLength(1);
  });

  test('a wait past maxThrottleWaitMs gives up as a retryable failure carrying the throttled tries', async () => {
    // Each wait is half to all of its backoff (50–100, then 100–200 ms), so the tries before giving up vary from
    // 3 to 4: a 429 for each, or the fourth would find no scripted reply (the flake this test had).
    fake.enqueue(tooMany(), tooMany(), tooMany(), tooMany());

    const error = await rejection(
      agent({ maxThrottleWaitMs: 300, throttleBackoff: { initialMs: 100, maxMs: 200 } }).run(request()),
    );

    const f = error as ApplicationFailure;
    expect(f).toBeInstanceOf(ApplicationFailure);
    expect(f.type).toBe(ANTHROPIC_RETRYABLE);
    expect(f.nonRetryable).toBe(false);
    expect(f.message).toMatch(
      /\(gave up waiting: \d+ ms more would pass maxThrottleWaitMs \(300 ms\), after \d+ ms of waiting\)$/,
    );
    const records = callRecordsOf(error);
    expect(records.length).toBeGreaterThanOrEqual(2);
    expect(records.slice(0, -1).every((c) => c.status === 'throttled')).toBe(true);
    expect(records[records.length - 1]!.status).toBe('error');
  });

  test("a retry-after past the attempt's end gives up at once, with Temporal's next retry after it", async () => {
    fake.enqueue(tooMany('5'));
    const started = Date.now();

    const error = await rejection(agent({ attemptEnd: () => started + 4_000 }).run(request()));

    expect(Date.now() - started).toBeLessThan(1_000);
    expect((error as ApplicationFailure).type).toBe(ANTHROPIC_RETRYABLE);
    expect((error as ApplicationFailure).nextRetryDelay).toBe(5_000);
    expect(error.message).toContain("(gave up waiting: 5000 ms more would pass the attempt's end");
  });

  test('a spend-limit 429 is not waited out: non-retryable at once', async () => {
    fake.enqueue({
      kind: 'error',
      status: 429,
      type: 'rate_limit_error',
      message: 'You have reached your specified workspace spend limit.',
      headers: { 'retry-after': '1' },
    });
    const throttle = new ProcessThrottle();

    const error = await rejection(agent({ throttle }).run(request()));

    expect((error as ApplicationFailure).nonRetryable).toBe(true);
    expect(fake.requests).toHaveLength(1);
    expect(throttle.heldUntil({ provider: 'anthropic', model: TEST_MODEL, keyId: keyIdOf(API_KEY) })).toBeUndefined();
  });
});

describe('one 429 holds off every call of the process to that model and key', () => {
  test("another agent's call waits for the retry-after too; a call to another model does not", async () => {
    const arrivals: { model: string; at: number }[] = [];
    const answer: FakeReply = {
      kind: 'computed',
      reply: (sent) => {
        arrivals.push({ model: (sent.body as { model: string }).model, at: Date.now() });
        return { kind: 'text', text: 'ok' };
      },
    };
    fake.enqueue(tooMany('1'));
    fake.setDefault(answer);
    const throttle = new ProcessThrottle();

    const first = agent({ throttle }).run(request());
    while (fake.requests.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    const refusedAt = Date.now();
    await new Promise((resolve) => setTimeout(resolve, 50));
    const [second, other] = await Promise.all([
      agent({ throttle }).run(request({ correlationId: 'item-2/summarize/1' })),
      agent({ throttle }).run(request({ model: 'claude-sonnet-4-6', correlationId: 'item-3/summarize/1' })),
      first,
    ]);

    expect(second.calls.map((c) => c.status)).toEqual(['success']);
    expect(other.calls.map((c) => c.status)).toEqual(['success']);
    const heldOff = arrivals.filter((a) => a.model === TEST_MODEL);
    expect(heldOff).toHaveLength(2);
    for (const arrival of heldOff) expect(arrival.at - refusedAt).toBeGreaterThanOrEqual(900);
    expect(arrivals.find((a) => a.model === 'claude-sonnet-4-6')!.at - refusedAt).toBeLessThan(900);
  });

  test('the default throttle is shared by agents built separately', async () => {
    // Agents are built per attempt; what one hears, the next must heed. A model of its own keeps this test's
    // hold-off to itself.
    const model = 'claude-shared-throttle';
    fake.enqueue(tooMany('1'), { kind: 'text', text: 'first' }, { kind: 'text', text: 'second' });
    const shared = (): AnthropicAgent => new AnthropicAgent({ apiKey: API_KEY, baseURL: fake.baseURL }, {});

    const first = shared().run(request({ model }));
    while (fake.requests.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    const refusedAt = Date.now();
    const second = await shared().run(request({ model }));

    expect(Date.now() - refusedAt).toBeGreaterThanOrEqual(900);
    expect(second.calls.map((c) => c.status)).toEqual(['success']);
    expect((await first).calls.map((c) => c.status)).toEqual(['throttled', 'success']);
  });
});

describe('a burst past the provider limits', () => {
  test('eight runs at once against a limit of two in flight: every run answers, the fake refused some', async () => {
    fake.configure({ limits: { [TEST_MODEL]: { maxConcurrent: 2 } }, latencyMs: 100 });
    fake.setDefault({ kind: 'text', text: 'ok' });
    const throttle = new ProcessThrottle();

    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) => agent({ throttle }).run(request({ correlationId: `item-${i}/summarize/1` }))),
    );

    expect(results.map((r) => r.text)).toEqual(Array(8).fill('ok'));
    for (const result of results) expect(result.call.status).toBe('success');
    const stats = fake.stats();
    expect(stats.rateLimited).toBeGreaterThan(0);
    expect(stats.admitted).toBe(8);
    expect(stats.maxInFlight).toBeLessThanOrEqual(2);
    const throttled = results.flatMap((r) => r.calls).filter((c) => c.status === 'throttled');
    expect(throttled).toHaveLength(stats.rateLimited);
  });

  test('runs past a tokens-per-minute limit wait for the window and all answer', async () => {
    // 100 tokens a reply, 250 a 2-s window: two replies fit, the third waits for the window to slide.
    fake.configure({ limits: { [TEST_MODEL]: { tokensPerMinute: 250 } }, windowMs: 2_000, tokensPerReply: 100 });
    fake.setDefault({ kind: 'text', text: 'ok' });
    const throttle = new ProcessThrottle();

    const results = await Promise.all(
      Array.from({ length: 4 }, (_, i) => agent({ throttle }).run(request({ correlationId: `item-${i}/summarize/1` }))),
    );

    expect(results.map((r) => r.call.status)).toEqual(Array(4).fill('success'));
    const stats = fake.stats();
    expect(stats.rateLimited).toBeGreaterThan(0);
    expect(stats.maxWindowTokens).toBeLessThanOrEqual(250);
  }, 20_000);
});

describe('the process throttle', () => {
  const scope = { provider: 'anthropic', model: TEST_MODEL, keyId: keyIdOf(API_KEY) };

  test('holds a scope off until the longest retry-after reported, and no other scope', async () => {
    let now = 1_000;
    const throttle = new ProcessThrottle(() => now);
    throttle.reportRetryAfter(scope, 500);
    throttle.reportRetryAfter(scope, 200);

    expect(throttle.heldUntil(scope)).toBe(1_500);
    expect(throttle.heldUntil({ ...scope, keyId: keyIdOf('another key') })).toBeUndefined();
    expect(await throttle.waitForCapacity(scope, { until: 1_400 })).toBe(false);
    now = 1_500;
    expect(throttle.heldUntil(scope)).toBeUndefined();
    expect(await throttle.waitForCapacity(scope)).toBe(true);
  });

  test('a wait rejects as soon as its signal aborts', async () => {
    const throttle = new ProcessThrottle();
    throttle.reportRetryAfter(scope, 60_000);
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error('stop')), 50);

    await expect(throttle.waitForCapacity(scope, { signal: controller.signal })).rejects.toThrow('stop');
  });

  test('the backoff doubles to its cap, with jitter between half and all of it', () => {
    const backoff = { initialMs: 1_000, maxMs: 30_000 };
    expect([0, 1, 2, 5, 40].map((n) => backoffMs(n, backoff, () => 1))).toEqual([1_000, 2_000, 4_000, 30_000, 30_000]);
    expect(backoffMs(1, backoff, () => 0)).toBe(1_000);
  });

  test('the key id names the key without holding it', () => {
    expect(keyIdOf(API_KEY)).toMatch(/^[0-9a-f]{12}$/);
    expect(keyIdOf(API_KEY)).not.toContain('test');
    expect(keyIdOf(API_KEY)).not.toBe(keyIdOf(`${API_KEY}2`));
  });
});
