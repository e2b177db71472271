/**
 * The fake Anthropic server's limits, through the real SDK client over HTTP. Covers: no options (nothing
 * enforced, no headers, still counted); the concurrency limit (the 9th of 8 gets 429 with retry-after, the
 * scripted reply waits for the retry, other models are not limited); tokens per minute (input counted at
 * arrival, output at reply, the window sliding, on a hand-driven clock and on the real one with a short
 * window; `'*'` limits counted per model; cache writes counted, cache reads not); requests per minute;
 * `tokensPerReply`; latency; the overloaded mode and runtime `configure`; the stats; invalid options.
 */
import Anthropic, { APIError } from '@anthropic-ai/sdk';
import { startFakeAnthropic, type FakeAnthropic, type FakeLimitOptions } from '../support/fake-anthropic';

const MODEL = 'claude-haiku-4-5';
const OTHER_MODEL = 'claude-sonnet-4-5';
const TEXT = { kind: 'text', text: 'ok' } as const;
/** Longer than any test: a request held with it stays in flight until its client aborts it. */
const HELD = { kind: 'slow', delayMs: 120_000, then: TEXT } as const;

let fakes: FakeAnthropic[] = [];
afterEach(async () => {
  await Promise.all(fakes.map((fake) => fake.close()));
  fakes = [];
});

async function start(options?: FakeLimitOptions): Promise<FakeAnthropic> {
  const fake = await startFakeAnthropic(options);
  fakes.push(fake);
  return fake;
}

function client(fake: FakeAnthropic, maxRetries = 0): Anthropic {
  return new Anthropic({ apiKey: 'sk-ant-test-key', baseURL: fake.baseURL, maxRetries });
}

interface Outcome {
  status: number;
  headers: Headers;
  text?: string;
  error?: APIError;
}

/** One Messages call; an API error is returned, not thrown, so a test can look at its status and headers. */
async function call(
  sdk: Anthropic,
  { model = MODEL, signal }: { model?: string; signal?: AbortSignal } = {},
): Promise<Outcome> {
  try {
    const { data, response } = await sdk.messages
      .create({ model, max_tokens: 64, messages: [{ role: 'user', content: 'hello' }] }, { signal })
      .withResponse();
    const block = data.content[0];
    return { status: response.status, headers: response.headers, text: block?.type === 'text' ? block.text : '' };
  } catch (error) {
    if (error instanceof APIError && error.status !== undefined)
      return { status: error.status, headers: error.headers ?? new Headers(), error };
    throw error;
  }
}

/** Waits for a condition the fake reaches by itself (requests arriving), without assuming how long it takes. */
async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const rateLimitHeaders = (headers: Headers): string[] =>
  [...headers.keys()].filter((name) => name.startsWith('anthropic-ratelimit-') || name.startsWith('retry-after'));

test('without options nothing is limited and no header is added, but every request is counted', async () => {
  const fake = await start();
  fake.setDefault(TEXT);
  const sdk = client(fake);
  const outcomes = await Promise.all(Array.from({ length: 20 }, () => call(sdk)));
  expect(outcomes.map((o) => o.status)).toEqual(Array(20).fill(200));
  for (const outcome of outcomes) expect(rateLimitHeaders(outcome.headers)).toEqual([]);
  const stats = fake.stats();
  expect(stats).toMatchObject({ requests: 20, admitted: 20, rateLimited: 0, overloaded: 0, inFlight: 0 });
  expect(stats.violations).toEqual({ concurrency: 0, requests: 0, tokens: 0 });
  // The default usage is 12 input and 7 output tokens a reply.
  expect(stats.models[MODEL]).toMatchObject({ inputTokens: 240, outputTokens: 140 });
  expect(stats.maxInFlight).toBeGreaterThanOrEqual(1);
});

