/**
 * The TDD node activity under Temporal's retries: an activity that runs again with the same input (a worker
 * crash after the commit, a lost completion) finds its commit instead of making a second one, and a
 * Merger run again merges once. And `claude-code` acting in the node's worktree: it runs there, what it
 * writes is committed, and the read-only tests it changed are put back with feedback. Real git, real test
 * runs, the real activity function in Temporal's mock activity environment.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { scriptedAgentFactory } from '../../src/agents/scripted';
import { ClaudeCodeAgent } from '../../src/agents/claude-code';
import { TddSettingsSchema } from '../../src/kinds/tdd/spec';
import type { TddNodeCallInput } from '../../src/kinds/tdd/shapes';
import { MemoryBlobStore } from '../../src/storage/blob-store';
import { gitIn, nodeActivities, storeRootContext, tddRepos, type TddRepos } from '../support/tdd-fixtures';

// The activities are given the folder in their own environment: the process's is left alone.
let repos: TddRepos;
beforeAll(() => {
  repos = tddRepos('tdd-activity-', { setEnv: false });
});
afterAll(() => repos.remove());

test('a node call run twice with the same input commits once; a merger run twice merges once', async () => {
  const repo = await repos.create('calc');
  const blobs = new MemoryBlobStore();
  const { call, worktree } = nodeActivities({
    root: repos.root,
    blobs,
    agents: { scripted: scriptedAgentFactory },
    workflowId: 'tdd-calc',
  });
  const node = await worktree(repo, 'tdd/calc');
  const target = await worktree(repo, 'treadle/calc');

  const spec = {
    id: 'calc',
    description: 'add two numbers',
    acceptanceCriteria: [{ id: 'A1', text: 'add(1, 2) is 3' }],
    targetPath: 'src/add.js',
    testPath: 'test/add.test.js',
  };
  const contextRef = await storeRootContext(blobs, spec);
  const test = `'use strict';\nconst test = require('node:test');\nconst assert = require('node:assert/strict');\ntest('A1', () => assert.equal(require('../src/add').add(1, 2), 3));\n`;
  const replies = {
    'calc.scaffold': [
      {
        exit: 'InitWork',
        scaffoldCommit: '',
        interfaceFile: 'src/add.js',
        contractSuite: 'test/add.test.js',
        testPlan: [],
        files: {
          'src/add.js': "module.exports = { add: () => { throw new Error('todo'); } };\n",
          'test/add.test.js': test,
        },
      },
    ],
    'calc.merger': [{ exit: 'MergeComplete', mergeCommit: '', author: 'calc', impactLevel: 'Additive', changes: [] }],
  };
  const repliesRef = (await blobs.put(Buffer.from(JSON.stringify(replies)), 'application/json', 'replies')).ref;
  const base = {
    treeId: 'tdd-calc',
    nodePath: 'calc',
    specId: 'calc',
    contextRef,
    repo,
    worktree: node.worktree,
    branch: 'tdd/calc',
    settings: TddSettingsSchema.parse({}),
    readOnly: [],
    repliesRef,
    conversationId: 'tdd:calc',
    refs: {},
  };
  const scaffold: TddNodeCallInput = { ...base, node: 'scaffold', callIndex: 0 };
  const first = await call(scaffold);
  const commits = gitIn(repo, 'rev-list', '--count', 'tdd/calc');
  // Temporal retries the same input after, say, a crash before the completion reached the server.
  const again = await call(scaffold);
  expect(first.exit).toBe('InitWork');
  expect(again.commit).toBe(first.commit);
  expect(gitIn(repo, 'rev-list', '--count', 'tdd/calc')).toBe(commits);
  expect(gitIn(repo, 'log', '-1', '--format=%B', 'tdd/calc')).toContain('Treadle-Op: tdd-calc/scaffold/0/0');

  // Make the tests pass, then merge twice with the same input: one squash merge on the target branch.
  execFileSync(
    'sh',
    [
      '-c',
      "printf 'module.exports = { add: (a, b) => a + b };\\n' > src/add.js && git add -A && git -c user.name=t -c user.email=t@t commit -qm impl",
    ],
    { cwd: node.worktree },
  );
  const merger: TddNodeCallInput = {
    ...base,
    node: 'merger',
    callIndex: 0,
    refs: { scaffold: first.exitRef },
    merge: { parentNodeId: 'treadle/calc', parentBranch: 'treadle/calc', parentWorktree: target.worktree },
  };
  const approval = (
    await blobs.put(
      Buffer.from(
        JSON.stringify({ signOff: 'ok', coverageReport: { criteriaWithTests: [['A1', 'A1']], criteriaMissing: [] } }),
      ),
      'application/json',
      'approval',
    )
  ).ref;
  merger.refs.approval = approval;
  const merged = await call(merger);
  const mergedAgain = await call(merger);
  expect(merged.exit).toBe('MergeComplete');
  expect(mergedAgain.envelope.mergeCommit).toBe(merged.envelope.mergeCommit);
  const targetLog = gitIn(repo, 'log', '--format=%s', 'treadle/calc').split('\n');
  expect(targetLog.filter((s) => s === 'feat(calc): implement')).toHaveLength(1);
  expect(gitIn(repo, 'rev-parse', 'treadle/calc')).toBe(merged.envelope.mergeCommit);
});

test('claude-code runs in the node’s worktree: its files are committed, read-only tests it changed are put back', async () => {
  const fakeClaude = path.join(__dirname, '..', 'fixtures', 'fake-claude', 'claude');
  chmodSync(fakeClaude, 0o755);
  const record = path.join(repos.root, 'claude-invocations.jsonl');
  const repo = await repos.create('calc-claude', { 'README.md': '# calc\n' });
  const blobs = new MemoryBlobStore();
  // What the fake CLI writes in its working directory on the next call.
  let writes: Record<string, string> = {};
  const claudeCode = () =>
    new ClaudeCodeAgent({
      command: fakeClaude,
      env: {
        FAKE_CLAUDE_RECORD: record,
        FAKE_CLAUDE_MODE: 'write-files',
        FAKE_CLAUDE_WRITES: JSON.stringify(writes),
        FAKE_CLAUDE_RESULT: JSON.stringify({ exit: 'TestsPassed', commitHash: '', iterations: 1, passedTests: ['A1'] }),
      },
    });
  const { call, worktree } = nodeActivities({
    root: repos.root,
    blobs,
    agents: { scripted: scriptedAgentFactory, 'claude-code': claudeCode },
    workflowId: 'tdd-calc-claude',
    // The warning about the rigged tests is expected: keep it out of the test output.
    quiet: true,
  });
  const node = await worktree(repo, 'tdd/calc');

  const spec = {
    id: 'calc',
    description: 'add two numbers',
    acceptanceCriteria: [{ id: 'A1', text: 'add(1, 2) is 3' }],
    targetPath: 'src/add.js',
    testPath: 'test/add.test.js',
  };
  const contextRef = await storeRootContext(blobs, spec);
  const tests = `'use strict';\nconst test = require('node:test');\nconst assert = require('node:assert/strict');\ntest('A1', () => assert.equal(require('../src/add').add(1, 2), 3));\n`;
  const contract = `'use strict';\nconst test = require('node:test');\nconst assert = require('node:assert/strict');\ntest('exports add', () => assert.equal(typeof require('../../src/add').add, 'function'));\n`;
  const replies = {
    'calc.scaffold': [
      {
        exit: 'InitWork',
        scaffoldCommit: '',
        interfaceFile: 'src/add.js',
        contractSuite: 'test/contract/add.test.js',
        testPlan: [],
        files: {
          'src/add.js': "module.exports = { add: () => { throw new Error('todo'); } };\n",
          'test/contract/add.test.js': contract,
        },
      },
    ],
    'calc.tddWriteTests': [
      {
        exit: 'TestsReady',
        testsCommit: '',
        testFiles: ['test/add.test.js'],
        pendingCriteria: ['A1'],
        files: { 'test/add.test.js': tests },
      },
    ],
  };
  const base = {
    treeId: 'tdd-calc-claude',
    nodePath: 'calc',
    specId: 'calc',
    contextRef,
    repo,
    worktree: node.worktree,
    branch: 'tdd/calc',
    settings: TddSettingsSchema.parse({}),
    readOnly: [],
    repliesRef: (await blobs.put(Buffer.from(JSON.stringify(replies)), 'application/json', 'replies')).ref,
    conversationId: 'tdd:calc-claude',
    refs: {},
  };
  const scaffold = await call({ ...base, node: 'scaffold', callIndex: 0 });
  const written = await call({ ...base, node: 'tddWriteTests', callIndex: 0, refs: { scaffold: scaffold.exitRef } });
  expect(written.exit).toBe('TestsReady');
  const impl: TddNodeCallInput = {
    ...base,
    node: 'impl',
    callIndex: 0,
    attemptCount: 1,
    settings: TddSettingsSchema.parse({ agent: 'claude-code', maxInvalidReplies: 1 }),
    refs: { scaffold: scaffold.exitRef, testsReady: written.exitRef },
  };

  // Impl rewrites the tests to pass: they are put back and the reply is refused with the reason, twice.
  writes = {
    'src/add.js': 'module.exports = { add: () => 3 };\n',
    'test/add.test.js': "require('node:test')('A1', () => {});\n",
  };
  const rigged = await call(impl);
  expect(rigged).toMatchObject({ exit: 'NoDecision', invalidReplies: 2, agentCalls: 2 });
  expect(rigged.envelope.message).toMatch(
    /You changed files that are read-only for you \(test\/add\.test\.js\); they were put back/,
  );
  // Reported for the node's events and the audit, once per reply.
  expect(rigged.refusals).toEqual({
    count: 2,
    texts: [
      'read-only files changed and put back: test/add.test.js',
      'read-only files changed and put back: test/add.test.js',
    ],
  });
  expect(readFileSync(path.join(node.worktree, 'test', 'add.test.js'), 'utf8')).toBe(tests);
  expect(gitIn(node.worktree, 'status', '--porcelain')).toBe('M src/add.js');

  // An honest implementation, written by the CLI in the worktree, is committed and green.
  writes = { 'src/add.js': 'module.exports = { add: (a, b) => a + b };\n' };
  const passed = await call({ ...impl, callIndex: 1 });
  expect(passed.exit).toBe('TestsPassed');
  expect(passed.testRun?.passed).toBe(true);
  expect(gitIn(repo, 'show', 'tdd/calc:src/add.js')).toBe('module.exports = { add: (a, b) => a + b };');
  const cwds = readFileSync(record, 'utf8')
    .trim()
    .split('\n')
    .map((line) => (JSON.parse(line) as { cwd: string }).cwd);
  expect(cwds).toEqual([node.worktree, node.worktree, node.worktree]);
  // The prompt told it to work in the worktree.
  const argv = readFileSync(record, 'utf8')
    .trim()
    .split('\n')
    .map((line) => (JSON.parse(line) as { argv: string[] }).argv);
  expect(argv[0]!.join(' ')).toContain('You run in your worktree');
});
