/**
 * A TDD leaf driven by the `anthropic` provider on the local fake Messages API, end to end on the real server
 * and a real git repository: the agent writes its code and tests with the worktree tools (no `files` in its
 * replies), runs the tests with `run_tests`, is refused when Impl tries to change a test, and the node still
 * reaches MergeComplete. Every round of every tool loop is in the call log, and nothing leaves the worktree.
 * Then one node call in the mock activity environment: a tool loop that runs out of rounds is fed back like a
 * malformed reply (its files kept), and a test run longer than the nudge timeout does not trigger the nudge.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { AnthropicAgent } from '../../src/agents/anthropic';
import { scriptedAgentFactory } from '../../src/agents/scripted';
import { DEFAULT_MAX_TOOL_ROUNDS } from '../../src/agents/types';
import { NUDGE_REMINDER, TddSettingsSchema } from '../../src/kinds/tdd/spec';
import type { TddNodeCallInput } from '../../src/kinds/tdd/shapes';
import type { CallRecord } from '../../src/model/shapes';
import { MemoryBlobStore } from '../../src/storage/blob-store';
import { SqliteCallLog } from '../../src/storage/sqlite-call-log';
import { startHarness, type Harness } from '../support/harness';
import { gitIn, nodeActivities, storeRootContext, tddRepos, testFile, type TddRepos } from '../support/tdd-fixtures';
import {
  startFakeAnthropic,
  toolResultsOf,
  type FakeAnthropic,
  type FakeReply,
  type RecordedRequest,
} from '../support/fake-anthropic';

let fake: FakeAnthropic;
let h: Harness;
let repos: TddRepos;
let callLog: SqliteCallLog;

beforeAll(async () => {
  repos = tddRepos('tdd-anthropic-tools-');
  fake = await startFakeAnthropic();
  callLog = new SqliteCallLog(path.join(repos.root, 'calls.sqlite'));
  h = await startHarness({
    agents: {
      anthropic: () => new AnthropicAgent({ apiKey: 'sk-ant-test-key', baseURL: fake.baseURL }, {}),
      scripted: scriptedAgentFactory,
    },
    callLog,
  });
});
afterAll(async () => {
  await h?.shutdown();
  await fake?.close();
  await callLog?.close();
  repos?.remove();
});

const STUB = "module.exports = { add: () => { throw new Error('todo'); } };\n";
const IMPLEMENTATION = 'module.exports = { add: (a, b) => a + b };\n';
const CONTRACT = testFile("test('exports add', () => assert.equal(typeof require('../../src/add').add, 'function'));");
const TESTS = testFile("test('A1: add(2, 3) is 5', () => assert.equal(require('../src/add').add(2, 3), 5));");

/** Each node's replies, round by round: tool calls, then the decision as plain JSON text. */
const SCRIPT: Record<string, FakeReply[]> = {
  scaffold: [
    {
      kind: 'tools',
      text: 'Scaffolding the interface and the contract suite.',
      uses: [
        { name: 'write_file', input: { path: 'src/add.js', content: STUB } },
        { name: 'write_file', input: { path: 'test/contract/add.test.js', content: CONTRACT } },
      ],
    },
    {
      kind: 'text',
      text: JSON.stringify({
        exit: 'InitWork',
        scaffoldCommit: '',
        interfaceFile: 'src/add.js',
        contractSuite: 'test/contract/add.test.js',
        testPlan: [],
      }),
    },
  ],
  tddWriteTests: [
    { kind: 'tools', uses: [{ name: 'write_file', input: { path: 'test/add.test.js', content: TESTS } }] },
    { kind: 'tools', uses: [{ name: 'run_tests', input: { files: ['test/add.test.js'] } }] },
    {
      kind: 'text',
      text:
        '```json\n' +
        JSON.stringify({
          exit: 'TestsReady',
          testsCommit: '',
          testFiles: ['test/add.test.js'],
          pendingCriteria: ['A1'],
        }) +
        '\n```',
    },
  ],
  impl: [
    {
      kind: 'tools',
      uses: [
        { name: 'list_files', input: {} },
        // Impl may not touch the tests: refused, and the model is told so.
        { name: 'write_file', input: { path: 'test/add.test.js', content: testFile("test('rigged', () => {});") } },
        // Nor anything outside the worktree.
        { name: 'write_file', input: { path: '../../escaped.js', content: 'x' } },
        { name: 'write_file', input: { path: 'src/add.js', content: IMPLEMENTATION } },
      ],
    },
    { kind: 'tools', uses: [{ name: 'run_tests', input: {} }] },
    {
      kind: 'text',
      text: JSON.stringify({ exit: 'TestsPassed', commitHash: '', iterations: 1, passedTests: ['A1: add(2, 3) is 5'] }),
    },
  ],
  tddReviewImpl: [
    {
      kind: 'text',
      text: JSON.stringify({
        exit: 'Approved',
        signOff: 'adds',
        coverageReport: { criteriaWithTests: [['A1', 'A1: add(2, 3) is 5']], criteriaMissing: [] },
      }),
    },
  ],
  merger: [
    {
      kind: 'text',
      text: JSON.stringify({
        exit: 'MergeComplete',
        mergeCommit: '',
        author: 'calc',
        impactLevel: 'Additive',
        changes: [{ symbol: 'add', changeType: 'NewExport', reason: 'the spec' }],
      }),
    },
  ],
};

