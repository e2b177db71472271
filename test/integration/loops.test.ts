/**
 * Loop stages (seed 004) on the real server: the seed's files in the seed's layout, each termination type,
 * guardrails, fail fast and resume, malformed status files, input selection, continue-as-new with the
 * counts kept, and a fresh agent per iteration. The scripted agent's replies write the output, the progress
 * entry and `status.json` (`{ output, progress, status }`), as a real agent would with its tools.
 */
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Json } from '../../src/model/shapes';
import type { LoopArtefact } from '../../src/kinds/loop/spec';
import { eventually, startHarness, type Harness } from '../support/harness';
import { runTreadle } from '../support/cli';

const EXAMPLE = path.join(__dirname, '..', '..', 'examples', 'loops', 'full-ideation');

let h: Harness;
let workspace: string;
const saved = { workspace: process.env.TREADLE_LOOP_WORKSPACE, commands: process.env.TREADLE_LOOP_COMMANDS };

beforeAll(async () => {
  workspace = mkdtempSync(path.join(os.tmpdir(), 'loops-'));
  process.env.TREADLE_LOOP_WORKSPACE = workspace;
  process.env.TREADLE_LOOP_COMMANDS = JSON.stringify([
    ['test', '-s'],
    ['sh', 'queue.sh'],
  ]);
  h = await startHarness();
});
afterAll(async () => {
  await h?.shutdown();
  for (const [key, value] of [
    ['TREADLE_LOOP_WORKSPACE', saved.workspace],
    ['TREADLE_LOOP_COMMANDS', saved.commands],
  ] as const) {
    if (value === undefined) delete process.env[key];
    else process.env[key] = value;
  }
  rmSync(workspace, { recursive: true, force: true });
});

type Reply = { output?: string; progress?: string; status?: Json | string; crash?: string };
const status = (
  decision: 'continue' | 'stop' | 'error',
  reason = `decided ${decision}`,
  extra: Record<string, Json> = {},
): Json => ({
  decision,
  reason,
  summary: `summary: ${reason}`,
  work: { items_completed: [], files_touched: [] },
  errors: [],
  ...extra,
});
const reply = (n: number, decision: 'continue' | 'stop' | 'error' = 'continue'): Reply => ({
  output: `# Output ${n}\n`,
  progress: `## Iteration ${n}\n- did step ${n}\n`,
  status: status(decision, `iteration ${n}`),
});

function loopStage(name: string, stage: Record<string, Json>, extra: Record<string, Json> = {}): Json {
  return {
    name,
    run: 'loop',
    with: {
      stage: { name, prompt: 'Read ${CTX}. Append to ${PROGRESS}. Write ${OUTPUT}. Report in ${STATUS}.', ...stage },
      ...extra,
    },
  };
}

function sessionDir(session: string): string {
  return path.join(workspace, '.treadle', 'pipeline-runs', session);
}

async function artefactOf(id: string, stage: string): Promise<LoopArtefact> {
  const result = await h.client.result(id);
  expect(result.status).toBe('completed');
  return (await h.client.readArtefact(result.artefacts[stage])) as unknown as LoopArtefact;
}

test('fixed: exactly N iterations whatever the agents decide; the seed’s files in the seed’s layout', async () => {
  const id = h.id('loop-fixed');
  const spec = {
    name: 'fixed-loop',
    stages: [loopStage('ideas', { termination: { type: 'fixed' } }, { max_iterations: 3 })],
  };
  await h.client.start(spec, { agent_replies: { ideas: [reply(1), reply(2, 'stop'), reply(3)] } }, { id });
  const artefact = await artefactOf(id, 'ideas');
  expect(artefact).toMatchObject({
    iterations: 3,
    stoppedBy: { by: 'termination', reason: '3 iterations done (fixed)' },
    decisions: { continue: 2, stop: 1, error: 0 },
    stageDir: 'stage-00-ideas',
  });

  const stageDir = path.join(sessionDir(id), 'stage-00-ideas');
  expect(readdirSync(path.join(stageDir, 'iterations')).sort()).toEqual(['001', '002', '003']);
  for (const n of [1, 2, 3]) {
    const dir = path.join(stageDir, 'iterations', String(n).padStart(3, '0'));
    expect(readFileSync(path.join(dir, 'output.md'), 'utf8')).toBe(`# Output ${n}\n`);
    expect(JSON.parse(readFileSync(path.join(dir, 'status.json'), 'utf8'))).toMatchObject({ reason: `iteration ${n}` });
  }
  // context.json, exactly the seed's fields.
  const context = JSON.parse(readFileSync(path.join(stageDir, 'iterations', '003', 'context.json'), 'utf8'));
  const rel = `.treadle/pipeline-runs/${id}`;
  expect(context).toEqual({
    session: id,
    pipeline: 'fixed-loop',
    stage: { id: 'ideas', index: 0, template: 'ideas' },
    iteration: 3,
    paths: {
      session_dir: rel,
      stage_dir: `${rel}/stage-00-ideas`,
      progress: `${rel}/stage-00-ideas/progress.md`,
      output: `${rel}/stage-00-ideas/output.md`,
      status: `${rel}/stage-00-ideas/iterations/003/status.json`,
    },
    inputs: { from_stage: {}, from_previous_iterations: ['iterations/001/output.md', 'iterations/002/output.md'] },
    limits: { max_iterations: 3, remaining_seconds: expect.any(Number) },
  });
  expect(readFileSync(path.join(stageDir, 'progress.md'), 'utf8')).toBe(
    '## Iteration 1\n- did step 1\n## Iteration 2\n- did step 2\n## Iteration 3\n- did step 3\n',
  );
  expect(readFileSync(path.join(stageDir, 'output.md'), 'utf8')).toBe('# Output 3\n');
  expect(JSON.parse(readFileSync(path.join(sessionDir(id), 'state.json'), 'utf8'))).toMatchObject({
    session: id,
    status: 'completed',
    stage: 'ideas',
    iteration: 3,
  });
  // The final output: its text for templates and gates, and its reference.
  expect(artefact.text).toBe('# Output 3\n');
  expect(artefact.outputRef).toMatch(/^sha256:/);
  expect((await h.blobs.get(artefact.outputRef!)).toString()).toBe('# Output 3\n');
}, 60_000);

