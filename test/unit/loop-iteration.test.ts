/**
 * The loop iteration activity outside Temporal (the mock activity environment): an iteration retried after
 * an infrastructure failure starts from the files as they were before its first try, so the progress file
 * never gets the same entry twice and the output is the one the iteration began with.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { createLoopActivities } from '../../src/kinds/loop/worker/activities';
import { storeProgress } from '../../src/kinds/loop/worker/iteration';
import { scriptedAgentFactory } from '../../src/agents/scripted';
import { LOOP_ITERATION_ACTIVITY, LOOP_PREPARE_ACTIVITY } from '../../src/model/activity-types';
import type {
  LoopIterationInput,
  LoopIterationResult,
  LoopPrepareInput,
  LoopPrepareResult,
} from '../../src/kinds/loop/spec';
import { MemoryBlobStore } from '../../src/storage/blob-store';

let workspace: string;
beforeEach(() => {
  workspace = mkdtempSync(path.join(os.tmpdir(), 'loop-iteration-'));
});
afterEach(() => rmSync(workspace, { recursive: true, force: true }));

function activities() {
  return createLoopActivities({
    blobs: new MemoryBlobStore(),
    agents: { scripted: scriptedAgentFactory },
    env: { TREADLE_LOOP_WORKSPACE: workspace, TREADLE_AGENT: 'scripted', PATH: process.env.PATH ?? '' },
  }) as unknown as {
    [LOOP_PREPARE_ACTIVITY]: (input: LoopPrepareInput) => Promise<LoopPrepareResult>;
    [LOOP_ITERATION_ACTIVITY]: (input: LoopIterationInput) => Promise<LoopIterationResult>;
  };
}

const env = () =>
  new MockActivityEnvironment(
    { workflowExecution: { workflowId: 'loop-unit', runId: 'run-1' } },
    { logger: new DefaultLogger('ERROR') },
  );
const status = { decision: 'continue', reason: 'ok', summary: 'did it', errors: [] };

test('a retried iteration puts progress.md and the output back as they were before its first try', async () => {
  const acts = activities();
  const replies = {
    work: [
      { output: 'first\n', progress: '## Iteration 1\n- one\n', status },
      { output: 'second\n', progress: '## Iteration 2\n- two\n', status },
    ],
  };
  const prepared: LoopPrepareResult = await env().run(acts[LOOP_PREPARE_ACTIVITY], {
    itemId: 'item-1',
    pipeline: 'p',
    stage: 'work',
    stageIndex: 0,
    config: { stage: { name: 'work', prompt: 'go', termination: { type: 'fixed' } }, max_iterations: 3 },
    input: { agent_replies: replies },
    upstream: {},
    itemStartedAtMs: Date.now(),
  });
  if (!prepared.ok) throw new Error(prepared.problems.join('; '));
  const stageDir = path.join(workspace, '.treadle', 'pipeline-runs', 'item-1', 'stage-00-work');
  const one = await env().run(acts[LOOP_ITERATION_ACTIVITY], {
    planRef: prepared.planRef,
    iteration: 1,
    run: 1,
    remainingSeconds: 60,
  });
  expect(one).toMatchObject({ ok: true, iteration: 1, decision: 'continue' });

  // Iteration 2's first try writes its files, then (say) the worker dies before it reports; Temporal retries it.
  const two = { planRef: prepared.planRef, iteration: 2, run: 2, remainingSeconds: 60 };
  await env().run(acts[LOOP_ITERATION_ACTIVITY], two);
  writeFileSync(path.join(stageDir, 'output.md'), 'half-written by the lost try\n');
  const retried = await env().run(acts[LOOP_ITERATION_ACTIVITY], two);
  expect(retried).toMatchObject({ ok: true, iteration: 2 });
  expect(readFileSync(path.join(stageDir, 'progress.md'), 'utf8')).toBe(
    '## Iteration 1\n- one\n## Iteration 2\n- two\n',
  );
  expect(readFileSync(path.join(stageDir, 'output.md'), 'utf8')).toBe('second\n');
  expect(readFileSync(path.join(stageDir, 'iterations', '002', 'output.md'), 'utf8')).toBe('second\n');
});

test('an iteration whose agent wrote no progress entry gets one from its status summary', async () => {
  const acts = activities();
  const prepared: LoopPrepareResult = await env().run(acts[LOOP_PREPARE_ACTIVITY], {
    itemId: 'item-2',
    pipeline: 'p',
    stage: 'work',
    stageIndex: 3,
    config: { stage: { name: 'work', prompt: 'go', termination: { type: 'fixed' } } },
    input: { agent_replies: { work: [{ output: 'x\n', status: { ...status, summary: 'Wrote x.\nTwo lines.' } }] } },
    upstream: {},
    itemStartedAtMs: Date.now(),
  });
  if (!prepared.ok) throw new Error(prepared.problems.join('; '));
  await env().run(acts[LOOP_ITERATION_ACTIVITY], {
    planRef: prepared.planRef,
    iteration: 1,
    run: 1,
    remainingSeconds: 60,
  });
  expect(
    readFileSync(path.join(workspace, '.treadle', 'pipeline-runs', 'item-2', 'stage-03-work', 'progress.md'), 'utf8'),
  ).toBe('## Iteration 1\n- Wrote x. Two lines.\n');
});

test('an output path that leads out of the workspace is refused before anything is made', async () => {
  const acts = activities();
  const prepared: LoopPrepareResult = await env().run(acts[LOOP_PREPARE_ACTIVITY], {
    itemId: 'item-3',
    pipeline: 'p',
    stage: 'work',
    stageIndex: 0,
    config: {
      stage: { name: 'work', prompt: 'go', termination: { type: 'fixed' }, output: '../../etc/x.md' },
      output: '/tmp/abs.md',
    },
    input: null,
    upstream: {},
    itemStartedAtMs: Date.now(),
  });
  expect(prepared).toEqual({
    ok: false,
    problems: [
      'stage.output: "../../etc/x.md" leads out of the workspace ("..")',
      'output: "/tmp/abs.md" is absolute; give a path relative to the workspace',
    ],
  });
});

test('storeProgress: no file, no ref; a small file whole; a big one keeps its newest part after a line saying so', async () => {
  const blobs = new MemoryBlobStore();
  const file = path.join(workspace, 'progress.md');
  expect(await storeProgress(file, blobs, 'none')).toEqual({});

  writeFileSync(file, '## Iteration 1\n- did it\n');
  const small = await storeProgress(file, blobs, 'small');
  expect((await blobs.get(small.progressRef!)).toString('utf8')).toBe('## Iteration 1\n- did it\n');

  // 10 bytes of "é" (2 bytes each) before the newest entry; the cut at 20 bytes from the end lands inside an "é" and skips its half.
  writeFileSync(file, `${'é'.repeat(5)}## Iteration 2\n`);
  const big = await storeProgress(file, blobs, 'big', 20);
  expect((await blobs.get(big.progressRef!)).toString('utf8')).toBe(
    '… progress.md cut: its first 6 bytes are left out\néé## Iteration 2\n',
  );
});