/** The one-criterion leaf both tree tests run, on the anthropic provider. */
function calcSpec(settings: Record<string, unknown> = {}) {
  return {
    id: 'calc',
    description: 'add two numbers',
    acceptanceCriteria: [{ id: 'A1', text: 'add(a, b) is their sum' }],
    targetPath: 'src/add.js',
    testPath: 'test/add.test.js',
    tdd: { agent: 'anthropic', model: 'claude-haiku-4-5', ...settings },
  };
}

/** The exit that only a node's own reply instructions list, naming the node. */
const NODE_MARKERS: [string, string][] = [
  ['scaffold', '{ "exit": "InitWork";'],
  ['tddWriteTests', '{ "exit": "TestsReady";'],
  ['impl', '{ "exit": "TestsPassed";'],
  ['tddReviewImpl', '{ "exit": "Approved";'],
  ['merger', '{ "exit": "MergeComplete";'],
];

type Message = { role: string; content: unknown };

/** The node a request is for and the round of its tool loop: the last prompt, and the assistant turns since. */
function whereIs(request: RecordedRequest): { node: string; round: number; prompt: string } {
  const messages = (request.body as { messages: Message[] }).messages;
  let at = messages.length - 1;
  while (
    at >= 0 &&
    !(
      messages[at]!.role === 'user' &&
      typeof messages[at]!.content === 'string' &&
      (messages[at]!.content as string).includes('## How to answer')
    )
  )
    at--;
  if (at < 0) throw new Error('no node prompt in the request');
  const prompt = messages[at]!.content as string;
  const node = NODE_MARKERS.find(([, marker]) => prompt.includes(marker))?.[0];
  if (!node) throw new Error('the prompt names no known node');
  return { node, round: messages.slice(at + 1).filter((m) => m.role === 'assistant').length, prompt };
}