test('judgment: consensus consecutive stop decisions from min_iterations on; any other decision resets the count', async () => {
  const id = h.id('loop-judgment');
  const spec = {
    name: 'judged',
    stages: [
      loopStage(
        'refine',
        { termination: { type: 'judgment', min_iterations: 3, consensus: 2 } },
        { max_iterations: 10 },
      ),
    ],
  };
  // stop at 1 and 2 (before min_iterations), continue at 3 resets, stop at 4, 5 → done at 5.
  const decisions = ['stop', 'stop', 'continue', 'stop', 'stop', 'stop'] as const;
  await h.client.start(spec, { agent_replies: { refine: decisions.map((d, i) => reply(i + 1, d)) } }, { id });
  const artefact = await artefactOf(id, 'refine');
  expect(artefact).toMatchObject({
    iterations: 5,
    stoppedBy: { by: 'termination', reason: '2 consecutive stop decisions (iteration 5)' },
  });
  const [loop] = await h.client.loops(id);
  expect(loop!.state).toMatchObject({
    status: 'completed',
    iteration: 5,
    consecutiveStops: 2,
    decisions: { stop: 4, continue: 1, error: 0 },
  });
  expect(loop!.state.recent.map((r) => r.decision)).toEqual(['stop', 'stop', 'continue', 'stop', 'stop']);
}, 60_000);

test('queue (command): iterates while the queue has items, stops when it is empty; a failing provider means continue', async () => {
  const id = h.id('loop-queue');
  // The queue is a file of lines; each iteration's agent takes one (the scripted reply's `files` rewrite it).
  writeFileSync(
    path.join(workspace, 'queue.sh'),
    'if [ -f broken ]; then rm broken; exit 3; fi\ncat queue.txt 2>/dev/null\n',
  );
  writeFileSync(path.join(workspace, 'queue.txt'), 'a\nb\n');
  writeFileSync(path.join(workspace, 'broken'), '');
  const take = (left: string, n: number): Json => ({
    files: { 'queue.txt': left },
    output: `done ${n}\n`,
    status: status('continue', `took item ${n}`),
  });
  const spec = {
    name: 'queued',
    stages: [
      loopStage(
        'work',
        { termination: { type: 'queue', queue: { provider: 'command', command: 'sh queue.sh' } } },
        { max_iterations: 10 },
      ),
    ],
  };
  await h.client.start(spec, { agent_replies: { work: [take('b\n', 1), take('', 2), take('', 3)] } }, { id });
  const artefact = await artefactOf(id, 'work');
  // Iteration 1 ran although the provider failed (continue), 2 took the last item, then the queue was empty.
  expect(artefact).toMatchObject({
    iterations: 2,
    stoppedBy: { by: 'termination', reason: 'the queue is empty after 2 iterations' },
  });

  // The last allowed iteration takes the last item: the queue, asked once more, is why the loop ends.
  const atLimit = h.id('loop-queue-limit');
  writeFileSync(path.join(workspace, 'queue.txt'), 'a\nb\n');
  await h.client.start(
    {
      name: 'queued',
      stages: [
        loopStage(
          'work',
          { termination: { type: 'queue', queue: { provider: 'command', command: 'sh queue.sh' } } },
          { max_iterations: 2 },
        ),
      ],
    },
    { agent_replies: { work: [take('b\n', 1), take('', 2)] } },
    { id: atLimit },
  );
  expect(await artefactOf(atLimit, 'work')).toMatchObject({
    iterations: 2,
    stoppedBy: { by: 'termination', reason: 'the queue is empty after 2 iterations' },
  });
}, 60_000);

/** How many iterations the signal-fed loop may run (see the test). */
const SIGNALLED_ITERATIONS = 200;

