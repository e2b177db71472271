/**
 * The Anthropic agent's tool loop, through the real SDK client against the local fake Messages API, with the
 * worktree tools on a real folder. Covers: handlers run and their results go back as `tool_result` blocks
 * until the model answers; one call record per round (distinct prompt hashes, usage summed) and every one in
 * the recording agent's log; handler errors and unknown tools fed back as `is_error`; path escapes (`..`,
 * absolute, a symlink out, `.git`) and read-only files refused through the tools, nothing written outside;
 * `run_tests` through an injected runner; a structured answer through `respond`; the round limit; an abort
 * during a call and during a tool run; an API error mid-loop keeping the earlier calls; a 529 mid-loop waited
 * out; unusable tools.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync, existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { AnthropicAgent, RESPOND_TOOL, TOOL_ROUNDS_EXHAUSTED } from '../../src/agents/anthropic';
import { ANTHROPIC_RETRYABLE } from '../../src/agents/anthropic-errors';
import { ProcessThrottle } from '../../src/agents/call-throttle';
import { promptHash } from '../../src/agents/prompt-hash';
import { callRecordsOf, recordingAgent } from '../../src/agents/recording';
import { CallRecordSchema, type AgentRequest, type AgentTool, type CallRecord } from '../../src/agents/types';
import { worktreeAccess, worktreeTools, type ToolTestRun } from '../../src/agents/worktree-tools';
import { ConversationStore } from '../../src/storage/conversation';
import { MemoryBlobStore } from '../../src/storage/blob-store';
import {
  startFakeAnthropic,
  toolResultsOf,
  type FakeAnthropic,
  type FakeReply,
  type FakeUsage,
} from '../support/fake-anthropic';

const TEST_MODEL = 'claude-haiku-4-5';

let fake: FakeAnthropic;
let root: string;
let worktree: string;
let outside: string;

beforeAll(async () => {
  fake = await startFakeAnthropic();
});
afterAll(async () => {
  await fake.close();
});
beforeEach(() => {
  fake.reset();
  root = mkdtempSync(path.join(os.tmpdir(), 'anthropic-tools-'));
  worktree = path.join(root, 'worktree');
  outside = path.join(root, 'outside');
  mkdirSync(path.join(worktree, 'src'), { recursive: true });
  mkdirSync(path.join(worktree, '.git'));
  mkdirSync(outside);
  writeFileSync(path.join(worktree, '.git', 'config'), '[core]\n');
  writeFileSync(path.join(worktree, 'src', 'add.js'), 'module.exports = {};\n');
  writeFileSync(path.join(worktree, 'test.js'), 'the tests\n');
  writeFileSync(path.join(outside, 'secret.txt'), 'do not read\n');
  symlinkSync(outside, path.join(worktree, 'out'));
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

function agent(options: ConstructorParameters<typeof AnthropicAgent>[0] = {}): AnthropicAgent {
  return new AnthropicAgent({ apiKey: 'sk-ant-test-key', baseURL: fake.baseURL, ...options }, {});
}

function request(overrides: Partial<AgentRequest> = {}): AgentRequest {
  return {
    system: 'You implement small JavaScript modules.',
    messages: [{ role: 'user', content: 'Implement add(a, b) in src/add.js.' }],
    model: TEST_MODEL,
    correlationId: 'tree/calc/impl/0',
    ...overrides,
  };
}

/** The worktree tools on the test's folder, with `test.js` read-only and an injected test runner. */
function tools(runTests?: (files: string[]) => Promise<ToolTestRun>): AgentTool[] {
  return worktreeTools(worktreeAccess(worktree, { readOnly: ['test.js'], ...(runTests ? { runTests } : {}) }));
}

/** One round that calls one tool. */
function use(name: string, input: unknown, usage?: FakeUsage): FakeReply {
  return { kind: 'tools', uses: [{ name, input }], ...(usage ? { usage } : {}) };
}

async function rejection(run: Promise<unknown>): Promise<Error> {
  return run.then(
    () => {
      throw new Error('expected the call to fail');
    },
    (e: unknown) => e as Error,
  );
}

