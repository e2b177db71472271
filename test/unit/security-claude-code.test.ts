/**
 * The claude-code provider runs the CLI neither in the worker's working directory nor with the worker's
 * environment. Against the fake CLI (test/fixtures/fake-claude/claude), which records its cwd and whole
 * environment. Cases:
 * - environment: only allow-listed variables reach the CLI (secrets in the worker's environment do not), the
 *   list grows with TREADLE_CLAUDE_ENV, and the agent's own `env` comes on top;
 * - working directory: the factory's agents run in `<TREADLE_WORK_DIR>/<item>/<stage>/attempt-<n>`, shared by
 *   the attempt's calls, a new one per attempt, removed with what the CLI left there (kept with
 *   TREADLE_KEEP_WORK_DIRS=1); hostile item ids and stage names stay inside the root; a call never removes
 *   the directory under another call still running; a root others can write to is refused; an agent with
 *   no attempt gets a fresh directory per call, and an explicit `cwd` is used as it is.
 */
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  realpathSync,
  rmSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import {
  CLAUDE_CODE_ENV_ALLOW_LIST,
  ClaudeCodeAgent,
  attemptWorkDir,
  claudeCodeAgentFactory,
  cliEnvironment,
} from '../../src/agents/claude-code';
import type { AgentRequest } from '../../src/agents/types';

const FAKE_CLAUDE = path.join(__dirname, '..', 'fixtures', 'fake-claude', 'claude');

interface Invocation {
  argv: string[];
  cwd: string;
  env: Record<string, string>;
}

let dir: string;
let root: string;
let record: string;
const saved = new Map<string, string | undefined>();

/** Sets a variable of this (the worker's) environment for one test. */
function setEnv(name: string, value: string): void {
  if (!saved.has(name)) saved.set(name, process.env[name]);
  process.env[name] = value;
}

beforeAll(() => chmodSync(FAKE_CLAUDE, 0o755));
beforeEach(() => {
  dir = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'treadle-claude-security-')));
  root = path.join(dir, 'work');
  record = path.join(dir, 'invocations.jsonl');
  // What a worker might hold that the CLI must not see.
  setEnv('TREADLE_TEST_DATABASE_PASSWORD', 'hunter2');
  setEnv('AWS_SECRET_ACCESS_KEY', 'aws-secret');
  setEnv('GITHUB_TOKEN', 'ghp_secret');
  setEnv('ANTHROPIC_API_KEY', 'sk-ant-test');
  setEnv('CLAUDE_CODE_USE_BEDROCK', '0');
  setEnv('LC_ALL', 'C.UTF-8');
});
afterEach(() => {
  for (const [name, value] of saved) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
  saved.clear();
  rmSync(dir, { recursive: true, force: true });
});

const request: AgentRequest = { messages: [{ role: 'user', content: 'Say hello.' }], correlationId: 'item-1/draft/1' };

function invocations(): Invocation[] {
  if (!existsSync(record)) return [];
  return readFileSync(record, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Invocation);
}

/** An agent on the fake CLI, recording to this test's file; `options` as for {@link ClaudeCodeAgent}. */
function agent(
  options: ConstructorParameters<typeof ClaudeCodeAgent>[0] = {},
  mode: Record<string, string> = {},
): ClaudeCodeAgent {
  return new ClaudeCodeAgent({
    command: FAKE_CLAUDE,
    workRoot: root,
    ...options,
    env: { FAKE_CLAUDE_RECORD: record, ...mode, ...options.env },
  });
}

/** Runs the factory's agent as a worker would: settings from the environment only. */
async function runFactoryAgent(
  ctx: { itemId: string; stage: string; attempt: number },
  mode: Record<string, string> = {},
): Promise<Invocation> {
  setEnv('CLAUDE_CODE_BIN', FAKE_CLAUDE);
  setEnv('TREADLE_WORK_DIR', root);
  // The fake CLI's own settings reach it through the allow-list, as any extra variable would.
  setEnv('TREADLE_CLAUDE_ENV', 'FAKE_CLAUDE_*');
  setEnv('FAKE_CLAUDE_RECORD', record);
  for (const [name, value] of Object.entries(mode)) setEnv(name, value);
  const before = invocations().length;
  await claudeCodeAgentFactory({ ...ctx, input: null, config: undefined }).run(request);
  const made = invocations().slice(before);
  expect(made).toHaveLength(1);
  return made[0]!;
}

async function failureOf(promise: Promise<unknown>): Promise<ApplicationFailure> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof ApplicationFailure) return error;
    throw error;
  }
  throw new Error('expected an ApplicationFailure');
}