test('queue (signal): waits for the first report, iterates while items are reported, stops on zero', async () => {
  const id = h.id('loop-signal');
  const spec = {
    name: 'signalled',
    stages: [
      loopStage(
        'work',
        { termination: { type: 'queue', queue: { provider: 'signal' } } },
        { max_iterations: SIGNALLED_ITERATIONS },
      ),
    ],
  };
  // The loop iterates as fast as the server lets it while the last report says 2 (scripted iterations take a few
  // workflow tasks each): room and a reply for many more iterations than can run before the test's report of zero
  // arrives, so it stops on that report, not on max_iterations or on running out of replies (seen on the
  // PostgreSQL-backed server, where ten iterations ran before the report came).
  const replies = Array.from({ length: SIGNALLED_ITERATIONS }, (_, i) => reply(i + 1));
  await h.client.start(spec, { agent_replies: { work: replies } }, { id });
  const loop = await eventually(async () => (await h.client.loops(id)).find((l) => l.state.status === 'waiting_queue'));
  expect(loop.state.iteration).toBe(0);
  await h.client.reportLoopQueue(loop.workflowId, 2);
  await eventually(async () => ((await h.client.getLoopState(loop.workflowId)).iteration >= 2 ? true : undefined));
  await h.client.reportLoopQueue(loop.workflowId, 0);
  const artefact = await artefactOf(id, 'work');
  expect(artefact.stoppedBy).toEqual({
    by: 'termination',
    reason: expect.stringMatching(/^the queue is empty after \d+ iterations$/),
  });
  expect(artefact.iterations).toBeGreaterThanOrEqual(2);
  expect(artefact.iterations).toBeLessThan(SIGNALLED_ITERATIONS);
}, 60_000);

test('guardrails: max_iterations stops a judgment loop without consensus, max_runtime_seconds stops a slow one; both complete and say so', async () => {
  const id = h.id('loop-guard');
  const spec = {
    name: 'guarded',
    stages: [
      loopStage('endless', { termination: { type: 'judgment', consensus: 2 } }, { max_iterations: 4 }),
      {
        ...(loopStage(
          'slow',
          { termination: { type: 'fixed' }, delay: 1, guardrails: { max_runtime_seconds: 2 } },
          { max_iterations: 50 },
        ) as Record<string, Json>),
        depends_on: ['endless'],
      },
    ],
  };
  await h.client.start(spec, { agent_replies: { endless: [reply(1, 'continue')], slow: [reply(1)] } }, { id });
  const endless = await artefactOf(id, 'endless');
  expect(endless).toMatchObject({
    iterations: 4,
    stoppedBy: {
      by: 'guardrail',
      reason: 'max_iterations (4) reached without 2 consecutive stop decisions after 4 iterations',
    },
  });
  const slow = await artefactOf(id, 'slow');
  expect(slow.stoppedBy).toEqual({
    by: 'guardrail',
    reason: expect.stringMatching(/^max_runtime_seconds ran out after \d+ iterations?$/),
  });
  expect(slow.iterations).toBeLessThan(5);
  const loops = await h.client.loops(id);
  expect(loops.map((l) => l.state.status)).toEqual(['stopped', 'stopped']);
}, 60_000);

test('a resume with a note (treadle resume --note): the rerun iteration, and only it, reads it in context.json', async () => {
  const id = h.id('loop-note');
  const spec = {
    name: 'noted',
    stages: [loopStage('work', { termination: { type: 'fixed' } }, { max_iterations: 3 })],
  };
  await h.client.start(spec, { agent_replies: { work: [reply(1), { crash: 'exit 1' }, reply(2), reply(3)] } }, { id });
  await eventually(async () => (await h.client.loops(id)).find((l) => l.state.status === 'failed'));
  const long = await runTreadle(h, ['resume', id, '--note', 'x'.repeat(4097)]);
  expect(long.code).not.toBe(0);
  expect(long.stderr).toContain('the note is 4097 characters, over the 4096 a resume note may have; shorten it');
  const both = await runTreadle(h, ['resume', id, '--abandon', '--note', 'n']);
  expect(both).toMatchObject({ code: 2, stderr: 'treadle: --note goes with a resume; an abandon takes --reason\n' });
  const resumed = await runTreadle(h, ['resume', id, '--note', 'Use the cached data.', '--by', 'ann']);
  expect(resumed.code).toBe(0);
  expect((await artefactOf(id, 'work')).iterations).toBe(3);
  const context = (n: string) =>
    JSON.parse(readFileSync(path.join(sessionDir(id), 'stage-00-work', 'iterations', n, 'context.json'), 'utf8'));
  expect(context('002').resume).toEqual({ note: 'Use the cached data.', by: 'ann' });
  // Only the iteration the resume reruns reads it.
  expect(context('003').resume).toBeUndefined();
  const loop = (await h.client.loops(id))[0]!;
  expect(loop.state).toMatchObject({ status: 'completed' });
}, 60_000);