test('the anthropic agent writes code and tests with the worktree tools, and the leaf reaches MergeComplete', async () => {
  fake.setDefault({
    kind: 'computed',
    reply: (request) => {
      const { node, round } = whereIs(request);
      const reply = SCRIPT[node]?.[round];
      if (!reply) throw new Error(`no scripted reply for ${node} round ${round}`);
      return reply;
    },
  });
  const repo = await repos.create('calc');
  const id = h.id('tdd-tools');
  const spec = calcSpec();
  await h.client.startTdd(spec, { repo, id });

  const result = await h.client.tddResult(id);
  expect(result).toMatchObject({ status: 'merged', nodePath: 'calc' });

  // The files the agent wrote with its tools are in git: red tests first, then the implementation, merged.
  expect(gitIn(repo, 'log', '-1', '--format=%s', 'treadle/calc')).toBe('feat(calc): implement');
  expect(gitIn(repo, 'show', 'treadle/calc:src/add.js')).toBe(IMPLEMENTATION.trim());
  expect(gitIn(repo, 'show', 'treadle/calc:test/add.test.js')).toBe(TESTS.trim());
  const checkout = path.join(repos.root, 'checkout');
  gitIn(repo, 'worktree', 'add', '--detach', checkout, 'treadle/calc');
  expect(execFileSync('node', ['--test'], { cwd: checkout, encoding: 'utf8' })).toMatch(/# fail 0/);
  expect(existsSync(path.join(repos.root, 'escaped.js'))).toBe(false);
  expect(existsSync(path.join(repo, '.git', 'escaped.js'))).toBe(false);

  const events = await h.client.events(id);
  const exits = events.filter((e) => e.type === 'NodeExit').map((e) => [e.stage, e.details?.exit, e.details?.calls]);
  // One call record per round of each tool loop.
  expect(exits).toEqual([
    ['scaffold', 'InitWork', 2],
    ['tddWriteTests', 'TestsReady', 3],
    ['impl', 'TestsPassed', 3],
    ['tddReviewImpl', 'Approved', 1],
    ['merger', 'MergeComplete', 1],
  ]);
  expect(String(events.find((e) => e.type === 'NodeExit' && e.stage === 'tddWriteTests')?.details?.tests)).toMatch(
    /0 passed, 1 failed/,
  );

  // What the model was told: the tools in its prompt, the red run, the refusals, the green run.
  const rounds = fake.requests.map((r) => ({ ...whereIs(r), results: toolResultsOf(r) }));
  expect(rounds.map((r) => `${r.node}/${r.round}`)).toEqual([
    'scaffold/0',
    'scaffold/1',
    'tddWriteTests/0',
    'tddWriteTests/1',
    'tddWriteTests/2',
    'impl/0',
    'impl/1',
    'impl/2',
    'tddReviewImpl/0',
    'merger/0',
  ]);
  expect(rounds[0]!.prompt).toContain('`read_file`, `write_file`');
  const resultOf = (node: string, round: number) => rounds.find((r) => r.node === node && r.round === round)!.results;
  expect(resultOf('tddWriteTests', 2)).toEqual([
    expect.objectContaining({
      content: expect.stringMatching(/^FAILED: 0 passed, 1 failed \(node --test test\/add\.test\.js, exit 1/),
    }),
  ]);
  const implTools = resultOf('impl', 1);
  expect(implTools.map((r) => r.is_error ?? false)).toEqual([false, true, true, false]);
  expect(implTools[0]!.content).toBe('README.md\nsrc/add.js\ntest/add.test.js\ntest/contract/add.test.js');
  expect(implTools[1]!.content).toBe('test/add.test.js is read-only');
  expect(implTools[2]!.content).toMatch(/leads outside the worktree/);
  expect(resultOf('impl', 2)).toEqual([
    expect.objectContaining({ content: expect.stringMatching(/^PASSED: 2 passed, 0 failed/) }),
  ]);
  // The user sees the refusals too: in the node's events and in the audit, naming the paths.
  const toolRefusals = [
    'write_file: test/add.test.js is read-only',
    'write_file: refused path "../../escaped.js": it leads outside the worktree',
  ];
  expect(events.filter((e) => e.type === 'WorkRefused').map((e) => [e.stage, e.details?.refusals])).toEqual([
    ['impl', toolRefusals],
  ]);
  expect((await h.client.audit(id)).filter((e) => e.message.includes(' refused: ')).map((e) => e.message)).toEqual(
    toolRefusals.map((r) => `calc impl refused: ${r}`),
  );
  // The tools were offered on every call of the agent nodes, never with a forced choice.
  for (const request of fake.requests) {
    const body = request.body as { tools?: { name: string }[]; tool_choice?: unknown };
    expect(body.tools?.map((t) => t.name)).toEqual([
      'read_file',
      'write_file',
      'list_files',
      'delete_file',
      'run_tests',
    ]);
    expect(body.tool_choice).toBeUndefined();
  }

  // Every model call is in the cross-run call log, once.
  const logged = (await callLog.query()).filter((row) => row.workflowId === id);
  expect(logged).toHaveLength(fake.requests.length);
  expect(logged.filter((row) => row.stage === 'calc.impl')).toHaveLength(3);
  expect(logged.every((row) => row.provider === 'anthropic' && row.status === 'success')).toBe(true);
}, 120_000);

test('a tool loop out of rounds is fed back and its files kept; a long test run does not trigger the nudge', async () => {
  const repo = await repos.create('slow');
  const blobs = new MemoryBlobStore();
  const activities = nodeActivities({
    root: repos.root,
    blobs,
    agents: { anthropic: () => new AnthropicAgent({ apiKey: 'sk-ant-test-key', baseURL: fake.baseURL }, {}) },
    workflowId: 'tdd-slow',
    quiet: true,
  });
  const node = await activities.worktree(repo, 'tdd/slow');
  const spec = {
    id: 'slow',
    description: 'a slow contract',
    acceptanceCriteria: [{ id: 'S1', text: 'slow() is 1' }],
    targetPath: 'src/slow.js',
    testPath: 'test/slow.test.js',
  };
  const contextRef = await storeRootContext(blobs, spec);
  // The contract suite takes 1.5 s, longer than the 1 s nudge timeout.
  const slowContract = testFile(
    "test('exports slow', async () => { await new Promise((r) => setTimeout(r, 1500)); assert.equal(typeof require('../../src/slow').slow, 'function'); });",
  );
  const initWork = JSON.stringify({
    exit: 'InitWork',
    scaffoldCommit: '',
    interfaceFile: 'src/slow.js',
    contractSuite: 'test/contract/slow.test.js',
    testPlan: [],
  });

  fake.reset();
  fake.setDefault({
    kind: 'computed',
    reply: (request) => {
      const messages = (request.body as { messages: Message[] }).messages;
      const fedBack = messages.some(
        (m) =>
          m.role === 'user' && typeof m.content === 'string' && m.content.startsWith('Your reply could not be used'),
      );
      // The first reply only writes the interface, then keeps listing files until its rounds are used up.
      if (!fedBack)
        return messages.length === 1
          ? {
              kind: 'tools',
              uses: [
                {
                  name: 'write_file',
                  input: { path: 'src/slow.js', content: 'module.exports = { slow: () => 1 };\n' },
                },
              ],
            }
          : { kind: 'tools', uses: [{ name: 'list_files', input: {} }] };
      const round =
        messages.length -
        1 -
        messages.findIndex(
          (m) => typeof m.content === 'string' && m.content.startsWith('Your reply could not be used'),
        );
      if (round === 0)
        return {
          kind: 'tools',
          uses: [{ name: 'write_file', input: { path: 'test/contract/slow.test.js', content: slowContract } }],
        };
      if (round === 2)
        return { kind: 'tools', uses: [{ name: 'run_tests', input: { files: ['test/contract/slow.test.js'] } }] };
      return { kind: 'text', text: initWork };
    },
  });

  const scaffold: TddNodeCallInput = {
    node: 'scaffold',
    treeId: 'tdd-slow',
    nodePath: 'slow',
    specId: 'slow',
    contextRef,
    repo,
    worktree: node.worktree,
    branch: 'tdd/slow',
    settings: TddSettingsSchema.parse({ agent: 'anthropic', model: 'claude-haiku-4-5', nudgeTimeoutSeconds: 1 }),
    readOnly: [],
    callIndex: 0,
    conversationId: 'tdd:slow',
    refs: {},
  };
  const result = await activities.call(scaffold);

  expect(result).toMatchObject({ exit: 'InitWork', invalidReplies: 1, nudged: false, agentCalls: 2 });
  // Every round of both tool loops is in the call log: the whole first loop, then write, run_tests, answer.
  // Too many to travel inline: the result carries their totals and the records are in the blob store.
  expect(result.calls).toMatchObject({
    usage: { calls: DEFAULT_MAX_TOOL_ROUNDS + 3, errors: 0 },
    stored: { count: DEFAULT_MAX_TOOL_ROUNDS + 3 },
  });
  expect(result.calls!.records).toBeUndefined();
  const stored = JSON.parse((await blobs.get(result.calls!.stored!.ref)).toString('utf8')) as CallRecord[];
  expect(stored.map((c) => c.status)).toEqual(Array.from({ length: DEFAULT_MAX_TOOL_ROUNDS + 3 }, () => 'success'));
  expect(stored.reduce((sum, c) => sum + c.inputTokens, 0)).toBe(result.calls!.usage.inputTokens);
  expect(fake.requests).toHaveLength(DEFAULT_MAX_TOOL_ROUNDS + 3);
  const feedback = (fake.requests[DEFAULT_MAX_TOOL_ROUNDS]!.body as { messages: Message[] }).messages.at(-1)!
    .content as string;
  expect(feedback).toContain(
    `still calling tools when your reply reached its limit of model calls (the model was still using tools after ${DEFAULT_MAX_TOOL_ROUNDS} model calls`,
  );
  // The first loop's file was kept and committed with the second's.
  expect(readFileSync(path.join(node.worktree, 'src', 'slow.js'), 'utf8')).toBe(
    'module.exports = { slow: () => 1 };\n',
  );
  expect(gitIn(repo, 'show', '--stat', '--format=%s', 'tdd/slow')).toMatch(
    /src\/slow\.js[\s\S]*test\/contract\/slow\.test\.js/,
  );
  expect(toolResultsOf(fake.requests[fake.requests.length - 1]!)).toEqual([
    expect.objectContaining({ content: expect.stringMatching(/^PASSED: 1 passed/) }),
  ]);
}, 60_000);

test('a node that gives no decision within the nudge timeout is re-prompted once with the seed’s reminder, and goes on', async () => {
  fake.reset();
  let slowed = false;
  fake.setDefault({
    kind: 'computed',
    reply: (request) => {
      const { node, round } = whereIs(request);
      const messages = (request.body as { messages: Message[] }).messages;
      // Scaffold's first call takes longer than the 1 s nudge timeout; the reminder's call answers at once.
      if (node === 'scaffold' && round === 0 && !slowed) {
        slowed = true;
        return { kind: 'slow', delayMs: 10_000, then: SCRIPT.scaffold![0]! };
      }
      const reminded = messages.at(-1)?.content === NUDGE_REMINDER;
      const reply = SCRIPT[node]?.[reminded ? 0 : round];
      if (!reply) throw new Error(`no scripted reply for ${node} round ${round}`);
      return reply;
    },
  });
  const repo = await repos.create('nudged');
  const id = h.id('tdd-nudge');
  const spec = calcSpec({ nudgeTimeoutSeconds: 1 });
  await h.client.startTdd(spec, { repo, id });
  expect(await h.client.tddResult(id)).toMatchObject({ status: 'merged' });

  const scaffoldExit = (await h.client.events(id)).find((e) => e.type === 'NodeExit' && e.stage === 'scaffold');
  expect(scaffoldExit?.details).toMatchObject({ exit: 'InitWork', nudged: true });
  // The second request is the reminder, word for word, after the unanswered prompt; only one reminder was sent.
  const second = (fake.requests[1]!.body as { messages: Message[] }).messages;
  expect(second.at(-1)).toEqual({ role: 'user', content: NUDGE_REMINDER });
  expect(second.at(-2)?.content).toEqual(expect.stringContaining('## How to answer'));
  expect(
    fake.requests.filter((r) => (r.body as { messages: Message[] }).messages.at(-1)?.content === NUDGE_REMINDER),
  ).toHaveLength(1);
  // The slow call is in the call log as cut off by the timeout, next to the calls that answered.
  const logged = (await callLog.query()).filter((row) => row.workflowId === id && row.stage === 'calc.scaffold');
  expect(logged.map((row) => row.status)).toEqual(['timeout', 'success', 'success']);
}, 120_000);
