/**
 * `replies_file` comes from the pipeline spec, so the scripted agent reads it only from the replies folders.
 * Every escape below points at a file that *is* a valid replies map, so reading it would answer its reply
 * and the test would see it. Cases: an absolute path outside (/etc/passwd, the escape target), `..`
 * escapes, a symlinked file and a symlinked folder leading out, a folder and a missing file inside, `..`
 * that stays inside, several folders from TREADLE_REPLIES_DIR, the default folder, and the llm stage
 * failing its attempt with the one-line error through the scripted agent factory.
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ApplicationFailure } from '@temporalio/common';
import { REPLIES_DIR_ENV, ScriptedAgent, repliesFolders, scriptedAgentFactory } from '../../src/agents/scripted';
import type { AgentRequest } from '../../src/agents/types';
import { llmStage } from '../../src/pipelines/llm';
import { stageContext, failureOf } from '../support/contexts';

let root: string;
let folder: string;
let outside: string;
beforeEach(() => {
  root = mkdtempSync(path.join(os.tmpdir(), 'treadle-replies-security-'));
  folder = path.join(root, 'replies');
  mkdirSync(path.join(folder, 'sub'), { recursive: true });
  writeFileSync(path.join(folder, 'replies.json'), JSON.stringify({ draft: ['inside'] }));
  // The escape target: a valid replies file next to the folder.
  mkdirSync(path.join(root, 'secrets'));
  outside = path.join(root, 'secrets', 'replies.json');
  writeFileSync(outside, JSON.stringify({ draft: ['SECRET read from outside'] }));
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

const request: AgentRequest = { messages: [{ role: 'user', content: 'hi' }], correlationId: 'item-1/draft/1' };
const agentReading = (file: string, folders = [folder]) =>
  new ScriptedAgent(
    { itemId: 'item-1', stage: 'draft', attempt: 1, input: null, config: { replies_file: file } },
    { repliesFolders: folders },
  );

function expectRefused(failure: ApplicationFailure, file: string): void {
  expect(failure).toMatchObject({ type: 'InvalidConfig', nonRetryable: true });
  expect(failure.message).toBe(
    `replies_file ${JSON.stringify(file)} is outside the folders replies may be read from (${folder}); put the file there or add its folder to TREADLE_REPLIES_DIR`,
  );
  expect(failure.message).not.toContain('SECRET');
  expect(failure.message).not.toContain('root:');
}

it.each([
  ['an absolute path outside', () => '/etc/passwd'],
  ['an absolute path to a replies file outside', () => outside],
  ['a relative path climbing out', () => '../secrets/replies.json'],
  ['a relative path climbing out through a subfolder', () => 'sub/../../secrets/replies.json'],
  ['a relative path climbing to /etc/passwd', () => '../../../../../../../../etc/passwd'],
  ['the folder itself', () => '.'],
])('refuses %s, reading nothing', async (_name, file) => {
  expectRefused(await failureOf(() => agentReading(file()).run(request)), file());
});

it('refuses a symlink inside the folder that leads outside', async () => {
  symlinkSync(outside, path.join(folder, 'link.json'));
  expectRefused(await failureOf(() => agentReading('link.json').run(request)), 'link.json');
  symlinkSync('/etc/passwd', path.join(folder, 'passwd.json'));
  expectRefused(await failureOf(() => agentReading('passwd.json').run(request)), 'passwd.json');
});

it('refuses a file under a symlinked folder that leads outside', async () => {
  symlinkSync(path.join(root, 'secrets'), path.join(folder, 'elsewhere'));
  expectRefused(await failureOf(() => agentReading('elsewhere/replies.json').run(request)), 'elsewhere/replies.json');
});

it('reads a file inside, also through `..` that stays inside and through a symlink that stays inside', async () => {
  expect((await agentReading('replies.json').run(request)).text).toBe('inside');
  expect((await agentReading('sub/../replies.json').run(request)).text).toBe('inside');
  expect((await agentReading(path.join(folder, 'replies.json')).run(request)).text).toBe('inside');
  symlinkSync(path.join(folder, 'replies.json'), path.join(folder, 'sub', 'alias.json'));
  expect((await agentReading('sub/alias.json').run(request)).text).toBe('inside');
});

it('reports a missing file and a folder inside as unreadable, in one line', async () => {
  expect(await failureOf(() => agentReading('nope.json').run(request))).toMatchObject({
    type: 'InvalidConfig',
    nonRetryable: true,
    message: `cannot read replies_file ${path.join(folder, 'nope.json')}: ENOENT`,
  });
  expect((await failureOf(() => agentReading('sub').run(request))).message).toBe(
    `cannot read replies_file ${path.join(folder, 'sub')}: not a regular file`,
  );
});

it('takes its folders from TREADLE_REPLIES_DIR (several, by path delimiter, relative to the home), else <home>/replies', async () => {
  const home = { TREADLE_HOME: '/srv/home' };
  expect(repliesFolders(home)).toEqual(['/srv/home/replies']);
  expect(repliesFolders({ ...home, [REPLIES_DIR_ENV]: `fixtures${path.delimiter}/data/replies` })).toEqual([
    '/srv/home/fixtures',
    '/data/replies',
  ]);
  // A file in the second folder, by absolute path; relative paths resolve against the first.
  const second = path.join(root, 'secrets');
  expect((await agentReading(outside, [folder, second]).run(request)).text).toBe('SECRET read from outside');
  expect((await agentReading('replies.json', [folder, second]).run(request)).text).toBe('inside');
});

it('fails the llm stage attempt with the one-line error, through the scripted agent factory', async () => {
  const previous = process.env[REPLIES_DIR_ENV];
  process.env[REPLIES_DIR_ENV] = folder;
  try {
    const config = { prompt: 'Write.', replies_file: '/etc/passwd' };
    const base = stageContext({ stage: 'draft', config });
    const agent = scriptedAgentFactory({ itemId: base.itemId, stage: 'draft', attempt: 1, input: null, config });
    const failure = await failureOf(() => llmStage({ ...base, agent: () => agent }));
    expectRefused(failure, '/etc/passwd');
    const allowed = { prompt: 'Write.', replies_file: 'replies.json' };
    const ok = scriptedAgentFactory({ itemId: base.itemId, stage: 'draft', attempt: 1, input: null, config: allowed });
    expect(await llmStage({ ...base, config: allowed, agent: () => ok })).toMatchObject({
      artefact: { text: 'inside' },
    });
  } finally {
    if (previous === undefined) delete process.env[REPLIES_DIR_ENV];
    else process.env[REPLIES_DIR_ENV] = previous;
  }
});