test('fail fast, resume smart: an agent crash stops the loop with the seed’s failure state; resume reruns that iteration, keeping history and progress', async () => {
  const id = h.id('loop-crash');
  const spec = {
    name: 'crashy',
    stages: [loopStage('work', { termination: { type: 'fixed' } }, { max_iterations: 4 })],
  };
  await h.client.start(
    spec,
    {
      agent_replies: { work: [reply(1), reply(2), { crash: 'Claude process exited with code 1' }, reply(3), reply(4)] },
    },
    { id },
  );
  const failed = await eventually(async () => (await h.client.loops(id)).find((l) => l.state.status === 'failed'));
  expect(failed.state.failure).toEqual({
    status: 'failed',
    iteration: 3,
    error: { type: 'agent_crash', message: 'Claude process exited with code 1', timestamp: expect.any(String) },
    resume_from: 3,
    progressRef: expect.stringMatching(/^sha256:/),
  });
  // What a reviewer reads, by reference: progress.md as the failed iteration left it, stored only then.
  expect(failed.state.recent.map((r) => 'progressRef' in r)).toEqual([false, false]);
  const twoSteps = '## Iteration 1\n- did step 1\n## Iteration 2\n- did step 2\n';
  expect((await h.blobs.get(failed.state.failure!.progressRef!)).toString('utf8')).toBe(twoSteps);
  // The query shows the failure as the loop schedules the activity that writes state.json: wait for the file too.
  const stateFile = await eventually(async () => {
    const written = JSON.parse(readFileSync(path.join(sessionDir(id), 'state.json'), 'utf8'));
    return written.status === 'failed' ? written : undefined;
  });
  expect(stateFile).toMatchObject({
    status: 'failed',
    iteration: 3,
    error: { type: 'agent_crash', message: 'Claude process exited with code 1' },
    resume_from: 3,
  });
  // One attempt: the crash was not retried (the scripted agent would have answered reply 4 on a retry).
  expect((await h.client.getState(id)).status).toBe('running');

  await expect(h.client.resumeLoop(id, { stage: 'nope' })).rejects.toThrow('has no loop stage "nope" that has started');
  const resumed = await h.client.resumeLoop(id);
  expect(resumed).toMatchObject({ stage: 'work', from: 3, resumed: true });
  const artefact = await artefactOf(id, 'work');
  expect(artefact.iterations).toBe(4);
  // History and progress kept: iterations 1 and 2 from before, 3 and 4 after the resume.
  const progress = readFileSync(path.join(sessionDir(id), 'stage-00-work', 'progress.md'), 'utf8');
  expect(progress.match(/^## Iteration \d+$/gm)).toEqual([
    '## Iteration 1',
    '## Iteration 2',
    '## Iteration 3',
    '## Iteration 4',
  ]);
  await expect(h.client.resumeLoop(id)).rejects.toThrow(
    /no loop stage of .* is failed, so there is nothing to resume \(work: completed at iteration 4\)/,
  );
}, 60_000);

test('missing, malformed or erroring status files fail the iteration with a reason; abandoning fails the stage', async () => {
  const cases: [string, Reply, string, string][] = [
    ['missing', { output: 'x\n', progress: '- half done\n' }, 'missing_status', 'the agent wrote no status file at'],
    ['not-json', { status: '{ decision: stop' }, 'invalid_status', 'is not JSON'],
    [
      'bad-decision',
      { status: { decision: 'done', reason: 'r', summary: 's', errors: [] } },
      'invalid_status',
      'decision',
    ],
    ['no-reason', { status: { decision: 'stop', summary: 's', errors: [] } }, 'invalid_status', 'reason'],
    [
      'decided-error',
      { status: status('error', 'the build is broken') },
      'agent_error',
      'the agent decided "error": the build is broken',
    ],
    [
      'reported-errors',
      { status: status('continue', 'ok', { errors: ['disk full'] }) },
      'agent_error',
      'the agent reported errors: disk full',
    ],
  ];
  const ids = await Promise.all(
    cases.map(async ([name, bad]) => {
      const id = h.id(`loop-status-${name}`);
      await h.client.start(
        { name: 'statuses', stages: [loopStage('work', { termination: { type: 'fixed' } }, { max_iterations: 2 })] },
        { agent_replies: { work: [reply(1), bad] } },
        { id },
      );
      return id;
    }),
  );
  for (const [i, [, , type, message]] of cases.entries()) {
    const failed = await eventually(async () =>
      (await h.client.loops(ids[i]!)).find((l) => l.state.status === 'failed'),
    );
    expect(failed.state.failure).toMatchObject({
      iteration: 2,
      error: { type, message: expect.stringContaining(message) },
      resume_from: 2,
    });
  }
  // The failure's progress.md is the file as the failed iteration left it (its entry, though it wrote no status).
  const missing = (await h.client.loops(ids[0]!))[0]!.state.failure!;
  expect((await h.blobs.get(missing.progressRef!)).toString('utf8')).toBe(
    '## Iteration 1\n- did step 1\n- half done\n',
  );
  // Abandon: the stage, and so the work item, fails with the reason.
  await h.client.resumeLoop(ids[0]!, { action: 'abandon', reason: 'giving up' });
  const result = await h.client.result(ids[0]!);
  expect(result.status).toBe('failed');
  expect(JSON.stringify(result)).toContain('loop stage work failed at iteration 2 (missing_status');
  // The abandoned loop's two calls still count: their totals ride on its failure.
  expect((await h.client.usage(ids[0]!)).stages.work!.calls).toBe(2);
}, 90_000);