/** True when a name is on the allow-list (exactly, or by a `PREFIX_*` pattern). */
const allowed = (list: readonly string[], name: string): boolean =>
  list.some((entry) => (entry.endsWith('*') ? name.startsWith(entry.slice(0, -1)) : entry === name));

describe('environment', () => {
  it('passes only allow-listed variables of the worker, plus the agent’s own', async () => {
    await agent().run(request);
    const { env } = invocations()[0]!;
    expect(env).toMatchObject({
      PATH: process.env.PATH,
      ANTHROPIC_API_KEY: 'sk-ant-test',
      CLAUDE_CODE_USE_BEDROCK: '0',
      LC_ALL: 'C.UTF-8',
      FAKE_CLAUDE_RECORD: record,
    });
    if (process.env.HOME !== undefined) expect(env.HOME).toBe(process.env.HOME);
    expect(env).not.toHaveProperty('TREADLE_TEST_DATABASE_PASSWORD');
    expect(env).not.toHaveProperty('AWS_SECRET_ACCESS_KEY');
    expect(env).not.toHaveProperty('GITHUB_TOKEN');
    expect(JSON.stringify(env)).not.toMatch(/hunter2|aws-secret|ghp_secret/);
    // Nothing else slipped through: every variable is allow-listed or the agent's own.
    expect(
      Object.keys(env).filter((name) => !allowed(CLAUDE_CODE_ENV_ALLOW_LIST, name) && name !== 'FAKE_CLAUDE_RECORD'),
    ).toEqual([]);
  });

  it('adds the names in TREADLE_CLAUDE_ENV (exact and PREFIX_*) to the list', async () => {
    setEnv('TREADLE_CLAUDE_ENV', ' AWS_* , TREADLE_TEST_DATABASE_PASSWORD');
    await agent().run(request);
    expect(invocations()[0]!.env).toMatchObject({
      AWS_SECRET_ACCESS_KEY: 'aws-secret',
      TREADLE_TEST_DATABASE_PASSWORD: 'hunter2',
    });
    expect(invocations()[0]!.env).not.toHaveProperty('GITHUB_TOKEN');
  });

  it('takes an explicit allow-list, and the agent’s env over the allowed values', async () => {
    await agent({ envAllowList: ['PATH', 'GITHUB_TOKEN'], env: { GITHUB_TOKEN: 'scoped-token', EXTRA: 'x' } }).run(
      request,
    );
    const { env } = invocations()[0]!;
    expect(Object.keys(env).sort()).toEqual(['EXTRA', 'FAKE_CLAUDE_RECORD', 'GITHUB_TOKEN', 'PATH']);
    expect(env.GITHUB_TOKEN).toBe('scoped-token');
  });

  it('cliEnvironment matches names exactly and PREFIX_* by prefix', () => {
    const from = {
      ANTHROPIC_API_KEY: 'k',
      ANTHROPIC: 'no',
      MY_ANTHROPIC_KEY: 'no',
      PATH: '/bin',
      PATHEXT: 'no',
      LC_ALL: 'C',
    };
    expect(cliEnvironment(from, ['PATH', 'ANTHROPIC_*', 'LC_*'], { PATH: '/usr/bin' })).toEqual({
      ANTHROPIC_API_KEY: 'k',
      PATH: '/usr/bin',
      LC_ALL: 'C',
    });
  });
});

