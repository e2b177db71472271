/**
 * The claude-code provider against a fake `claude` executable (test/fixtures/fake-claude/claude) that records
 * its argv and prints a scripted result. Covers: the arguments of first and resumed calls, the transcript
 * preamble, structured output (parsed and invalid), usage and the call record, and the failure mapping
 * (not installed, non-zero exit, is_error, unreadable stdout, timeout, cancellation), plus heartbeats.
 */
import { isAlive } from '../support/processes';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import {
  CLAUDE_CODE_KILL_GRACE_MS,
  ClaudeCodeAgent,
  type ClaudeCodeAgentOptions,
  claudeCodeAgentFactory,
} from '../../src/agents/claude-code';
import { promptHash } from '../../src/agents/prompt-hash';
import { type AgentRequest, type CallRecord, CallRecordSchema } from '../../src/agents/types';

const FAKE_CLAUDE = join(__dirname, '..', 'fixtures', 'fake-claude', 'claude');
const NOT_INSTALLED =
  'the Claude Code CLI ("claude") is not installed or not on PATH; install it (npm i -g @anthropic-ai/claude-code) or choose another agent (TREADLE_AGENT=anthropic|scripted)';

interface Invocation {
  argv: string[];
  pid: number;
  stdin: string | null;
  cwd: string;
  env: Record<string, string>;
}

let workDir: string;

beforeAll(() => {
  // git does not always keep the executable bit.
  chmodSync(FAKE_CLAUDE, 0o755);
});
beforeEach(() => {
  workDir = mkdtempSync(join(tmpdir(), 'treadle-claude-code-'));
});
afterEach(() => {
  rmSync(workDir, { recursive: true, force: true });
});

/** An agent running the fake CLI in the given mode, and the invocations it recorded. */
function fakeAgent(
  env: Record<string, string> = {},
  options: ClaudeCodeAgentOptions = {},
): { agent: ClaudeCodeAgent; invocations: () => Invocation[] } {
  const record = join(workDir, 'invocations.jsonl');
  // Working directories go under this test's folder; their isolation is tested in security-claude-code.test.ts.
  const agent = new ClaudeCodeAgent({
    command: FAKE_CLAUDE,
    workRoot: join(workDir, 'work'),
    ...options,
    env: { FAKE_CLAUDE_RECORD: record, ...env },
  });
  const invocations = (): Invocation[] =>
    existsSync(record)
      ? readFileSync(record, 'utf8')
          .split('\n')
          .filter((l) => l !== '')
          .map((l) => JSON.parse(l) as Invocation)
      : [];
  return { agent, invocations };
}

function request(overrides: Partial<AgentRequest> = {}): AgentRequest {
  return { messages: [{ role: 'user', content: 'Say hello.' }], correlationId: 'item-1/draft/1', ...overrides };
}

async function failureOf(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected the call to fail');
}

function callOf(failure: ApplicationFailure | CancelledFailure): CallRecord {
  return CallRecordSchema.parse(failure.details?.[0]);
}

