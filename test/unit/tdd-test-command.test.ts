/**
 * The spec's test command, run for real with `node --test` on small test files. Cases: the worker's
 * allow-list (default, configured, invalid) and which argv it admits; a passing and a failing run with
 * their tests parsed from TAP (subtests, skips, escaped names) and the one-line summary; a hanging test
 * killed at the timeout with the whole process group (a child it spawned too); cancellation through an
 * AbortSignal; the environment allow-list (a secret and NODE_OPTIONS of the worker stay out, explicit
 * variables get in); output cut to head and tail while every test is still parsed; a command that cannot
 * start.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  DEFAULT_TEST_COMMANDS,
  TEST_COMMANDS_ENV,
  allowedTestCommands,
  checkTestCommand,
  runTestCommand,
} from '../../src/activities/test-command';
import { isAlive } from '../support/processes';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'treadle-tdd-tests-'));
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

function testFile(name: string, body: string): string {
  writeFileSync(
    path.join(dir, name),
    `const test = require('node:test');\nconst assert = require('node:assert');\n${body}\n`,
  );
  return name;
}

/** Gone, or a zombie waiting for a parent that will never ask (it no longer runs either way). */
function stopped(pid: number): boolean {
  if (!isAlive(pid)) return true;
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.startsWith('Z') ?? false;
  } catch {
    return true;
  }
}

async function waitUntil(check: () => boolean, ms = 3_000): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (check()) return true;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return check();
}

/** A test that spawns a long-lived child (writing its pid to `pidFile`) and then never ends. */
function hangingTestFile(name: string, pidFile: string): string {
  return testFile(
    name,
    `const { spawn } = require('node:child_process');
const fs = require('node:fs');
test('hangs', async () => {
  const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
  fs.writeFileSync(${JSON.stringify(pidFile)}, String(child.pid));
  await new Promise(() => setInterval(() => {}, 1000));
});`,
  );
}

describe('the allow-list', () => {
  test('defaults to node --test, reads TREADLE_TDD_TEST_COMMANDS, and names it when it is broken', () => {
    expect(DEFAULT_TEST_COMMANDS).toEqual([['node', '--test']]);
    expect(allowedTestCommands({})).toEqual([['node', '--test']]);
    expect(allowedTestCommands({ [TEST_COMMANDS_ENV]: '[["node","--test"],["npm","test"]]' })).toEqual([
      ['node', '--test'],
      ['npm', 'test'],
    ]);
    expect(() => allowedTestCommands({ [TEST_COMMANDS_ENV]: 'node --test' })).toThrow(
      /^TREADLE_TDD_TEST_COMMANDS is not valid JSON/,
    );
    expect(() => allowedTestCommands({ [TEST_COMMANDS_ENV]: '["node","--test"]' })).toThrow(
      /^TREADLE_TDD_TEST_COMMANDS must be a JSON array of non-empty argv arrays/,
    );
    expect(() => allowedTestCommands({ [TEST_COMMANDS_ENV]: '[[]]' })).toThrow(/TREADLE_TDD_TEST_COMMANDS/);
  });

  test('admits an allowed argv, alone or followed by relative file paths', () => {
    const allowed = [
      ['node', '--test'],
      ['npm', 'test'],
    ];
    expect(checkTestCommand(['node', '--test'], allowed)).toBeNull();
    expect(checkTestCommand(['npm', 'test'], allowed)).toBeNull();
    expect(checkTestCommand(['node', '--test', 'test/a.test.js', 'src/b.test.mjs'], allowed)).toBeNull();
  });

  test.each([
    [['node', '-e', 'require("child_process").exec("rm -rf ~")'], /starts with none of the allowed commands/],
    [['node'], /starts with none of the allowed commands/],
    [['bash', '-c', 'node --test'], /starts with none of the allowed commands/],
    [['npm', 'test'], /starts with none of the allowed commands/],
    [['node', '--test', '--require=/tmp/evil.js'], /"--require=\/tmp\/evil.js" is not a file path/],
    [['node', '--test', '../other-repo/x.test.js'], /must not contain "\.\."/],
    [['node', '--test', 'test/../../x.test.js'], /must not contain "\.\."/],
    [['node', '--test', '/etc/passwd'], /must be a relative path/],
    [['node', '--test', 'C:\\x.js'], /must be a relative path/],
    [[], /non-empty argv array/],
  ])('refuses %j', (command, reason) => {
    const message = checkTestCommand(command, [['node', '--test']]);
    expect(message).toMatch(reason);
    expect(message).toContain('Allowed (TREADLE_TDD_TEST_COMMANDS): ["node","--test"]');
  });
});

