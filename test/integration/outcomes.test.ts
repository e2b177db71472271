/**
 * Honest outcomes (issue 26 §4): a failed work item, TDD tree or loop item is a *Failed* workflow (the Web UI
 * and `ExecutionStatus="Failed"` say so), its failure's message Treadle's summary and its details the result;
 * a fan-out with a failing element still completes its stage; and the commands that report an outcome exit
 * 0 completed, 1 failed, 2 usage error, 3 waiting for a person.
 */
import { ApplicationFailure, WorkflowFailedError } from '@temporalio/client';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from '../../src/kinds/builder';
import type { Json } from '../../src/model/shapes';
import type { WorkItemResult } from '../../src/model/state';
import { eventually, startHarness, type Harness } from '../support/harness';
import { runTreadle } from '../support/cli';
import { leaf, tddRepos, type TddRepos } from '../support/tdd-fixtures';
import { fixedLoopSpec } from '../support/pipelines';

let h: Harness;
let repos: TddRepos;
let dir: string;
const saved = process.env.TREADLE_LOOP_WORKSPACE;

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'outcomes-'));
  process.env.TREADLE_LOOP_WORKSPACE = path.join(dir, 'workspace');
  repos = tddRepos('outcomes-tdd-');
  h = await startHarness();
});
afterAll(async () => {
  await h?.shutdown();
  repos?.remove();
  if (saved === undefined) delete process.env.TREADLE_LOOP_WORKSPACE;
  else process.env.TREADLE_LOOP_WORKSPACE = saved;
});

function write(name: string, content: Json): string {
  const file = path.join(dir, name);
  writeFileSync(file, JSON.stringify(content));
  return file;
}

/** The workflow's Temporal status (`FAILED`, `COMPLETED`, …). */
async function executionStatus(id: string): Promise<string> {
  return (await h.temporal.workflow.getHandle(id).describe()).status.name;
}

/** Whether visibility lists the workflow under `ExecutionStatus="Failed"` (eventually consistent). */
async function listedAsFailed(id: string): Promise<boolean> {
  return eventually(async () => {
    for await (const found of h.temporal.workflow.list({ query: `WorkflowId="${id}" AND ExecutionStatus="Failed"` }))
      if (found.workflowId === id) return true;
    return undefined;
  });
}

/** The failure the raw SDK sees: WorkflowFailedError whose cause is the ApplicationFailure. */
async function rawFailure(id: string): Promise<ApplicationFailure> {
  const error: unknown = await h.temporal.workflow
    .getHandle(id)
    .result()
    .then(
      () => undefined,
      (e: unknown) => e,
    );
  expect(error).toBeInstanceOf(WorkflowFailedError);
  const cause = (error as WorkflowFailedError).cause;
  expect(cause).toBeInstanceOf(ApplicationFailure);
  return cause as ApplicationFailure;
}

test('a failing implementation item is a Failed workflow with its summary and result; result and watch exit 1, a completed one 0', async () => {
  const id = h.id('outcome-failed');
  const spec = pipeline('fails').stage('bad', 'scripted').qualityGate('bad', 'scripted');
  await h.client.start(spec, { script: { bad: [{ verdict: 'rejected', summary: 'never good enough' }] } }, { id });
  const result = await h.client.result(id);
  expect(result).toMatchObject({ status: 'failed', failedStages: ['bad'], error: 'stage failed: bad' });
  expect(await executionStatus(id)).toBe('FAILED');
  expect(await listedAsFailed(id)).toBe(true);
  const failure = await rawFailure(id);
  expect(failure).toMatchObject({ type: 'WorkItemFailed', message: 'stage failed: bad', nonRetryable: true });
  expect(failure.details?.[0]).toEqual(result);

  const printed = await runTreadle(h, ['result', id]);
  expect(printed.code).toBe(1);
  expect((JSON.parse(printed.stdout) as WorkItemResult).status).toBe('failed');
  const watched = await runTreadle(h, ['watch', id]);
  expect(watched).toMatchObject({ code: 1, stdout: expect.stringContaining(`${id} is failed`) });

  const fine = h.id('outcome-completed');
  const okSpec = write('ok.json', { name: 'ok', stages: [{ name: 'a', run: 'scripted' }] });
  const ran = await runTreadle(h, ['run', '--file', okSpec, '--id', fine, '--wait']);
  expect(ran.code).toBe(0);
  expect(await executionStatus(fine)).toBe('COMPLETED');
  expect((await runTreadle(h, ['result', fine])).code).toBe(0);
  expect((await runTreadle(h, ['watch', fine])).code).toBe(0);
}, 90_000);