test('past the concurrency limit the 9th request gets 429 with retry-after; its scripted reply waits for the retry', async () => {
  const fake = await start({ limits: { [MODEL]: { maxConcurrent: 8 } } });
  const sdk = client(fake);
  fake.setDefault(HELD);
  const aborts = Array.from({ length: 8 }, () => new AbortController());
  const held = aborts.map((abort) => call(sdk, { signal: abort.signal }).catch((error: unknown) => error));
  await until(() => fake.stats().models[MODEL]?.inFlight === 8, '8 requests in flight');

  // Limits are per model: another model is not held back by this one's requests.
  fake.enqueue({ kind: 'text', text: 'other model' });
  expect(await call(sdk, { model: OTHER_MODEL })).toMatchObject({ status: 200, text: 'other model' });

  fake.enqueue({ kind: 'text', text: 'for the ninth' });
  const ninth = await call(sdk);
  expect(ninth.status).toBe(429);
  expect(ninth.error?.type).toBe('rate_limit_error');
  expect(ninth.error?.message).toMatch(/concurrent requests .* rate limit of 8 for model claude-haiku-4-5/);
  expect(ninth.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
  expect(ninth.headers.get('retry-after-ms')).toBeNull();

  for (const abort of aborts) abort.abort();
  await Promise.all(held);
  await until(() => fake.stats().inFlight === 0, 'the aborted requests to end');
  expect(await call(sdk)).toMatchObject({ status: 200, text: 'for the ninth' });

  const stats = fake.stats();
  expect(stats.models[MODEL]).toMatchObject({ requests: 10, admitted: 9, rateLimited: 1, maxInFlight: 8 });
  expect(stats.violations).toEqual({ concurrency: 1, requests: 0, tokens: 0 });
  expect(stats.maxInFlight).toBe(9);
  expect(stats.timeline.filter((e) => e.event === 'rate_limited')).toEqual([
    expect.objectContaining({ model: MODEL, inFlight: 8, limits: ['concurrency'] }),
  ]);
});

test('tokens per minute: a burst past 60k gets 429 until the window slides past its oldest tokens', async () => {
  let now = 1_000_000;
  const fake = await start({ limits: { '*': { tokensPerMinute: 60_000 } }, tokensPerReply: 10_000, clock: () => now });
  fake.setDefault(TEXT);
  const sdk = client(fake);

  // 10,000 tokens a reply: 8,000 input counted at arrival, 2,000 output at the reply.
  const remaining: string[] = [];
  for (let i = 0; i < 6; i += 1) {
    const outcome = await call(sdk);
    expect(outcome.status).toBe(200);
    remaining.push(outcome.headers.get('anthropic-ratelimit-tokens-remaining') ?? '');
    now += 1_000;
  }
  expect(remaining).toEqual(['50000', '40000', '30000', '20000', '10000', '0']);

  // At +6 s the first reply's 10,000 tokens leave the window at +60 s: retry-after is 54 s.
  const refused = await call(sdk);
  expect(refused.status).toBe(429);
  expect(refused.error?.message).toMatch(/rate limit of 60000 input and output tokens/);
  expect(refused.headers.get('retry-after')).toBe('54');
  expect(refused.headers.get('anthropic-ratelimit-tokens-limit')).toBe('60000');
  expect(refused.headers.get('anthropic-ratelimit-tokens-remaining')).toBe('0');
  expect(refused.headers.get('anthropic-ratelimit-tokens-reset')).toBe(new Date(1_000_000 + 65_000).toISOString());

  now = 1_000_000 + 59_999;
  expect((await call(sdk)).status).toBe(429);
  now = 1_000_000 + 60_000;
  expect((await call(sdk)).status).toBe(200);

  const stats = fake.stats();
  expect(stats).toMatchObject({ admitted: 7, rateLimited: 2, maxWindowTokens: 60_000 });
  expect(stats.violations).toEqual({ concurrency: 0, requests: 0, tokens: 2 });
  expect(stats.models[MODEL]).toMatchObject({ inputTokens: 56_000, outputTokens: 14_000 });
});

test("'*' limits each model apart; cache writes count against tokens per minute, cache reads do not", async () => {
  const fake = await start({ limits: { '*': { tokensPerMinute: 100 } }, clock: () => 0 });
  const usage = { input_tokens: 10, cache_creation_input_tokens: 50, cache_read_input_tokens: 1_000, output_tokens: 5 };
  fake.setDefault({ kind: 'text', text: 'cached', usage });
  const sdk = client(fake);
  expect((await call(sdk)).status).toBe(200);
  // 65 tokens in the window, and 60 more at arrival would make 125.
  expect((await call(sdk)).status).toBe(429);
  expect((await call(sdk, { model: OTHER_MODEL })).status).toBe(200);
  const { models } = fake.stats();
  expect(models[MODEL]).toMatchObject({ admitted: 1, rateLimited: 1, maxWindowTokens: 65 });
  expect(models[OTHER_MODEL]).toMatchObject({ admitted: 1, rateLimited: 0, maxWindowTokens: 65 });
});

test('tokens per minute on the real clock with a short window: the SDK retries after retry-after-ms and gets in', async () => {
  const fake = await start({
    windowMs: 2_000,
    limits: { [MODEL]: { tokensPerMinute: 1_000 } },
    tokensPerReply: 1_000,
    retryAfterMsHeader: true,
  });
  fake.setDefault(TEXT);
  expect((await call(client(fake))).status).toBe(200);

  // The SDK's own retry waits what the 429 asks, so the retried request arrives after the window has slid.
  const retried = await call(client(fake, 3));
  expect(retried.status).toBe(200);
  const stats = fake.stats();
  expect(stats).toMatchObject({ admitted: 2, maxWindowTokens: 1_000 });
  // Every other request was a 429: normally one, as the second call comes well within 2 s of the first (not
  // asserted, so a stalled machine cannot fail the test; the hand-driven clock above proves the refusal).
  expect(stats.rateLimited).toBe(stats.requests - 2);
  // However slow the machine, 1,000 more tokens were admitted only once the first request's input had left.
  const [first, second] = stats.timeline.filter((e) => e.event === 'admitted');
  expect(second!.atMs - first!.atMs).toBeGreaterThanOrEqual(2_000);
});

test('requests per minute: the 4th of 3 gets 429 with the wait until the oldest request leaves the window', async () => {
  let now = 5_000_000;
  const fake = await start({ limits: { [MODEL]: { requestsPerMinute: 3 } }, clock: () => now });
  fake.setDefault(TEXT);
  const sdk = client(fake);
  const remaining: (string | null)[] = [];
  for (let i = 0; i < 3; i += 1) {
    const outcome = await call(sdk);
    expect(outcome.status).toBe(200);
    remaining.push(outcome.headers.get('anthropic-ratelimit-requests-remaining'));
    now += 10_000;
  }
  expect(remaining).toEqual(['2', '1', '0']);

  const refused = await call(sdk);
  expect(refused.status).toBe(429);
  expect(refused.error?.message).toMatch(/number of requests has exceeded your rate limit of 3/);
  expect(refused.headers.get('retry-after')).toBe('30');
  expect(refused.headers.get('anthropic-ratelimit-requests-limit')).toBe('3');
  // No token limit is set, so no token headers.
  expect(refused.headers.get('anthropic-ratelimit-tokens-limit')).toBeNull();

  now = 5_000_000 + 60_000;
  expect((await call(sdk)).status).toBe(200);
  // A refused request does not count against the limit: the window holds the requests at +10 s, +20 s, +60 s.
  now += 1;
  expect((await call(sdk)).status).toBe(429);
  expect(fake.stats()).toMatchObject({ admitted: 4, rateLimited: 2, maxWindowRequests: 3 });
  expect(fake.stats().violations.requests).toBe(2);
});

test('latency delays every admitted reply, on top of a slow reply', async () => {
  const fake = await start({ latencyMs: 200 });
  fake.enqueue(TEXT, { kind: 'slow', delayMs: 100, then: TEXT });
  const sdk = client(fake);
  // Lower bounds only (with a few ms for timer rounding): a loaded machine can only make it slower.
  let started = Date.now();
  expect((await call(sdk)).status).toBe(200);
  expect(Date.now() - started).toBeGreaterThanOrEqual(190);
  started = Date.now();
  expect((await call(sdk)).status).toBe(200);
  expect(Date.now() - started).toBeGreaterThanOrEqual(290);
});

test('configure at runtime: overloaded answers 529 and keeps the script; {} turns it off; reset clears the counts', async () => {
  const fake = await start();
  const sdk = client(fake);
  fake.enqueue({ kind: 'text', text: 'first' }, { kind: 'text', text: 'second', usage: { output_tokens: 30 } });
  expect(await call(sdk)).toMatchObject({ status: 200, text: 'first' });

  fake.configure({ overloaded: true });
  const overloaded = await call(sdk, { model: OTHER_MODEL });
  expect(overloaded.status).toBe(529);
  expect(overloaded.error?.type).toBe('overloaded_error');

  fake.configure({});
  expect(await call(sdk, { model: OTHER_MODEL })).toMatchObject({ status: 200, text: 'second' });
  const stats = fake.stats();
  expect(stats).toMatchObject({ requests: 3, admitted: 2, overloaded: 1, rateLimited: 0 });
  expect(stats.models[MODEL]).toMatchObject({ requests: 1, admitted: 1, inputTokens: 12, outputTokens: 7 });
  expect(stats.models[OTHER_MODEL]).toMatchObject({ requests: 2, overloaded: 1, inputTokens: 12, outputTokens: 30 });

  fake.reset();
  expect(fake.stats()).toMatchObject({ requests: 0, maxWindowTokens: 0, models: {}, timeline: [] });
});

test('a limit that is not a positive integer is refused, naming it', async () => {
  await expect(startFakeAnthropic({ limits: { [MODEL]: { maxConcurrent: 0 } } })).rejects.toThrow(
    /limits\['claude-haiku-4-5'\]\.maxConcurrent must be a positive integer, not 0/,
  );
  const fake = await start();
  expect(() => fake.configure({ windowMs: -1 })).toThrow(/windowMs must be a number ≥ 0/);
});