describe('runTestCommand', () => {
  test('a passing run', async () => {
    const file = testFile(
      'pass.test.js',
      `test('adds', () => assert.strictEqual(1 + 1, 2));\ntest('concatenates', () => assert.strictEqual('a' + 'b', 'ab'));`,
    );
    const run = await runTestCommand({ cwd: dir, command: ['node', '--test', file], timeoutMs: 30_000 });
    expect(run).toMatchObject({ passed: true, exitCode: 0, signal: null, timedOut: false, outputTruncated: false });
    expect(run.tests).toEqual([
      { name: 'adds', ok: true },
      { name: 'concatenates', ok: true },
    ]);
    expect(run.summary).toMatch(/^2 passed, 0 failed \(node --test pass\.test\.js, exit 0, \d+ ms\)$/);
    expect(run.output).toContain('# pass 2');
    expect(run.durationMs).toBeGreaterThan(0);
  });

  test('a failing run, with subtests, skips and escaped names parsed', async () => {
    const file = testFile(
      'fail.test.js',
      `test('adds', () => assert.strictEqual(1 + 1, 2));
test('subtracts', () => assert.strictEqual(3 - 1, 1));
test('later', { skip: true }, () => {});
test.describe('parser', () => {
  test.it('reads # comments', () => {});
  test.it('rejects junk', () => { throw new Error('not yet'); });
});
test('outer', async (t) => {
  await t.test('inner passes', () => {});
  throw new Error('outer itself fails');
});`,
    );
    const run = await runTestCommand({ cwd: dir, command: ['node', '--test', file], timeoutMs: 30_000 });
    expect(run).toMatchObject({ passed: false, exitCode: 1, timedOut: false });
    // Leaves, plus "outer" (failing, though none of its subtests did); not the "parser" suite.
    expect(run.tests).toEqual([
      { name: 'adds', ok: true },
      { name: 'subtracts', ok: false },
      { name: 'later', ok: true },
      { name: 'reads # comments', ok: true },
      { name: 'rejects junk', ok: false },
      { name: 'inner passes', ok: true },
      { name: 'outer', ok: false },
    ]);
    expect(run.summary).toMatch(/^3 passed, 3 failed, 1 skipped \(node --test fail\.test\.js, exit 1, \d+ ms\)$/);
    expect(run.output).toContain('not ok 2 - subtracts');
  });

  test('a hanging test is killed at the timeout, with everything it started', async () => {
    const pidFile = path.join(dir, 'grandchild.pid');
    const file = hangingTestFile('hang.test.js', pidFile);
    const run = await runTestCommand({ cwd: dir, command: ['node', '--test', file], timeoutMs: 1_500 });
    expect(run).toMatchObject({ passed: false, timedOut: true, exitCode: null, signal: 'SIGKILL' });
    expect(run.summary).toBe('timed out after 1.5 s (node --test hang.test.js; no test results before)');
    expect(run.durationMs).toBeGreaterThanOrEqual(1_400);
    expect(run.durationMs).toBeLessThan(10_000);
    expect(existsSync(pidFile)).toBe(true);
    const grandchild = Number(readFileSync(pidFile, 'utf8'));
    expect(grandchild).toBeGreaterThan(0);
    expect(await waitUntil(() => stopped(grandchild))).toBe(true);
  });

  test('an abort kills the process group and rejects with AbortError', async () => {
    const pidFile = path.join(dir, 'aborted-grandchild.pid');
    const file = hangingTestFile('abort.test.js', pidFile);
    const controller = new AbortController();
    const running = runTestCommand({
      cwd: dir,
      command: ['node', '--test', file],
      timeoutMs: 60_000,
      signal: controller.signal,
    });
    expect(await waitUntil(() => existsSync(pidFile), 10_000)).toBe(true);
    const started = Date.now();
    controller.abort(new Error('activity cancelled'));
    await expect(running).rejects.toMatchObject({ name: 'AbortError', message: 'the test run was cancelled' });
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(await waitUntil(() => stopped(Number(readFileSync(pidFile, 'utf8'))))).toBe(true);
    await expect(
      runTestCommand({ cwd: dir, command: ['node', '--test', file], timeoutMs: 1_000, signal: controller.signal }),
    ).rejects.toMatchObject({ name: 'AbortError' });
  });

  test('the command sees PATH, HOME, LANG, TMPDIR and what is passed, not the worker’s other variables', async () => {
    const file = testFile(
      'env.test.js',
      `test('prints its environment', () => {
  console.log('SECRET_X=' + process.env.SECRET_X);
  console.log('VISIBLE=' + process.env.VISIBLE);
  console.log('HAS_PATH=' + (process.env.PATH !== undefined));
  console.log('KEYS=' + Object.keys(process.env).filter((k) => !k.startsWith('NODE_TEST')).sort().join(','));
});`,
    );
    const saved = { SECRET_X: process.env.SECRET_X, NODE_OPTIONS: process.env.NODE_OPTIONS };
    process.env.SECRET_X = 'hunter2-do-not-leak';
    // Were NODE_OPTIONS passed on, node would fail to start.
    process.env.NODE_OPTIONS = '--require /nonexistent/treadle-preload.js';
    try {
      const run = await runTestCommand({
        cwd: dir,
        command: ['node', '--test', file],
        timeoutMs: 30_000,
        env: { VISIBLE: 'yes' },
      });
      expect(run.passed).toBe(true);
      expect(run.output).not.toContain('hunter2');
      expect(run.output).toContain('SECRET_X=undefined');
      expect(run.output).toContain('VISIBLE=yes');
      expect(run.output).toContain('HAS_PATH=true');
      const keys = /KEYS=([^\n]*)/.exec(run.output)?.[1]?.split(',') ?? [];
      expect(keys.filter((k) => !['PATH', 'HOME', 'LANG', 'TMPDIR', 'VISIBLE'].includes(k))).toEqual([]);
    } finally {
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });

  test('long output keeps its head and tail, and every test is still parsed', async () => {
    const file = testFile(
      'noisy.test.js',
      `for (let i = 0; i < 200; i++) {
  test('case ' + i, () => { console.log('x'.repeat(500)); assert.ok(i !== 150); });
}`,
    );
    const run = await runTestCommand({
      cwd: dir,
      command: ['node', '--test', file],
      timeoutMs: 30_000,
      maxOutputBytes: 4_096,
    });
    expect(run.outputTruncated).toBe(true);
    expect(Buffer.byteLength(run.output)).toBeLessThan(4_096 + 100);
    expect(run.output).toMatch(/\n\[… \d+ bytes of output omitted …\]\n/);
    expect(run.output.startsWith('TAP version 13')).toBe(true);
    expect(run.output).toContain('# fail 1');
    expect(run.tests).toHaveLength(200);
    expect(run.tests.filter((t) => !t.ok)).toEqual([{ name: 'case 150', ok: false }]);
    expect(run.summary).toMatch(/^199 passed, 1 failed \(/);
  });

  test('a command that cannot start throws', async () => {
    await expect(
      runTestCommand({ cwd: dir, command: ['treadle-no-such-test-runner'], timeoutMs: 5_000 }),
    ).rejects.toThrow(/could not start.*ENOENT/);
    await expect(
      runTestCommand({ cwd: path.join(dir, 'missing'), command: ['node', '--test'], timeoutMs: 5_000 }),
    ).rejects.toThrow(/could not start/);
  });
});