test('run --wait exits 1 for a failed item; an invalid pipeline started directly fails its workflow with every problem', async () => {
  const id = h.id('outcome-run-failed');
  const file = write('failing.json', {
    name: 'failing',
    stages: [{ name: 'bad', run: 'scripted', gate: 'scripted' }],
  });
  const input = write('failing.input.json', { script: { bad: [{ verdict: 'rejected', summary: 'no' }] } });
  const ran = await runTreadle(h, ['run', '--file', file, '--input', `@${input}`, '--id', id, '--wait']);
  expect(ran.code).toBe(1);
  expect(ran.stdout).toContain('failed');

  const invalid = h.id('outcome-invalid');
  await h.temporal.workflow.start('workItem', {
    taskQueue: h.taskQueue,
    workflowId: invalid,
    args: [{ pipeline: { name: 'x', stages: [{ name: 'a', run: 'scripted', depends_on: ['zzz'] }] }, input: null }],
  });
  const result = await h.client.result(invalid);
  expect(result.status).toBe('failed');
  const failure = await rawFailure(invalid);
  expect(failure.message).toBe(result.error);
  expect(failure.message).toMatch(/^pipeline x is invalid: .*zzz/);
}, 60_000);

test('a fan-out with one failing element completes its stage with 1 failed; the element is a Failed workflow', async () => {
  const id = h.id('outcome-fan-out');
  const element = (subject: string) => ({
    subject,
    script: { classify: [subject === 'broken' ? { error: 'cannot classify' } : { output: { label: subject } }] },
  });
  const spec = {
    name: 'fan-out-outcome',
    stages: [
      { name: 'extract', run: 'scripted' },
      {
        name: 'classify',
        type: 'fan_out',
        depends_on: ['extract'],
        with: { items: 'emails', stage: { run: 'scripted', retry_budget: { max_attempts: 1 } }, max_concurrent: 2 },
      },
    ],
  };
  const emails = ['a', 'broken', 'c'].map(element);
  await h.client.start(spec, { script: { extract: [{ output: { emails } }] } }, { id });
  const result = await h.client.result(id);
  expect(result.status).toBe('completed');
  expect(await executionStatus(id)).toBe('COMPLETED');
  const { stages } = await h.client.getState(id);
  expect(stages.classify!.fanOut).toMatchObject({ total: 3, completed: 2, failed: 1 });
  const brokenId = `${id}.classify.1.1`;
  expect(await executionStatus(brokenId)).toBe('FAILED');
  expect((await h.client.result(brokenId)).status).toBe('failed');
}, 90_000);

test('a TDD tree that does not merge is a Failed workflow; tdd --wait stops at the human step with exit 3 and the review command', async () => {
  const l = leaf('hopeless');
  const repo = await repos.create('hopeless');
  const id = h.id('outcome-tdd');
  const spec = write('hopeless.json', { ...l.spec, tdd: { humanTtlSeconds: 3 } } as unknown as Json);
  const replies = write('hopeless.replies.json', {
    'hopeless.scaffold': [l.initWork],
    'hopeless.tddWriteTests': [l.testsReady],
    'hopeless.impl': [l.stuck],
  } as unknown as Json);
  const waited = await runTreadle(h, ['tdd', spec, '--repo', repo, '--replies', replies, '--id', id, '--wait']);
  expect(waited.code).toBe(3);
  expect(waited.stdout).toContain(`treadle review ${id} impl --approve`);

  const result = await h.client.tddResult(id);
  expect(result).toMatchObject({ status: 'failed', nodePath: 'hopeless' });
  expect(await executionStatus(id)).toBe('FAILED');
  expect(await listedAsFailed(id)).toBe(true);
  const failure = await rawFailure(id);
  expect(failure).toMatchObject({ type: 'TddTreeFailed', message: `hopeless failed: ${result.error}` });
  expect(failure.details?.[0]).toEqual(result);
}, 120_000);

test('loop --wait on a loop that failed and waits for resume says so and exits 3; abandoned, the item is a Failed workflow', async () => {
  const id = h.id('outcome-loop');
  const status = { decision: 'continue', reason: 'r', summary: 's', errors: [] };
  const file = write('loop.json', fixedLoopSpec('loop-outcome', 2));
  const input = write('loop.input.json', {
    agent_replies: { work: [{ output: '# 1\n', progress: '- 1\n', status }, { output: 'x\n' }] },
  });
  const waited = await runTreadle(h, ['loop', file, '--input', `@${input}`, '--id', id, '--wait']);
  expect(waited.code).toBe(3);
  expect(waited.stdout).toMatch(
    new RegExp(
      `loop stage work failed at iteration 2: .*; resume with \`treadle resume ${id} --stage work\` or give up with \`treadle resume ${id} --stage work --abandon\``,
    ),
  );

  await h.client.resumeLoop(id, { action: 'abandon', reason: 'giving up' });
  const result = await h.client.result(id);
  expect(result.status).toBe('failed');
  expect(await executionStatus(id)).toBe('FAILED');
  expect(await listedAsFailed(id)).toBe(true);
  const failure = await rawFailure(id);
  expect(failure.message).toBe(result.error);
  expect(failure.details?.[0]).toEqual(result);
}, 90_000);

test('usage errors exit 2', async () => {
  expect((await runTreadle(h, ['result'])).code).toBe(2);
  expect((await runTreadle(h, ['run', '--no-such-flag'])).code).toBe(2);
  expect((await runTreadle(h, ['--help'])).code).toBe(0);
});