describe('working directory', () => {
  const ctx = { itemId: 'item-1', stage: 'draft', attempt: 1 };

  it('runs each attempt in its own directory under TREADLE_WORK_DIR, never the worker’s, and removes it with what the CLI left', async () => {
    const first = await runFactoryAgent(ctx, { FAKE_CLAUDE_MODE: 'write' });
    expect(first.cwd).toBe(path.join(root, 'item-1', 'draft', 'attempt-1'));
    expect(first.cwd).not.toBe(process.cwd());
    expect(existsSync(first.cwd)).toBe(false);
    // No empty item or stage folders are left behind either.
    expect(readdirSync(root)).toEqual([]);

    const gate = await runFactoryAgent(ctx);
    expect(gate.cwd).toBe(first.cwd);
    const second = await runFactoryAgent({ ...ctx, attempt: 2 });
    expect(second.cwd).toBe(path.join(root, 'item-1', 'draft', 'attempt-2'));
  });

  it('keeps the directories with TREADLE_KEEP_WORK_DIRS=1', async () => {
    setEnv('TREADLE_KEEP_WORK_DIRS', '1');
    const { cwd } = await runFactoryAgent(ctx, { FAKE_CLAUDE_MODE: 'write' });
    expect(readFileSync(path.join(cwd, 'left-behind.txt'), 'utf8')).toBe('scratch');
  });

  it('keeps hostile item ids and stage names inside the root, each in a folder of its own', async () => {
    const hostile = [
      { itemId: '../../../../etc', stage: 'draft', attempt: 1 },
      { itemId: '/etc/passwd', stage: '..', attempt: 1 },
      { itemId: '.', stage: 'a/../../b', attempt: 1 },
      { itemId: 'x'.repeat(500), stage: 'draft', attempt: 1 },
    ];
    setEnv('TREADLE_KEEP_WORK_DIRS', '1');
    const dirs: string[] = [];
    for (const attempt of hostile) {
      const { cwd } = await runFactoryAgent(attempt);
      expect(cwd).toBe(attemptWorkDir(root, attempt));
      const relative = path.relative(root, cwd);
      expect(relative.split(path.sep)).toHaveLength(3);
      expect(relative.startsWith('..') || path.isAbsolute(relative)).toBe(false);
      dirs.push(cwd);
    }
    expect(new Set(dirs).size).toBe(hostile.length);
    // Names that are already safe stay readable; two names never share a folder.
    expect(attemptWorkDir(root, { itemId: 'a_b', stage: 's', attempt: 1 })).not.toBe(
      attemptWorkDir(root, { itemId: 'a/b', stage: 's', attempt: 1 }),
    );
  });

  it('does not remove the directory under a call of the same attempt that is still running', async () => {
    const slow = agent({ attempt: ctx }, { FAKE_CLAUDE_MODE: 'sleep', FAKE_CLAUDE_SLEEP_MS: '700' }).run(request);
    await new Promise((resolve) => setTimeout(resolve, 200));
    await agent({ attempt: ctx }).run(request);
    const attemptDir = attemptWorkDir(root, ctx);
    expect(existsSync(attemptDir)).toBe(true);
    await slow;
    expect(existsSync(attemptDir)).toBe(false);
    expect(invocations().map((i) => i.cwd)).toEqual([attemptDir, attemptDir]);
  });

  it('refuses a root that others can write to, without starting the CLI', async () => {
    mkdirSync(root);
    chmodSync(root, 0o777);
    const failure = await failureOf(agent({ attempt: ctx }).run(request));
    expect(failure).toMatchObject({ type: 'InvalidAgentConfig', nonRetryable: true });
    expect(failure.message).toBe(
      `cannot create a working directory for claude: ${root} must be a directory of this user that no one else can write to (set TREADLE_WORK_DIR to another one)`,
    );
    expect(invocations()).toEqual([]);
  });

  it('gives an agent without an attempt a fresh directory per call, and uses an explicit cwd as it is', async () => {
    const loose = agent();
    await loose.run(request);
    await loose.run(request);
    const [one, two] = invocations();
    expect(path.dirname(one!.cwd)).toBe(root);
    expect(path.basename(one!.cwd)).toMatch(/^call-/);
    expect(two!.cwd).not.toBe(one!.cwd);
    expect(existsSync(one!.cwd) || existsSync(two!.cwd)).toBe(false);

    const mine = path.join(dir, 'mine');
    mkdirSync(mine);
    await agent({ cwd: mine }, { FAKE_CLAUDE_MODE: 'write' }).run(request);
    expect(invocations()[2]!.cwd).toBe(mine);
    expect(existsSync(path.join(mine, 'left-behind.txt'))).toBe(true);
  });

  it('runs in the request’s workdir (a TDD node’s worktree) instead of the attempt’s directory, and leaves it in place', async () => {
    const worktree = path.join(dir, 'worktree');
    mkdirSync(worktree);
    await agent({ attempt: ctx }, { FAKE_CLAUDE_MODE: 'write' }).run({ ...request, workdir: worktree });
    expect(invocations().map((i) => i.cwd)).toEqual([worktree]);
    expect(readFileSync(path.join(worktree, 'left-behind.txt'), 'utf8')).toBe('scratch');
    // No attempt directory was made for it.
    expect(existsSync(attemptWorkDir(root, ctx))).toBe(false);

    const failure = await failureOf(agent({ attempt: ctx }).run({ ...request, workdir: path.join(dir, 'missing') }));
    expect(failure).toMatchObject({
      type: 'InvalidAgentConfig',
      nonRetryable: true,
      message: `the working directory for claude does not exist: ${path.join(dir, 'missing')}`,
    });
  });
});
