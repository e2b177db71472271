/**
 * The Anthropic agent with a shared limiter behind its throttle (`CallThrottle.acquire`, issue 39), through the
 * real SDK client against the local fake Messages API: each try asks for capacity with its estimate (input
 * from the prompt's characters, output its max_tokens) and releases it with the reply's usage, or with zero
 * after a failed try; a 429 is reported and waited out and the next try asks again; an acquire that gives up
 * fails the call as retryable, one aborted is the attempt's cancellation; a throttle with no limit for the
 * scope (acquire answers undefined) changes nothing.
 */
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { AnthropicAgent } from '../../src/agents/anthropic';
import { ANTHROPIC_RETRYABLE } from '../../src/agents/anthropic-errors';
import {
  estimateCallTokens,
  ProcessThrottle,
  type CallCapacityRequest,
  type CallLease,
  type CallTokens,
  type ThrottleScope,
} from '../../src/agents/call-throttle';
import { startFakeAnthropic, type FakeAnthropic } from '../support/fake-anthropic';

const MODEL = 'claude-haiku-4-5';
let fake: FakeAnthropic;

beforeAll(async () => {
  fake = await startFakeAnthropic();
});
afterAll(async () => {
  await fake.close();
});
beforeEach(() => fake.reset());

/** A throttle whose `acquire` records each request and release, and answers as `grant` says. */
class RecordingThrottle extends ProcessThrottle {
  readonly asked: { scope: ThrottleScope; request: CallCapacityRequest }[] = [];
  readonly released: CallTokens[] = [];
  readonly reported: number[] = [];

  constructor(
    private readonly grant: (request: CallCapacityRequest) => Promise<'lease' | 'none'> = async () => 'lease',
  ) {
    super();
  }

  override reportRetryAfter(scope: ThrottleScope, retryAfterMs: number): void {
    this.reported.push(retryAfterMs);
    super.reportRetryAfter(scope, retryAfterMs);
  }

  async acquire(scope: ThrottleScope, request: CallCapacityRequest): Promise<CallLease | undefined> {
    this.asked.push({ scope, request });
    if ((await this.grant(request)) === 'none') return undefined;
    return { release: (usage) => void this.released.push(usage) };
  }
}

const agentWith = (throttle: RecordingThrottle) =>
  new AnthropicAgent({ apiKey: 'sk-ant-test', baseURL: fake.baseURL, throttle }, {});
const request = { messages: [{ role: 'user' as const, content: 'x'.repeat(400) }], model: MODEL, correlationId: 'c' };

it('asks for capacity with the estimate and releases it with the reply usage', async () => {
  const throttle = new RecordingThrottle();
  fake.enqueue({ kind: 'text', text: 'done', usage: { input_tokens: 120, output_tokens: 30 } });
  const result = await agentWith(throttle).run({ ...request, system: 'Be brief.', maxTokens: 500 });
  expect(result.text).toBe('done');
  expect(throttle.asked).toHaveLength(1);
  const { scope, request: asked } = throttle.asked[0]!;
  expect(scope).toMatchObject({ provider: 'anthropic', model: MODEL });
  // 400 characters of prompt and a little JSON around it: over 100 tokens, far under the 500 of output.
  expect(asked.estimate.outputTokens).toBe(500);
  expect(asked.estimate.inputTokens).toBeGreaterThan(100);
  expect(asked.estimate.inputTokens).toBeLessThan(130);
  expect(throttle.released).toEqual([{ inputTokens: 120, outputTokens: 30 }]);
});

it('releases a failed try with zero, reports the 429 and asks again for the next try', async () => {
  const throttle = new RecordingThrottle();
  fake.enqueue(
    { kind: 'error', status: 429, type: 'rate_limit_error', message: 'slow', headers: { 'retry-after': '0' } },
    { kind: 'text', text: 'after', usage: { input_tokens: 5, output_tokens: 6 } },
  );
  await agentWith(throttle).run(request);
  expect(throttle.asked).toHaveLength(2);
  expect(throttle.reported).toHaveLength(1);
  expect(throttle.released).toEqual([
    { inputTokens: 0, outputTokens: 0 },
    { inputTokens: 5, outputTokens: 6 },
  ]);
});

it('an acquire that gives up fails the call as retryable, one aborted is the cancellation; no request is sent', async () => {
  const refusing = new RecordingThrottle(() => Promise.reject(new Error('no capacity was granted in time')));
  const failure = await agentWith(refusing)
    .run(request)
    .then(
      () => undefined,
      (error: unknown) => error,
    );
  expect(failure).toBeInstanceOf(ApplicationFailure);
  expect(failure).toMatchObject({ type: ANTHROPIC_RETRYABLE, nonRetryable: false });
  expect((failure as Error).message).toContain('waited for capacity');

  const controller = new AbortController();
  const waiting = new RecordingThrottle(
    (asked) =>
      new Promise((_, reject) => asked.signal!.addEventListener('abort', () => reject(asked.signal!.reason as Error))),
  );
  const run = agentWith(waiting).run({ ...request, signal: controller.signal });
  setTimeout(() => controller.abort(new Error('attempt timed out')), 50);
  const cancelled = await run.then(
    () => undefined,
    (error: unknown) => error,
  );
  expect(cancelled).toBeInstanceOf(CancelledFailure);
  expect((cancelled as Error).message).toContain('aborted while waiting for capacity');
  expect(fake.requests).toHaveLength(0);
});

it('a scope without a limit (acquire answers undefined) is sent as before', async () => {
  const throttle = new RecordingThrottle(async () => 'none');
  fake.enqueue({ kind: 'text', text: 'free' });
  await expect(agentWith(throttle).run(request)).resolves.toMatchObject({ text: 'free' });
  expect(throttle.released).toEqual([]);
});

it('estimates input from every character sent, output from max_tokens', () => {
  const small = estimateCallTokens({ messages: [{ role: 'user', content: 'hi' }] }, 10);
  const large = estimateCallTokens(
    { system: 's'.repeat(4_000), messages: [{ role: 'user', content: 'hi' }], tools: [{ name: 't' }] },
    10,
  );
  expect(small.outputTokens).toBe(10);
  expect(large.inputTokens - small.inputTokens).toBeGreaterThanOrEqual(1_000);
});