describe('the tool loop', () => {
  test('runs the handlers, sends their results back, and returns the final text; one call record per round', async () => {
    fake.enqueue(
      {
        kind: 'tools',
        text: 'Let me look first.',
        uses: [
          { name: 'list_files', input: {} },
          { name: 'read_file', input: { path: 'src/add.js' } },
        ],
        usage: { input_tokens: 100, output_tokens: 10 },
      },
      use(
        'write_file',
        { path: 'src/add.js', content: 'module.exports = { add: (a, b) => a + b };\n' },
        { input_tokens: 200, output_tokens: 30, cache_read_input_tokens: 50 },
      ),
      { kind: 'text', text: '{"exit": "TestsPassed"}', usage: { input_tokens: 300, output_tokens: 5 } },
    );

    const result = await agent().run(request({ tools: tools() }));

    expect(result.text).toBe('{"exit": "TestsPassed"}');
    expect(readFileSync(path.join(worktree, 'src', 'add.js'), 'utf8')).toBe(
      'module.exports = { add: (a, b) => a + b };\n',
    );
    expect(result.toolUses).toEqual([
      { name: 'list_files', input: '.', ok: true },
      { name: 'read_file', input: 'src/add.js', ok: true },
      { name: 'write_file', input: 'src/add.js (43 bytes)', ok: true },
    ]);

    // Every round is a call: records parse, prompts differ (each round sends the transcript so far), tokens add up.
    expect(result.calls).toHaveLength(3);
    for (const call of result.calls)
      expect(CallRecordSchema.parse(call)).toMatchObject({
        correlationId: 'tree/calc/impl/0',
        provider: 'anthropic',
        model: TEST_MODEL,
        status: 'success',
      });
    expect(result.calls[0]!.promptHash).toBe(promptHash(request()));
    expect(new Set(result.calls.map((c) => c.promptHash)).size).toBe(3);
    expect(result.call).toEqual(result.calls[2]);
    expect(result.usage).toEqual({ inputTokens: 600, outputTokens: 45, cacheReadTokens: 50 });

    // The requests: the tools offered every round (the model chooses: no tool_choice), results paired by id.
    expect(fake.requests).toHaveLength(3);
    const first = fake.requests[0]!.body as {
      tools: { name: string; input_schema: { type: string } }[];
      tool_choice?: unknown;
    };
    expect(first.tools.map((t) => t.name)).toEqual(['read_file', 'write_file', 'list_files', 'delete_file']);
    expect(first.tools.every((t) => t.input_schema.type === 'object')).toBe(true);
    expect(first.tool_choice).toBeUndefined();
    const second = fake.requests[1]!.body as { messages: { role: string; content: { id?: string }[] }[] };
    expect(second.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user']);
    expect(second.messages[1]!.content).toEqual([
      { type: 'text', text: 'Let me look first.' },
      { type: 'tool_use', id: expect.stringMatching(/^toolu_fake_/), name: 'list_files', input: {} },
      { type: 'tool_use', id: expect.stringMatching(/^toolu_fake_/), name: 'read_file', input: { path: 'src/add.js' } },
    ]);
    const [listId, readId] = second.messages[1]!.content.slice(1).map((block) => block.id);
    expect(toolResultsOf(fake.requests[1]!)).toEqual([
      { type: 'tool_result', tool_use_id: listId, content: 'out\nsrc/add.js\ntest.js' },
      { type: 'tool_result', tool_use_id: readId, content: 'module.exports = {};\n' },
    ]);
    expect(toolResultsOf(fake.requests[2]!)).toEqual([
      {
        type: 'tool_result',
        tool_use_id: expect.stringMatching(/^toolu_fake_/),
        content: 'wrote src/add.js (43 bytes)',
      },
    ]);
  });

  test('the recording agent logs every round, on success and on failure', async () => {
    const calls: CallRecord[] = [];
    const recorded = recordingAgent(agent(), {
      calls,
      conversations: new ConversationStore(new MemoryBlobStore()),
      runCorrelationId: 'run-1',
    });
    fake.enqueue(use('list_files', {}), use('list_files', { path: 'src' }), { kind: 'text', text: 'done' });
    const result = await recorded.run(request({ tools: tools() }));
    expect(calls).toEqual(result.calls.map((c) => ({ ...c, runCorrelationId: 'run-1' })));
    expect(calls).toHaveLength(3);

    fake.enqueue(use('list_files', {}), { kind: 'error', status: 500, type: 'api_error', message: 'boom' });
    await rejection(recorded.run(request({ tools: tools() })));
    expect(calls).toHaveLength(5);
    expect(calls.slice(3).map((c) => c.status)).toEqual(['success', 'error']);
  });

  test('a handler that throws and an unknown tool are error results the model reads; the loop goes on', async () => {
    const flaky: AgentTool = {
      name: 'lookup',
      description: 'Looks something up.',
      inputSchema: { type: 'object', properties: { key: { type: 'string' } } },
      run: async () => {
        throw new Error('the index is not built yet');
      },
    };
    fake.enqueue(
      {
        kind: 'tools',
        uses: [
          { name: 'lookup', input: { key: 'add' } },
          { name: 'rm_rf', input: { path: '/' } },
        ],
      },
      { kind: 'text', text: 'I will do without.' },
    );

    const result = await agent().run(request({ tools: [flaky] }));

    expect(result.text).toBe('I will do without.');
    expect(toolResultsOf(fake.requests[1]!)).toEqual([
      {
        type: 'tool_result',
        tool_use_id: expect.stringMatching(/_0$/),
        content: 'the index is not built yet',
        is_error: true,
      },
      {
        type: 'tool_result',
        tool_use_id: expect.stringMatching(/_1$/),
        content: 'there is no tool named "rm_rf"; the tools are: lookup',
        is_error: true,
      },
    ]);
    expect(result.toolUses).toEqual([
      { name: 'lookup', input: '{"key":"add"}', ok: false, error: 'the index is not built yet' },
      {
        name: 'rm_rf',
        input: '{"path":"/"}',
        ok: false,
        error: 'there is no tool named "rm_rf"; the tools are: lookup',
      },
    ]);
  });

  test('bad tool input is an error result naming the field', async () => {
    fake.enqueue(use('write_file', { path: 'src/x.js' }), { kind: 'text', text: 'ok' });
    await agent().run(request({ tools: tools() }));
    expect(toolResultsOf(fake.requests[1]!)).toEqual([
      expect.objectContaining({ is_error: true, content: expect.stringMatching(/^invalid input: content: /) }),
    ]);
    expect(existsSync(path.join(worktree, 'src', 'x.js'))).toBe(false);
  });

  test('a structured request with tools offers respond beside them, and respond ends the loop', async () => {
    const schema = { type: 'object', properties: { exit: { type: 'string' } }, required: ['exit'] };
    fake.enqueue(use('read_file', { path: 'src/add.js' }), use(RESPOND_TOOL, { exit: 'TestsPassed' }));

    const result = await agent().run(request({ tools: tools(), outputSchema: schema }));

    expect(result.output).toEqual({ exit: 'TestsPassed' });
    expect(result.calls).toHaveLength(2);
    const body = fake.requests[0]!.body as { tools: { name: string }[]; tool_choice?: unknown };
    expect(body.tools.map((t) => t.name)).toEqual([
      'read_file',
      'write_file',
      'list_files',
      'delete_file',
      RESPOND_TOOL,
    ]);
    expect(body.tool_choice).toBeUndefined();
  });

  test('without tools nothing changes: one call, no toolUses', async () => {
    fake.enqueue({ kind: 'text', text: 'plain' });
    const result = await agent().run(request());
    expect(result.calls).toEqual([result.call]);
    expect(result.toolUses).toBeUndefined();
    expect((fake.requests[0]!.body as { tools?: unknown }).tools).toBeUndefined();
  });
});

describe('the worktree tools refuse what is not the agent’s', () => {
  /** Runs one round calling `name` with `input` and returns the tool result the model got. */
  async function toolResult(
    name: string,
    input: unknown,
    runTests?: (files: string[]) => Promise<ToolTestRun>,
  ): Promise<{ content?: unknown; is_error?: boolean }> {
    fake.enqueue(use(name, input), { kind: 'text', text: 'done' });
    await agent().run(request({ tools: tools(runTests) }));
    const [result] = toolResultsOf(fake.requests[fake.requests.length - 1]!);
    return result!;
  }

  test.each([
    ['read_file', { path: '../outside/secret.txt' }, /leads outside the worktree/],
    ['read_file', { path: path.join(os.tmpdir(), 'outside', 'secret.txt') }, /must be relative to the worktree/],
    ['read_file', { path: '/etc/passwd' }, /must be relative to the worktree/],
    ['read_file', { path: 'out/secret.txt' }, /a symlink on the way leads outside the worktree/],
    ['read_file', { path: '.git/config' }, /files in \.git are not the agent’s/],
    ['write_file', { path: '../escape.js', content: 'x' }, /leads outside the worktree/],
    ['write_file', { path: 'out/planted.js', content: 'x' }, /a symlink on the way leads outside the worktree/],
    ['write_file', { path: 'src/../../escape.js', content: 'x' }, /leads outside the worktree/],
    ['write_file', { path: '.git/hooks/post-commit', content: 'x' }, /files in \.git are not the agent’s/],
    ['write_file', { path: 'test.js', content: 'rigged' }, /test\.js is read-only/],
    ['write_file', { path: './test.js', content: 'rigged' }, /test\.js is read-only/],
    ['delete_file', { path: 'test.js' }, /test\.js is read-only/],
    ['delete_file', { path: 'out/secret.txt' }, /a symlink on the way leads outside the worktree/],
    ['list_files', { path: '..' }, /leads outside the worktree/],
    ['list_files', { path: 'out' }, /a symlink on the way leads outside the worktree/],
  ])('%s %j is refused', async (name, input, message) => {
    const result = await toolResult(name, input);
    expect(result.is_error).toBe(true);
    expect(String(result.content)).toMatch(message);
    // Nothing outside changed, nothing read-only changed, nothing planted.
    expect(readFileSync(path.join(outside, 'secret.txt'), 'utf8')).toBe('do not read\n');
    expect(readFileSync(path.join(worktree, 'test.js'), 'utf8')).toBe('the tests\n');
    expect(existsSync(path.join(outside, 'planted.js'))).toBe(false);
    expect(existsSync(path.join(root, 'escape.js'))).toBe(false);
    expect(existsSync(path.join(worktree, '.git', 'hooks'))).toBe(false);
  });

  test('a symlink to a file outside cannot be read or written through', async () => {
    symlinkSync(path.join(outside, 'secret.txt'), path.join(worktree, 'src', 'link.txt'));
    expect(await toolResult('read_file', { path: 'src/link.txt' })).toMatchObject({
      is_error: true,
      content: expect.stringMatching(/leads outside the worktree/),
    });
    expect(await toolResult('write_file', { path: 'src/link.txt', content: 'x' })).toMatchObject({ is_error: true });
    expect(readFileSync(path.join(outside, 'secret.txt'), 'utf8')).toBe('do not read\n');
  });

  test('writes make folders, deletes remove files, inside the worktree', async () => {
    expect(await toolResult('write_file', { path: 'lib/deep/x.js', content: 'x\n' })).toEqual({
      type: 'tool_result',
      tool_use_id: expect.any(String),
      content: 'wrote lib/deep/x.js (2 bytes)',
    });
    expect(readFileSync(path.join(worktree, 'lib', 'deep', 'x.js'), 'utf8')).toBe('x\n');
    expect(await toolResult('delete_file', { path: 'lib/deep/x.js' })).toMatchObject({
      content: 'deleted lib/deep/x.js',
    });
    expect(existsSync(path.join(worktree, 'lib', 'deep', 'x.js'))).toBe(false);
    expect(await toolResult('list_files', { path: 'lib' })).toMatchObject({ content: 'no files under lib' });
  });

  test('run_tests runs the injected runner with the files named, and shows its summary and output', async () => {
    const asked: string[][] = [];
    const runTests = async (files: string[]): Promise<ToolTestRun> => {
      asked.push(files);
      return {
        passed: false,
        summary: '1 passed, 1 failed (node --test, exit 1, 40 ms)',
        output: 'not ok 2 - adds negatives\n',
      };
    };
    const result = await toolResult('run_tests', { files: ['test/add.test.js'] }, runTests);
    expect(asked).toEqual([['test/add.test.js']]);
    expect(result).toMatchObject({
      content: 'FAILED: 1 passed, 1 failed (node --test, exit 1, 40 ms)\n\nnot ok 2 - adds negatives\n',
    });
    expect(result.is_error).toBeUndefined();
    expect((fake.requests[0]!.body as { tools: { name: string }[] }).tools.map((t) => t.name)).toContain('run_tests');
  });

  test('no runner, no run_tests tool', () => {
    expect(tools().map((t) => t.name)).not.toContain('run_tests');
  });
});

describe('limits and failures', () => {
  test('a model still using tools after maxToolRounds calls: a non-retryable failure carrying every call', async () => {
    fake.setDefault(use('list_files', {}));

    const error = await rejection(agent().run(request({ tools: tools(), maxToolRounds: 3 })));

    expect(error).toBeInstanceOf(ApplicationFailure);
    expect((error as ApplicationFailure).type).toBe(TOOL_ROUNDS_EXHAUSTED);
    expect((error as ApplicationFailure).nonRetryable).toBe(true);
    expect(error.message).toBe(
      'the model was still using tools after 3 model calls (maxToolRounds) and gave no final answer',
    );
    expect(fake.requests).toHaveLength(3);
    expect(callRecordsOf(error).map((c) => c.status)).toEqual(['success', 'success', 'success']);
  });

  test('an API error mid-loop keeps its mapping and carries the earlier calls', async () => {
    fake.enqueue(use('list_files', {}), {
      kind: 'error',
      status: 500,
      type: 'api_error',
      message: 'Internal server error',
    });

    const error = await rejection(agent().run(request({ tools: tools() })));

    expect((error as ApplicationFailure).type).toBe(ANTHROPIC_RETRYABLE);
    const records = callRecordsOf(error);
    expect(records.map((c) => c.status)).toEqual(['success', 'error']);
    expect(records[1]!.error).toMatch(/^anthropic 500 api_error: Internal server error/);
  });

  test('a 529 mid-loop is waited out: the round is sent again with the same transcript, the try recorded as throttled', async () => {
    fake.enqueue(
      use('list_files', {}),
      {
        kind: 'error',
        status: 529,
        type: 'overloaded_error',
        message: 'Overloaded',
        headers: { 'retry-after-ms': '50' },
      },
      { kind: 'text', text: 'Done.' },
    );

    const result = await agent({ throttle: new ProcessThrottle() }).run(request({ tools: tools() }));

    expect(result.text).toBe('Done.');
    expect(result.calls.map((c) => c.status)).toEqual(['success', 'throttled', 'success']);
    expect(result.calls[1]!.error).toBe('anthropic 529 overloaded_error: Overloaded; waited 50 ms (retry-after)');
    // The same round, sent twice: the same transcript, the same hash.
    expect(result.calls[2]!.promptHash).toBe(result.calls[1]!.promptHash);
    expect(fake.requests[2]!.body).toEqual(fake.requests[1]!.body);
    expect(toolResultsOf(fake.requests[2]!)).toHaveLength(1);
  });

  test('aborted during a model call: CancelledFailure, the cut-off call recorded as a timeout after the earlier one', async () => {
    const controller = new AbortController();
    fake.enqueue(use('list_files', {}), { kind: 'slow', delayMs: 10_000, then: { kind: 'text', text: 'too late' } });
    setTimeout(() => controller.abort(), 200);

    const error = await rejection(agent().run(request({ tools: tools(), signal: controller.signal })));

    expect(error).toBeInstanceOf(CancelledFailure);
    expect(callRecordsOf(error).map((c) => c.status)).toEqual(['success', 'timeout']);
  });

  test('aborted during a tool run: CancelledFailure after the tool, no further call', async () => {
    const controller = new AbortController();
    const slow: AgentTool = {
      name: 'build',
      description: 'Builds the project.',
      inputSchema: { type: 'object', properties: {} },
      run: async (_input, { signal }) => {
        controller.abort();
        return signal?.aborted ? 'stopped' : 'built';
      },
    };
    fake.enqueue(use('build', {}));
    fake.setDefault({ kind: 'text', text: 'should not be asked' });

    const error = await rejection(agent().run(request({ tools: [slow], signal: controller.signal })));

    expect(error).toBeInstanceOf(CancelledFailure);
    expect(fake.requests).toHaveLength(1);
    expect(callRecordsOf(error)).toHaveLength(1);
  });

  test('heartbeats go on while a tool runs', async () => {
    let beats = 0;
    const waiting: AgentTool = {
      name: 'wait',
      description: 'Waits.',
      inputSchema: { type: 'object', properties: {} },
      run: () => new Promise((resolve) => setTimeout(() => resolve('waited'), 300)),
    };
    fake.enqueue(use('wait', {}), { kind: 'text', text: 'done' });
    await agent({ heartbeatIntervalMs: 50 }).run(request({ tools: [waiting], heartbeat: () => (beats += 1) }));
    expect(beats).toBeGreaterThanOrEqual(4);
  });

  test.each([
    [[{ name: 'respond' }], /"respond" is reserved/],
    [[{ name: 'read file' }], /must match/],
    [[{ name: 'x' }, { name: 'x' }], /"x" is offered twice/],
  ])('unusable tools %j: non-retryable before anything is sent', async (named, message) => {
    const offered = named.map((t) => ({
      ...t,
      description: 'd',
      inputSchema: { type: 'object' },
      run: async () => '',
    }));
    const error = await rejection(agent().run(request({ tools: offered })));
    expect((error as ApplicationFailure).type).toBe('InvalidAgentRequest');
    expect((error as ApplicationFailure).nonRetryable).toBe(true);
    expect(error.message).toMatch(message);
    expect(fake.requests).toHaveLength(0);
  });
});