test('an iteration that fails for good (its snapshot cannot be written) fails the loop, and every call made so far still counts', async () => {
  const id = h.id('loop-broken-disk');
  const spec = {
    name: 'broken-disk',
    stages: [loopStage('work', { termination: { type: 'fixed' }, delay: 10 }, { max_iterations: 2 })],
  };
  await h.client.start(spec, { agent_replies: { work: [reply(1), reply(2)] } }, { id });
  // During the delay after the first iteration, a folder takes the place of the second iteration's output
  // snapshot: that iteration's agent answers (a model call), then its snapshot cannot be written, which no
  // retry mends (infrastructure, not the agent: the activity throws, Temporal retries it, then gives up).
  const loop = await eventually(async () => (await h.client.loops(id)).find((l) => l.state.iteration === 1));
  mkdirSync(path.join(workspace, loop.state.paths.stage_dir, 'iterations', '002', 'output.md'), { recursive: true });
  const result = await h.client.result(id);
  expect(result.status).toBe('failed');
  expect(result.stageErrors?.work).toMatch(/EISDIR/);
  // The first iteration's call counts for the item, and so do the failed iteration's, carried on the loop's
  // failure: those of its last execution at least (each of its three made one; an earlier execution's count
  // only when its heartbeat reached the server before it failed).
  const usage = (await h.client.usage(id)).stages.work!;
  expect(usage.errors).toBe(0);
  expect(usage.calls).toBeGreaterThanOrEqual(2);
  expect(usage.calls).toBeLessThanOrEqual(4);
}, 90_000);

test('inputs: select latest gives the previous stage’s output.md, select all every iteration’s snapshot; verify runs and is recorded', async () => {
  const id = h.id('loop-inputs');
  const spec = {
    name: 'ideation',
    stages: [
      loopStage('ideas', { termination: { type: 'fixed' } }, { max_iterations: 3 }),
      {
        ...(loopStage(
          'synthesize',
          { termination: { type: 'fixed' }, verify: ['test -s ${OUTPUT}'] },
          { max_iterations: 1, inputs: { from: 'ideas', select: 'all' }, output: 'docs/plan-${SESSION}.md' },
        ) as Record<string, Json>),
        depends_on: ['ideas'],
      },
      {
        ...(loopStage(
          'refine',
          { termination: { type: 'fixed' } },
          { max_iterations: 1, inputs: { from: 'synthesize', select: 'latest' } },
        ) as Record<string, Json>),
        depends_on: ['synthesize'],
      },
    ],
  };
  await h.client.start(
    spec,
    { agent_replies: { ideas: [reply(1), reply(2), reply(3)], synthesize: [reply(1)], refine: [reply(1)] } },
    { id },
  );
  await artefactOf(id, 'refine');
  const ctx = (stage: string) =>
    JSON.parse(readFileSync(path.join(sessionDir(id), stage, 'iterations', '001', 'context.json'), 'utf8'));
  expect(ctx('stage-01-synthesize').inputs.from_stage).toEqual({
    ideas: [
      'stage-00-ideas/iterations/001/output.md',
      'stage-00-ideas/iterations/002/output.md',
      'stage-00-ideas/iterations/003/output.md',
    ],
  });
  expect(ctx('stage-01-synthesize').paths.output).toBe(`docs/plan-${id}.md`);
  expect(ctx('stage-02-refine').inputs.from_stage).toEqual({ synthesize: ['stage-01-synthesize/output.md'] });
  // The tracked output is in the workspace, mirrored into the stage folder; the verify command ran on it.
  expect(readFileSync(path.join(workspace, 'docs', `plan-${id}.md`), 'utf8')).toBe('# Output 1\n');
  expect(readFileSync(path.join(sessionDir(id), 'stage-01-synthesize', 'output.md'), 'utf8')).toBe('# Output 1\n');
  expect(
    readFileSync(path.join(sessionDir(id), 'stage-01-synthesize', 'iterations', '001', 'verify.log'), 'utf8'),
  ).toContain(`$ test -s docs/plan-${id}.md`);
  const [, synthesize] = await h.client.loops(id);
  expect(synthesize!.state.recent[0]!.verify).toEqual({ ran: true, passed: true, summary: '1 command passed' });
}, 60_000);

test('a verify command off the allow-list and an inputs.from that is not a dependency are refused before any iteration, every problem listed', async () => {
  const id = h.id('loop-refused');
  const spec = {
    name: 'refused',
    stages: [
      loopStage(
        'work',
        { termination: { type: 'fixed' }, verify: ['rm -rf ${OUTPUT}'] },
        { max_iterations: 1, inputs: { from: 'elsewhere' } },
      ),
    ],
  };
  await h.client.start(spec, { agent_replies: { work: [reply(1)] } }, { id });
  const result = await h.client.result(id);
  expect(result.status).toBe('failed');
  const text = JSON.stringify(result);
  expect(text).toContain('loop stage work cannot start (2 problems)');
  expect(text).toContain('the verify command [\\"rm\\",\\"-rf\\"');
  expect(text).toContain('inputs.from: \\"elsewhere\\" is not a stage this one depends on');
}, 60_000);