async function waitFor<T>(probe: () => T | undefined, timeoutMs = 5_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('arguments', () => {
  it('runs claude -p <prompt> --output-format json with the model and system prompt', async () => {
    const { agent, invocations } = fakeAgent();
    const result = await agent.run(request({ model: 'claude-sonnet-4-5', system: 'Be brief.' }));
    expect(invocations().map((i) => i.argv)).toEqual([
      [
        '-p',
        'Say hello.',
        '--output-format',
        'json',
        '--model',
        'claude-sonnet-4-5',
        '--append-system-prompt',
        'Be brief.',
      ],
    ]);
    expect(result.text).toBe('hello from fake claude');
    expect(result.sessionId).toBe('session-1');
  });

  it('leaves --model out when the request names none, and appends extraArgs', async () => {
    const { agent, invocations } = fakeAgent({}, { extraArgs: ['--allowedTools', 'Read'] });
    const result = await agent.run(request());
    expect(invocations()[0]!.argv).toEqual(['-p', 'Say hello.', '--output-format', 'json', '--allowedTools', 'Read']);
    expect(result.call.model).toBe('claude-code-default');
  });

  it('uses CLAUDE_CODE_BIN when no command is given', async () => {
    const previous = process.env.CLAUDE_CODE_BIN;
    process.env.CLAUDE_CODE_BIN = FAKE_CLAUDE;
    try {
      const result = await new ClaudeCodeAgent().run(request());
      expect(result.text).toBe('hello from fake claude');
    } finally {
      if (previous === undefined) delete process.env.CLAUDE_CODE_BIN;
      else process.env.CLAUDE_CODE_BIN = previous;
    }
  });

  it('sends earlier messages as a transcript preamble, then resumes the session with only the last message', async () => {
    const sessions = new Map<string, string>();
    const { agent, invocations } = fakeAgent({}, { sessions });
    const first = await agent.run(
      request({
        conversationId: 'conv-1',
        messages: [
          { role: 'user', content: 'Draft a title.' },
          { role: 'assistant', content: 'Durable Agents' },
          { role: 'user', content: 'Shorter, please.' },
        ],
      }),
    );
    expect(first.sessionId).toBe('session-1');
    expect(sessions.get('conv-1')).toBe('session-1');

    await agent.run(
      request({
        conversationId: 'conv-1',
        messages: [
          { role: 'user', content: 'Draft a title.' },
          { role: 'assistant', content: 'Durable Agents' },
          { role: 'user', content: 'Shorter, please.' },
          { role: 'assistant', content: 'Agents' },
          { role: 'user', content: 'Now a subtitle.' },
        ],
      }),
    );
    const [firstCall, secondCall] = invocations();
    expect(firstCall!.argv).toEqual([
      '-p',
      'Previous conversation:\nuser: Draft a title.\n\nassistant: Durable Agents\n\nShorter, please.',
      '--output-format',
      'json',
    ]);
    expect(secondCall!.argv).toEqual(['-p', 'Now a subtitle.', '--output-format', 'json', '--resume', 'session-1']);
    // The resumed call's session id replaces the old one.
    expect(sessions.get('conv-1')).toBe('session-1+1');
  });

  it('resumes resumeSessionId when the conversation has no session yet', async () => {
    const { agent, invocations } = fakeAgent({}, { resumeSessionId: 'earlier-session' });
    await agent.run(
      request({
        messages: [
          { role: 'assistant', content: 'Hi' },
          { role: 'user', content: 'Go on.' },
        ],
      }),
    );
    expect(invocations()[0]!.argv).toEqual(['-p', 'Go on.', '--output-format', 'json', '--resume', 'earlier-session']);
  });

  it('forgets a session whose resumed call failed, so the retry sends the transcript', async () => {
    const sessions = new Map([['conv-2', 'lost-session']]);
    const { agent } = fakeAgent({ FAKE_CLAUDE_MODE: 'exit2' }, { sessions });
    await failureOf(agent.run(request({ conversationId: 'conv-2' })));
    expect(sessions.has('conv-2')).toBe(false);
  });

  it('passes a prompt that starts with "-" on stdin, where it cannot be read as an option', async () => {
    const { agent, invocations } = fakeAgent();
    await agent.run(request({ messages: [{ role: 'user', content: '--- front matter\nSummarise this.' }] }));
    expect(invocations()[0]).toMatchObject({
      argv: ['-p', '--output-format', 'json'],
      stdin: '--- front matter\nSummarise this.',
    });
  });

  it('passes a prompt too long for one argument on stdin', async () => {
    const { agent, invocations } = fakeAgent();
    const long = 'x'.repeat(200_000);
    await agent.run(request({ messages: [{ role: 'user', content: long }] }));
    expect(invocations()[0]).toMatchObject({ argv: ['-p', '--output-format', 'json'], stdin: long });
  });

  it('rejects a conversation that does not end with a user message, non-retryably', async () => {
    const { agent, invocations } = fakeAgent();
    const failure = await failureOf(agent.run(request({ messages: [{ role: 'assistant', content: 'Hi' }] })));
    expect(failure).toBeInstanceOf(ApplicationFailure);
    expect(failure).toMatchObject({ type: 'InvalidAgentRequest', nonRetryable: true });
    expect(invocations()).toEqual([]);
  });
});

describe('structured output', () => {
  const outputSchema = {
    type: 'object',
    properties: { verdict: { type: 'string', enum: ['pass', 'fail'] }, score: { type: 'number' } },
    required: ['verdict', 'score'],
  };

  it('asks for JSON matching the schema and parses the reply', async () => {
    const { agent, invocations } = fakeAgent({ FAKE_CLAUDE_RESULT: '{"verdict":"pass","score":4}' });
    const result = await agent.run(request({ outputSchema }));
    const prompt = invocations()[0]!.argv[1]!;
    expect(prompt.startsWith('Say hello.\n\n')).toBe(true);
    expect(prompt).toContain('only a JSON value');
    expect(prompt).toContain(JSON.stringify(outputSchema));
    expect(result.output).toEqual({ verdict: 'pass', score: 4 });
    expect(result.invalidOutput).toBeUndefined();
    expect(result.text).toBe('{"verdict":"pass","score":4}');
  });

  it('accepts a reply in a json code fence', async () => {
    const { agent } = fakeAgent({ FAKE_CLAUDE_RESULT: 'Here it is:\n```json\n{"verdict":"fail","score":1}\n```' });
    const result = await agent.run(request({ outputSchema }));
    expect(result.output).toEqual({ verdict: 'fail', score: 1 });
  });

  it('returns invalidOutput, without throwing, when the reply does not match', async () => {
    const { agent } = fakeAgent({ FAKE_CLAUDE_RESULT: '{"verdict":"maybe"}' });
    const result = await agent.run(request({ outputSchema }));
    expect(result.output).toBeUndefined();
    expect(result.invalidOutput?.raw).toBe('{"verdict":"maybe"}');
    expect(result.invalidOutput?.issues.length).toBeGreaterThan(0);
    expect(result.invalidOutput?.issues.join('\n')).toMatch(/verdict|score/);
    expect(result.call.status).toBe('success');
  });

  it('returns invalidOutput when the reply is not JSON at all', async () => {
    const { agent } = fakeAgent({ FAKE_CLAUDE_RESULT: 'Sure! It passes.' });
    const result = await agent.run(request({ outputSchema }));
    expect(result.invalidOutput?.issues[0]).toMatch(/not JSON/);
  });
});

describe('usage and the call record', () => {
  it('maps usage and records provider, model, prompt hash, latency and status', async () => {
    const { agent } = fakeAgent();
    const req = request({ model: 'claude-opus-4-1', system: 'Be brief.' });
    const before = Date.now();
    const result = await agent.run(req);
    expect(result.usage).toEqual({ inputTokens: 12, outputTokens: 34, cacheReadTokens: 5 });
    const call = CallRecordSchema.parse(result.call);
    expect(call).toMatchObject({
      correlationId: 'item-1/draft/1',
      provider: 'claude-code',
      model: 'claude-opus-4-1',
      promptHash: promptHash(req),
      inputTokens: 12,
      outputTokens: 34,
      cacheReadTokens: 5,
      status: 'success',
    });
    expect(call.error).toBeUndefined();
    expect(call.latencyMs).toBeGreaterThanOrEqual(0);
    expect(Date.parse(call.at)).toBeGreaterThanOrEqual(before - 1);
  });
});

describe('failures', () => {
  it('a missing CLI is non-retryable AgentUnavailable with install advice', async () => {
    const agent = new ClaudeCodeAgent({ command: '/nonexistent/claude' });
    const failure = await failureOf(agent.run(request()));
    expect(failure).toBeInstanceOf(ApplicationFailure);
    const app = failure as ApplicationFailure;
    expect(app.message).toBe(NOT_INSTALLED);
    expect(app.type).toBe('AgentUnavailable');
    expect(app.nonRetryable).toBe(true);
    expect(callOf(app)).toMatchObject({ provider: 'claude-code', status: 'error', error: NOT_INSTALLED });
  });

  it('a missing working directory is reported as such, not as a missing CLI', async () => {
    const { agent } = fakeAgent({}, { cwd: join(workDir, 'missing') });
    const failure = await failureOf(agent.run(request()));
    expect(failure).toMatchObject({ type: 'InvalidAgentConfig', nonRetryable: true });
    expect(failure.message).toContain('working directory');
  });

  it('a non-zero exit is a retryable ClaudeCodeError quoting the exit code and last stderr line', async () => {
    const { agent } = fakeAgent({ FAKE_CLAUDE_MODE: 'exit2' });
    const failure = await failureOf(agent.run(request()));
    expect(failure).toBeInstanceOf(ApplicationFailure);
    expect(failure).toMatchObject({
      type: 'ClaudeCodeError',
      nonRetryable: false,
      message: 'claude exited with code 2: Error: invalid API key',
    });
    expect(callOf(failure as ApplicationFailure)).toMatchObject({
      status: 'error',
      error: 'claude exited with code 2: Error: invalid API key',
    });
  });

  it('is_error is a retryable ClaudeCodeError carrying the usage so far', async () => {
    const { agent } = fakeAgent({ FAKE_CLAUDE_MODE: 'is_error' });
    const failure = await failureOf(agent.run(request()));
    expect(failure).toMatchObject({ type: 'ClaudeCodeError', nonRetryable: false });
    expect(failure.message).toBe(
      'claude reported an error (error_during_execution, exit code 0): the model is overloaded',
    );
    expect(callOf(failure as ApplicationFailure)).toMatchObject({ status: 'error', inputTokens: 3 });
  });

  it('stdout that is not the JSON result is retryable, with an excerpt', async () => {
    const { agent } = fakeAgent({ FAKE_CLAUDE_MODE: 'garbage' });
    const failure = await failureOf(agent.run(request()));
    expect(failure).toMatchObject({ type: 'ClaudeCodeOutputError', nonRetryable: false });
    expect(failure.message).toContain('not its JSON result');
    expect(failure.message).toContain('Welcome to Claude Code!');
    expect(failure.message).not.toContain('\n');
  });

  it('a call over timeoutMs is killed and fails retryably with status timeout', async () => {
    const { agent, invocations } = fakeAgent({ FAKE_CLAUDE_MODE: 'sleep' }, { timeoutMs: 1_000 });
    const failure = await failureOf(agent.run(request()));
    expect(failure).toMatchObject({ type: 'ClaudeCodeTimeout', nonRetryable: false });
    expect(callOf(failure as ApplicationFailure).status).toBe('timeout');
    expect(isAlive(invocations()[0]!.pid)).toBe(false);
  });
});

describe('cancellation and heartbeats', () => {
  it('abort kills the CLI and throws CancelledFailure with the call record', async () => {
    const { agent, invocations } = fakeAgent({ FAKE_CLAUDE_MODE: 'sleep' });
    const controller = new AbortController();
    const running = agent.run(request({ signal: controller.signal }));
    const { pid } = await waitFor(() => invocations()[0]);
    expect(isAlive(pid)).toBe(true);
    controller.abort();
    const failure = await failureOf(running);
    expect(failure).toBeInstanceOf(CancelledFailure);
    expect(callOf(failure as CancelledFailure)).toMatchObject({ status: 'error', error: 'cancelled' });
    expect(isAlive(pid)).toBe(false);
  });

  it('a CLI that ignores SIGTERM is sent SIGKILL after the grace period', async () => {
    const { agent, invocations } = fakeAgent({ FAKE_CLAUDE_MODE: 'sleep', FAKE_CLAUDE_IGNORE_SIGTERM: '1' });
    const controller = new AbortController();
    const running = agent.run(request({ signal: controller.signal }));
    const { pid } = await waitFor(() => invocations()[0]);
    const abortedAt = Date.now();
    controller.abort();
    const failure = await failureOf(running);
    expect(failure).toBeInstanceOf(CancelledFailure);
    expect(Date.now() - abortedAt).toBeGreaterThanOrEqual(CLAUDE_CODE_KILL_GRACE_MS - 50);
    expect(isAlive(pid)).toBe(false);
  });

  it('an already-aborted signal throws CancelledFailure without starting the CLI', async () => {
    const { agent, invocations } = fakeAgent();
    const failure = await failureOf(agent.run(request({ signal: AbortSignal.abort() })));
    expect(failure).toBeInstanceOf(CancelledFailure);
    expect(invocations()).toEqual([]);
  });

  it('heartbeats while the CLI runs', async () => {
    const { agent } = fakeAgent(
      { FAKE_CLAUDE_MODE: 'sleep', FAKE_CLAUDE_SLEEP_MS: '500' },
      { heartbeatIntervalMs: 50 },
    );
    const heartbeat = jest.fn();
    const result = await agent.run(request({ heartbeat }));
    expect(result.text).toBe('hello from fake claude');
    expect(heartbeat.mock.calls.length).toBeGreaterThanOrEqual(3);
    // No heartbeats after the call returned.
    const count = heartbeat.mock.calls.length;
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(heartbeat.mock.calls.length).toBe(count);
  });
});

it('claudeCodeAgentFactory builds a claude-code agent', () => {
  const agent = claudeCodeAgentFactory({
    itemId: 'item-1',
    stage: 'draft',
    attempt: 1,
    input: null,
    config: undefined,
  });
  expect(agent).toBeInstanceOf(ClaudeCodeAgent);
  expect(agent.provider).toBe('claude-code');
});
