/**
 * Conversation memory and the provider sessions kept with it. Cases: a retried call replaces its own turn;
 * `context` offers a session only to the provider that made it, only when it is on the latest turn and no
 * turn was left out; `append` keeps a turn's session only when nothing landed since the context was read;
 * claude-code resumes the session stored with the conversation from a fresh agent where the CLI has it (same
 * process, same directory), sends the transcript at once elsewhere, and falls back to the transcript when the
 * CLI has lost a session; the default factory resumes nothing of its own accord (no per-process session map).
 * Concurrent appends are covered by the BlobStore contract (test/support/blob-store-contract.ts) and across
 * processes in storage-blob-store.test.ts.
 */
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ClaudeCodeAgent, claudeCodeAgentFactory, type ClaudeCodeRequest } from '../../src/agents/claude-code';
import type { AgentMessage } from '../../src/agents/types';
import { MemoryBlobStore } from '../../src/storage/blob-store';
import { ConversationStore } from '../../src/storage/conversation';

const user = (content: string): AgentMessage => ({ role: 'user', content });
const assistant = (content: string): AgentMessage => ({ role: 'assistant', content });

describe('ConversationStore', () => {
  it('replaces a retried call’s turn instead of repeating it, and leaves it out of its own context', async () => {
    const conversations = new ConversationStore(new MemoryBlobStore());
    await conversations.append('c', { correlationId: 'item/a/1', messages: [user('one'), assistant('1')] });
    await conversations.append('c', { correlationId: 'item/b/1', messages: [user('two'), assistant('2')] });
    expect(await conversations.messages('c', 'item/b/1')).toEqual([user('one'), assistant('1')]);
    await conversations.append('c', { correlationId: 'item/b/1', messages: [user('two'), assistant('2, again')] });
    expect((await conversations.turns('c')).map((t) => t.messages[1]!.content)).toEqual(['1', '2, again']);
  });

  it('offers the latest turn’s session to the provider that made it, and to no other', async () => {
    const conversations = new ConversationStore(new MemoryBlobStore());
    expect(await conversations.context('c', { provider: 'claude-code' })).toEqual({ messages: [], version: undefined });
    let context = await conversations.context('c', { provider: 'claude-code' });
    await conversations.append(
      'c',
      {
        correlationId: 'x/1',
        messages: [user('hi'), assistant('hello')],
        session: { provider: 'claude-code', id: 's-1' },
      },
      context,
    );
    context = await conversations.context('c', { provider: 'claude-code' });
    expect(context).toMatchObject({ messages: [user('hi'), assistant('hello')], resumeSessionId: 's-1' });
    expect(context.version).toMatch(/^sha256:/);
    expect(await conversations.context('c', { provider: 'anthropic' })).not.toHaveProperty('resumeSessionId');
    expect(await conversations.context('c')).not.toHaveProperty('resumeSessionId');

    // A turn by another provider: claude-code's session has not seen it, so it is not offered any more.
    await conversations.append(
      'c',
      { correlationId: 'y/1', messages: [user('more'), assistant('ok')] },
      await conversations.context('c'),
    );
    expect(await conversations.context('c', { provider: 'claude-code' })).not.toHaveProperty('resumeSessionId');
  });

  it('offers no session when the call’s own earlier try is left out (every later session has seen it)', async () => {
    const conversations = new ConversationStore(new MemoryBlobStore());
    await conversations.append(
      'c',
      { correlationId: 'a', messages: [user('1')], session: { provider: 'p', id: 's-a' } },
      await conversations.context('c'),
    );
    await conversations.append(
      'c',
      { correlationId: 'b', messages: [user('2')], session: { provider: 'p', id: 's-b' } },
      await conversations.context('c'),
    );
    expect(await conversations.context('c', { provider: 'p' })).toMatchObject({ resumeSessionId: 's-b' });
    expect(await conversations.context('c', { provider: 'p', except: 'b' })).not.toHaveProperty('resumeSessionId');
    expect(await conversations.context('c', { provider: 'p', except: 'a' })).not.toHaveProperty('resumeSessionId');
  });

  it('keeps a turn’s session only if nothing landed since its context was read', async () => {
    const conversations = new ConversationStore(new MemoryBlobStore());
    const first = await conversations.context('c', { provider: 'p' });
    const second = await conversations.context('c', { provider: 'p' });
    // Two calls read the same (empty) conversation; the first to append keeps its session...
    await conversations.append(
      'c',
      { correlationId: 'a', messages: [user('a')], session: { provider: 'p', id: 's-a' } },
      first,
    );
    // ...the second lands after it, so its session never saw turn `a` and must not be resumed.
    await conversations.append(
      'c',
      { correlationId: 'b', messages: [user('b')], session: { provider: 'p', id: 's-b' } },
      second,
    );
    const turns = await conversations.turns('c');
    expect(turns.map((t) => [t.correlationId, t.session?.id])).toEqual([
      ['a', 's-a'],
      ['b', undefined],
    ]);
    expect(await conversations.context('c', { provider: 'p' })).not.toHaveProperty('resumeSessionId');
    // Without the context it was based on, a session cannot be vouched for either.
    await conversations.append('c', {
      correlationId: 'c',
      messages: [user('c')],
      session: { provider: 'p', id: 's-c' },
    });
    expect((await conversations.turns('c'))[2]!.session).toBeUndefined();
  });
});