test('continue-as-new every few iterations keeps the iteration numbers, progress and the consensus count across runs', async () => {
  const id = h.id('loop-can');
  const spec = {
    name: 'long',
    stages: [
      loopStage(
        'refine',
        { termination: { type: 'judgment', consensus: 3 } },
        { max_iterations: 20, iterations_per_run: 3 },
      ),
    ],
  };
  // Stops at 3, 4 | 5 (consensus 3 across the boundary after iteration 3... then a continue at 6 resets), stop 7, 8 | 9.
  const decisions = ['continue', 'continue', 'stop', 'stop', 'continue', 'stop', 'stop', 'stop'] as const;
  await h.client.start(spec, { agent_replies: { refine: decisions.map((d, i) => reply(i + 1, d)) } }, { id });
  const artefact = await artefactOf(id, 'refine');
  expect(artefact).toMatchObject({
    iterations: 8,
    stoppedBy: { by: 'termination', reason: '3 consecutive stop decisions (iteration 8)' },
  });
  const [loop] = await h.client.loops(id);
  expect(loop!.state.runs).toBe(3);
  const progress = readFileSync(path.join(sessionDir(id), 'stage-00-refine', 'progress.md'), 'utf8');
  expect(progress.match(/^## Iteration \d+$/gm)).toHaveLength(8);
  expect(readdirSync(path.join(sessionDir(id), 'stage-00-refine', 'iterations'))).toHaveLength(8);
}, 60_000);

test('the seed’s full-ideation example runs offline with treadle loop --wait; treadle status shows iterations and decisions; resume and bad files are explained', async () => {
  const id = h.id('loop-ideation');
  const run = await runTreadle(h, [
    'loop',
    path.join(EXAMPLE, 'pipeline.yaml'),
    '--replies',
    path.join(EXAMPLE, 'replies.yaml'),
    '--session',
    'ideation-demo',
    '--id',
    id,
    '--wait',
  ]);
  expect(run.stderr).toBe('');
  expect(run.code).toBe(0);
  expect(run.stdout).toMatch(/LoopCompleted\s+ideas: 5 iterations; done: 5 iterations done \(fixed\)/);
  expect(run.stdout).toMatch(
    /LoopCompleted\s+refine: 3 iterations; done: 2 consecutive stop decisions \(iteration 3\)/,
  );
  expect(run.stdout).toMatch(new RegExp(`loop refine \\(${id}\\.refine\\.1\\): completed, iteration 3 of at most 10`));

  const session = sessionDir('ideation-demo');
  expect(readdirSync(session).sort()).toEqual([
    'stage-00-ideas',
    'stage-01-synthesize',
    'stage-02-refine',
    'state.json',
  ]);
  expect(readdirSync(path.join(session, 'stage-00-ideas', 'iterations'))).toEqual(['001', '002', '003', '004', '005']);
  const plan = readFileSync(path.join(workspace, 'docs', 'plan-ideation-demo.md'), 'utf8');
  expect(plan).toContain('Security reads the audit log weekly.');
  const synthesized = JSON.parse(
    readFileSync(path.join(session, 'stage-01-synthesize', 'iterations', '001', 'context.json'), 'utf8'),
  );
  expect(synthesized.inputs.from_stage.ideas).toHaveLength(5);
  expect(JSON.parse(readFileSync(path.join(session, 'state.json'), 'utf8'))).toMatchObject({
    pipeline: 'full-ideation',
    status: 'completed',
    stages: {
      ideas: { status: 'completed', iteration: 5 },
      synthesize: { status: 'completed', iteration: 1 },
      refine: { status: 'completed', iteration: 3 },
    },
  });

  const status = await runTreadle(h, ['status', id]);
  expect(status.code).toBe(0);
  expect(status.stdout).toMatch(
    /loop refine .*: completed, iteration 3 of at most 10 \(judgment, consensus 2 from iteration 2\)/,
  );
  expect(status.stdout).toMatch(/decisions: 1 continue, 2 stop; consecutive stops 2/);
  expect(status.stdout).toMatch(/3\s+stop\s+-\s+Second look: the plan is complete\./);

  const nothing = await runTreadle(h, ['resume', id]);
  expect(nothing.code).toBe(1);
  expect(nothing.stderr).toMatch(/no loop stage of .* is failed, so there is nothing to resume/);

  // A misspelt termination type and a missing template: every problem, naming the file, the field and the fix.
  const dir = mkdtempSync(path.join(workspace, 'bad-'));
  writeFileSync(
    path.join(dir, 'pipeline.yaml'),
    'name: bad\nstages:\n  - id: a\n    template: typo\n  - id: b\n    template: missing\n    inputs: { from: c }\n',
  );
  for (const template of ['typo']) {
    const stageDir = path.join(dir, 'stages', template);
    mkdirSync(stageDir, { recursive: true });
    writeFileSync(
      path.join(stageDir, 'stage.yaml'),
      'name: typo\nprompt: prompt.md\ntermination: { type: judgement }\nguardrail: {}\n',
    );
  }
  const refused = await runTreadle(h, ['loop', path.join(dir, 'pipeline.yaml')]);
  expect(refused.code).toBe(2);
  expect(refused.stderr).toMatch(/the loop pipeline has 4 problems/);
  expect(refused.stderr).toMatch(
    /pipeline.yaml: stages\[1\]\.inputs\.from: "c" is not an earlier stage \(earlier: a\)/,
  );
  expect(refused.stderr).toMatch(/no stage template "missing": looked for .*stages\/missing\/stage.yaml/);
  expect(refused.stderr).toMatch(
    /stage.yaml: termination.type: must be one of judgment, queue, fixed \(got "judgement"; did you mean "judgment"\?\)/,
  );
  expect(refused.stderr).toMatch(/stage.yaml: guardrail: unknown field \(did you mean "guardrails"\?\)/);
}, 120_000);

test('a 500-iteration fixed loop continues as new every 100 iterations, keeps every number, and its history stays small', async () => {
  const id = h.id('loop-500');
  const spec = {
    name: 'long-fixed',
    stages: [loopStage('grind', { termination: { type: 'fixed' } }, { max_iterations: 500 })],
  };
  // One reply, repeated: each iteration writes the output and a status; the engine writes each progress entry.
  await h.client.start(
    spec,
    { agent_replies: { grind: [{ output: 'x'.repeat(20_000), status: status('continue', 'ground') }] } },
    { id },
  );
  const artefact = await artefactOf(id, 'grind');
  expect(artefact).toMatchObject({
    iterations: 500,
    stoppedBy: { by: 'termination', reason: '500 iterations done (fixed)' },
    outputBytes: 20_000,
  });
  // A 20 KB output makes the stage's artefact large: the work item keeps it by reference.
  expect((await h.client.result(id)).artefacts.grind).toMatchObject({
    ref: expect.stringMatching(/^sha256:/),
    mediaType: 'application/json',
  });
  expect(artefact.text).toHaveLength(20_000);
  const loopId = `${id}.grind.1`;
  const runs: { historySize: number; historyLength: number }[] = [];
  for await (const run of h.temporal.workflow.list({ query: `WorkflowId = "${loopId}"` }))
    runs.push({ historySize: run.historySize ?? 0, historyLength: run.historyLength ?? 0 });
  expect(runs).toHaveLength(5);
  for (const run of runs) {
    expect(run.historySize).toBeGreaterThan(0);
    // 100 iterations per run: about 1.5 KB each (of which ~130 B are the totals of the iteration's model
    // calls, for the item's usage and budget), whatever the output's size (20 KB here, by reference).
    expect(run.historySize).toBeLessThan(165_000);
  }
  const total = runs.reduce((sum, r) => sum + r.historySize, 0);
  expect(total / 500).toBeLessThan(1_650);
  const progress = readFileSync(path.join(sessionDir(id), 'stage-00-grind', 'progress.md'), 'utf8');
  expect(progress.match(/^## Iteration \d+$/gm)).toHaveLength(500);
  expect(progress).toContain('## Iteration 500\n');
  expect(readdirSync(path.join(sessionDir(id), 'stage-00-grind', 'iterations'))).toHaveLength(500);
  const [loop] = await h.client.loops(id);
  expect(loop!.state).toMatchObject({ iteration: 500, runs: 5, decisions: { continue: 500 } });
  expect(loop!.state.recent.map((r) => r.iteration)).toEqual(Array.from({ length: 20 }, (_, i) => 481 + i));
}, 240_000);

test('a loop composes with ordinary stages: an upstream artefact becomes an input file, the loop is gated like any stage, and its artefact flows on', async () => {
  const id = h.id('loop-composed');
  const spec = {
    name: 'composed',
    stages: [
      { name: 'draft', run: 'scripted' },
      {
        ...(loopStage('refine', { termination: { type: 'fixed' } }, { max_iterations: 2 }) as Record<string, Json>),
        depends_on: ['draft'],
        gate: 'scripted',
      },
      { name: 'publish', run: 'scripted', depends_on: ['refine'] },
    ],
  };
  await h.client.start(
    spec,
    { script: { draft: [{ output: '# Draft\n' }] }, agent_replies: { refine: [reply(1), reply(2)] } },
    { id },
  );
  const result = await h.client.result(id);
  expect(result.status).toBe('completed');
  const context = JSON.parse(
    readFileSync(path.join(sessionDir(id), 'stage-01-refine', 'iterations', '001', 'context.json'), 'utf8'),
  );
  expect(context.inputs.from_stage).toEqual({ draft: ['inputs/draft.md'], input: ['inputs/input.json'] });
  expect(readFileSync(path.join(sessionDir(id), 'inputs', 'draft.md'), 'utf8')).toBe('# Draft\n');
  const published = (await h.client.readArtefact(result.artefacts.publish)) as { upstream: Record<string, Json> };
  expect(await h.client.readArtefact(published.upstream.refine as Json)).toMatchObject({
    iterations: 2,
    stageDir: 'stage-01-refine',
    stoppedBy: { by: 'termination' },
    text: '# Output 2\n',
  });
  const events = await h.client.events(id);
  expect(events.filter((e) => e.stage === 'refine').map((e) => e.type)).toEqual(
    expect.arrayContaining(['StageStarted', 'LoopStarted', 'LoopCompleted', 'QualityCheckPassed', 'StageCompleted']),
  );
  // Each iteration's model call counts in the item's usage, as the loop's totals.
  const usage = await h.client.usage(id);
  expect(usage.stages.refine).toMatchObject({ calls: 2, errors: 0 });
  expect(usage.stages.refine!.inputTokens).toBeGreaterThan(0);
}, 60_000);

test('the token budget counts a loop’s calls: a later loop waits for review once they have spent it', async () => {
  const id = h.id('loop-budget');
  const spec = {
    name: 'budgeted-loops',
    token_budget: 10,
    stages: [
      loopStage('first', { termination: { type: 'fixed' } }, { max_iterations: 2 }),
      {
        ...(loopStage('second', { termination: { type: 'fixed' } }, { max_iterations: 1 }) as Record<string, Json>),
        depends_on: ['first'],
      },
    ],
  };
  await h.client.start(spec, { agent_replies: { first: [reply(1), reply(2)], second: [reply(1)] } }, { id });
  const waiting = await eventually(async () => {
    const state = await h.client.getState(id);
    return state.status === 'waiting_review' ? state : undefined;
  });
  expect(waiting.usage!.stages.first!.calls).toBe(2);
  expect(waiting.pendingReviews).toEqual([
    expect.objectContaining({
      stage: 'second',
      reason: 'budget_exhausted',
      message: expect.stringContaining('token budget spent'),
    }),
  ]);
  // Approving lets the loop run past the budget.
  await h.client.review(id, 'second', { kind: 'approve' });
  expect((await h.client.result(id)).status).toBe('completed');
  expect((await h.client.usage(id)).stages.second!.calls).toBe(1);

  // An item started on engine 3 (before loops counted) decides as it did then: no review, no loop usage.
  const old = await startHarness({ engineVersion: 3 });
  try {
    const oldId = old.id('loop-budget-engine-3');
    await old.client.start(spec, { agent_replies: { first: [reply(1), reply(2)], second: [reply(1)] } }, { id: oldId });
    expect((await old.client.result(oldId)).status).toBe('completed');
    const oldState = await old.client.getState(oldId);
    expect(oldState.events.some((e) => e.type === 'ReviewRequested')).toBe(false);
    expect(oldState.usage!.total.calls).toBe(0);
  } finally {
    await old.shutdown();
  }
}, 90_000);

test('the pipeline guardrail: max_runtime_seconds of the whole pipeline stops a loop that would run on', async () => {
  const id = h.id('loop-pipeline-guard');
  const spec = {
    name: 'pipeline-guard',
    stages: [
      loopStage(
        'slow',
        { termination: { type: 'fixed' }, delay: 1 },
        { max_iterations: 50, pipeline_max_runtime_seconds: 2 },
      ),
    ],
  };
  await h.client.start(spec, { agent_replies: { slow: [reply(1)] } }, { id });
  const artefact = await artefactOf(id, 'slow');
  expect(artefact.stoppedBy).toEqual({
    by: 'guardrail',
    reason: expect.stringMatching(/^the pipeline's max_runtime_seconds ran out after \d+ iterations?$/),
  });
  expect(artefact.iterations).toBeLessThan(5);
}, 60_000);

test('a gated loop whose output is rejected runs again as its next attempt: numbering continues, the feedback is in progress.md', async () => {
  const id = h.id('loop-gated');
  const spec = {
    name: 'gated',
    stages: [
      {
        ...(loopStage('refine', { termination: { type: 'fixed' } }, { max_iterations: 2 }) as Record<string, Json>),
        gate: 'scripted',
        retry_budget: { max_attempts: 2 },
      },
    ],
  };
  const input = {
    script: { refine: [{ verdict: 'rejected', summary: 'the plan has no milestones', criteria: ['milestones'] }, {}] },
    agent_replies: { refine: [reply(1), reply(2), reply(3), reply(4)] },
  };
  await h.client.start(spec, input, { id });
  const artefact = await artefactOf(id, 'refine');
  expect(artefact).toMatchObject({ iterations: 4, text: '# Output 4\n' });
  const stageDir = path.join(sessionDir(id), 'stage-00-refine');
  expect(readdirSync(path.join(stageDir, 'iterations')).sort()).toEqual(['001', '002', '003', '004']);
  expect(readFileSync(path.join(stageDir, 'iterations', '001', 'output.md'), 'utf8')).toBe('# Output 1\n');
  const progress = readFileSync(path.join(stageDir, 'progress.md'), 'utf8');
  expect(progress).toBe(
    '## Iteration 1\n- did step 1\n## Iteration 2\n- did step 2\n\n## Quality gate feedback on attempt 1\n- the plan has no milestones\n- failed: milestones: expected pass, got fail\n## Iteration 3\n- did step 3\n## Iteration 4\n- did step 4\n',
  );
  const context = JSON.parse(readFileSync(path.join(stageDir, 'iterations', '003', 'context.json'), 'utf8'));
  expect(context).toMatchObject({
    iteration: 3,
    inputs: { from_previous_iterations: ['iterations/001/output.md', 'iterations/002/output.md'] },
  });
  const loops = await h.client.loops(id);
  expect(loops.map((l) => [l.workflowId, l.state.iteration])).toEqual([
    [`${id}.refine.1`, 2],
    [`${id}.refine.2`, 4],
  ]);
}, 60_000);