describe('claude-code sessions live with the conversation', () => {
  let dir: string;
  let fakeClaude: string;
  let record: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'treadle-sessions-'));
    record = path.join(dir, 'argv.jsonl');
    fakeClaude = path.join(dir, 'claude');
    // A CLI that, like the real one, knows only the sessions made on its own machine (FAKE_MACHINE, default
    // "a"): it refuses `--resume` of any other with "No conversation found" and exit 1, and prints no result.
    // It records its arguments in `record`.
    writeFileSync(
      fakeClaude,
      `#!/usr/bin/env node
const fs = require('node:fs');
const argv = process.argv.slice(2);
const record = ${JSON.stringify(record)};
fs.appendFileSync(record, JSON.stringify(argv) + '\\n');
const i = argv.indexOf('--resume');
const resumed = i === -1 ? undefined : argv[i + 1];
const machine = process.env.FAKE_MACHINE || 'a';
if (resumed !== undefined && !resumed.startsWith(machine + ':')) {
  process.stderr.write('No conversation found with session ID: ' + resumed + '\\n');
  process.exit(1);
}
const count = fs.readFileSync(record, 'utf8').trim().split('\\n').length;
process.stdout.write(JSON.stringify({ type: 'result', subtype: 'success', is_error: false, result: 'reply ' + count, session_id: resumed ?? machine + ':session-' + count }) + '\\n');
`,
    );
    chmodSync(fakeClaude, 0o755);
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  /** An agent as a worker builds it: `machine` is what its CLI knows sessions of, `cwd` where it runs. */
  const agentOn = (machine: string, cwd: string): ClaudeCodeAgent =>
    new ClaudeCodeAgent({ command: fakeClaude, cwd, env: { FAKE_MACHINE: machine } });
  const invocations = (): string[][] =>
    existsSync(record)
      ? readFileSync(record, 'utf8')
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as string[])
      : [];

  /**
   * One call continuing a stored conversation, as the recording agent does it: the stored messages and the
   * current session go with the request, and the exchange and its session are appended against that read.
   */
  async function say(
    agent: ClaudeCodeAgent,
    conversations: ConversationStore,
    correlationId: string,
    text: string,
  ): Promise<void> {
    const context = await conversations.context('design', { except: correlationId, provider: agent.provider });
    const request: ClaudeCodeRequest = {
      messages: [...context.messages, user(text)],
      conversationId: 'design',
      correlationId,
    };
    if (context.resumeSessionId !== undefined) request.resumeSessionId = context.resumeSessionId;
    const result = await agent.run(request);
    const session = result.sessionId !== undefined ? { provider: agent.provider, id: result.sessionId } : undefined;
    await conversations.append(
      'design',
      { correlationId, messages: [user(text), assistant(result.text)], ...(session ? { session } : {}) },
      context,
    );
  }

  it('resumes the stored session where the CLI has it, and sends the transcript everywhere else', async () => {
    const conversations = new ConversationStore(new MemoryBlobStore());
    const [here, there] = [mkdtempSync(path.join(dir, 'cwd-')), mkdtempSync(path.join(dir, 'cwd-'))];
    await say(agentOn('a', here), conversations, 'item/plan/1', 'Plan it.');
    // A new agent (each attempt gets one) in the same directory: it resumes the session the store holds.
    await say(agentOn('a', here), conversations, 'item/draft/1', 'Draft it.');
    // Another directory (another attempt, another machine): the session is not there, so no --resume at all.
    await say(agentOn('b', there), conversations, 'item/review/1', 'Review it.');
    // The session was made in this directory, but the CLI lost it: the call is made again with the transcript.
    await say(agentOn('lost', there), conversations, 'item/publish/1', 'Publish it.');

    const transcript = (...turns: string[]) => `Previous conversation:\n${turns.join('\n\n')}`;
    expect(invocations()).toEqual([
      ['-p', 'Plan it.', '--output-format', 'json'],
      ['-p', 'Draft it.', '--output-format', 'json', '--resume', 'a:session-1'],
      [
        '-p',
        `${transcript('user: Plan it.', 'assistant: reply 1', 'user: Draft it.', 'assistant: reply 2')}\n\nReview it.`,
        '--output-format',
        'json',
      ],
      ['-p', 'Publish it.', '--output-format', 'json', '--resume', 'b:session-3'],
      [
        '-p',
        `${transcript('user: Plan it.', 'assistant: reply 1', 'user: Draft it.', 'assistant: reply 2', 'user: Review it.', 'assistant: reply 3')}\n\nPublish it.`,
        '--output-format',
        'json',
      ],
    ]);
    // The conversation carries the latest session, which the next call will be offered.
    expect(await conversations.context('design', { provider: 'claude-code' })).toMatchObject({
      resumeSessionId: 'lost:session-5',
    });
  });

  it('the default factory keeps no sessions per process: without a stored session, no --resume', async () => {
    const previous = process.env.CLAUDE_CODE_BIN;
    process.env.CLAUDE_CODE_BIN = fakeClaude;
    try {
      const context = {
        itemId: `item-${path.basename(dir)}`,
        stage: 'draft',
        attempt: 1,
        input: null,
        config: undefined,
      };
      await claudeCodeAgentFactory(context).run({
        messages: [user('one')],
        conversationId: 'design',
        correlationId: 'item/draft/1',
      });
      await claudeCodeAgentFactory(context).run({
        messages: [user('one'), assistant('reply 1'), user('two')],
        conversationId: 'design',
        correlationId: 'item/draft/2',
      });
      expect(invocations().map((argv) => argv.includes('--resume'))).toEqual([false, false]);
    } finally {
      if (previous === undefined) delete process.env.CLAUDE_CODE_BIN;
      else process.env.CLAUDE_CODE_BIN = previous;
    }
  });
});
