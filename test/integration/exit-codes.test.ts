/**
 * Exit codes of every command that waits for work or reports its outcome (issue 26 §4, docs/cli.md "Exit
 * codes"): `run --wait`, `loop --wait`, `tdd --wait`, `watch` and `result`, each × 0 completed, 1 failed,
 * 2 usage or configuration error, 3 waiting for a person. `--wait` and `watch` do not wait for people (they
 * stop at a person's turn with 3); `result` and `run|loop|tdd --wait-all` do, so they never exit 3. Also 2 for option values `calls` and
 * `blobs gc` cannot use, `--task-queue` on `run`, `loop` and `tdd`, over TREADLE_TASK_QUEUE, and the warning
 * when no worker polls the queue work starts on.
 *
 * Cells covered elsewhere, not repeated here: run --wait 0 and 1, watch 0 and 1, result 0 and 1, tdd --wait 3,
 * loop --wait 3, usage errors 2 (outcomes.test.ts); run --wait 3 at a review (cli.test.ts).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Json } from '../../src/model/shapes';
import { eventually, startHarness, type Harness } from '../support/harness';
import { runTreadle, type CliRun } from '../support/cli';
import { leaf, tddRepos, type TddRepos } from '../support/tdd-fixtures';
import { fixedLoopSpec } from '../support/pipelines';

let h: Harness;
let repos: TddRepos;
let dir: string;
const saved = process.env.TREADLE_LOOP_WORKSPACE;
/** A queue nobody polls: with TREADLE_TASK_QUEUE set to it, only `--task-queue` reaches the harness's worker. */
const nowhere = `nobody-polls-${Math.random().toString(36).slice(2, 8)}`;

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'exit-codes-'));
  process.env.TREADLE_LOOP_WORKSPACE = path.join(dir, 'workspace');
  repos = tddRepos('exit-codes-tdd-');
  h = await startHarness();
});
afterAll(async () => {
  await h?.shutdown();
  repos?.remove();
  if (saved === undefined) delete process.env.TREADLE_LOOP_WORKSPACE;
  else process.env.TREADLE_LOOP_WORKSPACE = saved;
});

function write(name: string, content: Json | string): string {
  const file = path.join(dir, name);
  writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content));
  return file;
}

/** A loop stage of fixed length whose scripted agent follows `replies` (a reply without status fails it). */
function loopFiles(name: string, replies: Json[]): { spec: string; input: string } {
  const spec = write(`${name}.json`, fixedLoopSpec(name, 2));
  return { spec, input: write(`${name}.input.json`, { agent_replies: { work: replies } }) };
}
const loopStatus = { decision: 'continue', reason: 'r', summary: 's', errors: [] };

/** The one-leaf TDD tree `name` (its spec file) and the replies that merge it, or leave its Impl stuck. */
function tddFiles(name: string, outcome: 'merges' | 'stuck'): { spec: string; replies: string } {
  const l = leaf(name);
  const spec = write(`${name}.tdd.json`, { ...l.spec, tdd: { humanTtlSeconds: 1 } } as unknown as Json);
  const replies = {
    [`${name}.scaffold`]: [l.initWork],
    [`${name}.tddWriteTests`]: [l.testsReady],
    [`${name}.impl`]: [outcome === 'merges' ? l.testsPassed : l.stuck],
    [`${name}.tddReviewImpl`]: [l.approved],
    [`${name}.merger`]: [l.mergeComplete],
  };
  return { spec, replies: write(`${name}.replies.json`, replies as unknown as Json) };
}

/** The task queue workflow `id` runs on. */
async function queueOf(id: string): Promise<string> {
  return (await h.temporal.workflow.getHandle(id).describe()).taskQueue;
}

/** Whether `run` is still going after `ms` (it would have exited had it not waited). */
async function stillRunning(run: Promise<CliRun>, ms: number): Promise<boolean> {
  const waited = new Promise<'waiting'>((resolve) => setTimeout(() => resolve('waiting'), ms));
  return (await Promise.race([run.then(() => 'exited' as const), waited])) === 'waiting';
}

describe('0 completed, 1 failed, 3 waiting for a person', () => {
  test('run --wait: 3 at an approval, with the commands that decide it', async () => {
    const id = h.id('exit-approval');
    const spec = write('approval.json', {
      name: 'approval-exit',
      stages: [
        { name: 'draft', run: 'scripted' },
        { name: 'approve', type: 'approval', depends_on: ['draft'], with: { action: 'create_task', items: 'tasks' } },
      ],
    });
    const input = write('approval.input.json', { script: { draft: [{ output: { tasks: [{ title: 'ship it' }] } }] } });
    const run = await runTreadle(h, ['run', '--file', spec, '--input', `@${input}`, '--id', id, '--wait']);
    expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 3, stderr: '' });
    expect(run.stdout).toMatch(
      new RegExp(`\\n${id} waits for a person:\\n  treadle approve ap-\\S+ +\\(or treadle approve reject ap-`),
    );
    await h.temporal.workflow.getHandle(id).terminate('test over');
  }, 60_000);

  test('watch: 3 at a review; result waits through it (never 3) and exits 0 once it is approved', async () => {
    const id = h.id('exit-review');
    await h.client.start(
      { name: 'reviewed', stages: [{ name: 'only', run: 'scripted', review_policy: 'always' }] },
      null,
      {
        id,
      },
    );
    const watched = await runTreadle(h, ['watch', id]);
    expect(watched.code).toBe(3);
    expect(watched.stdout).toContain(`${id} is waiting_review`);
    expect(watched.stdout).toContain(`treadle review ${id} only --approve`);

    const result = runTreadle(h, ['result', id]);
    expect(await stillRunning(result, 2_000)).toBe(true);
    await h.client.review(id, 'only', { kind: 'approve' });
    const done = await result;
    expect(done.code).toBe(0);
    expect(JSON.parse(done.stdout)).toMatchObject({ status: 'completed' });
  }, 60_000);

  test('loop --wait (on --task-queue, over TREADLE_TASK_QUEUE): 0 when the loop completes', async () => {
    const id = h.id('exit-loop-ok');
    const { spec, input } = loopFiles('loop-ok', [
      { output: '# 1\n', progress: '- 1\n', status: loopStatus },
      { output: '# 2\n', progress: '- 2\n', status: loopStatus },
    ]);
    const args = ['loop', spec, '--input', `@${input}`, '--id', id, '--task-queue', h.taskQueue, '--wait'];
    const run = await runTreadle(h, args, { TREADLE_TASK_QUEUE: nowhere });
    expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: '' });
    expect(run.stdout).toMatch(/loop work .*: completed, iteration 2/);
    expect(await queueOf(id)).toBe(h.taskQueue);
  }, 60_000);

  test('loop --wait and watch: 3 while a loop waits for resume; 1 once it is given up (resume --abandon)', async () => {
    const id = h.id('exit-loop-failed');
    const { spec, input } = loopFiles('loop-failed', [
      { output: '# 1\n', progress: '- 1\n', status: loopStatus },
      { output: 'x\n' },
    ]);
    const args = ['loop', spec, '--input', `@${input}`, '--id', id, '--wait'];
    expect((await runTreadle(h, args)).code).toBe(3);
    // watch stops there too (it used to wait for the resume), with the same commands.
    const watched = await runTreadle(h, ['watch', id]);
    expect(watched.code).toBe(3);
    expect(watched.stdout).toContain(`${id} is running`);
    expect(watched.stdout).toContain(`resume with \`treadle resume ${id} --stage work\``);
    const abandoned = await runTreadle(h, ['resume', id, '--abandon', '--reason', 'giving up']);
    expect(abandoned).toMatchObject({ code: 0, stdout: expect.stringContaining('abandoned at iteration 2') });
    await eventually(async () => ((await h.client.visibleItem(id)).execution === 'FAILED' ? true : undefined));
    const again = await runTreadle(h, args);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(`${id} was started before with this id: this is that run`);
    expect(again.stdout).toMatch(/\n\S+ · .*failed/);
  }, 90_000);

  test('tdd --wait (on --task-queue, over TREADLE_TASK_QUEUE): 0 when the tree merges', async () => {
    const repo = await repos.create('merges');
    const id = h.id('exit-tdd-merged');
    const { spec, replies } = tddFiles('merges', 'merges');
    const args = ['tdd', spec, '--repo', repo, '--replies', replies, '--id', id, '--task-queue', h.taskQueue, '--wait'];
    const run = await runTreadle(h, args, { TREADLE_TASK_QUEUE: nowhere });
    expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: '' });
    expect(run.stdout).toContain('merges: merged (phase done');
    expect(await queueOf(id)).toBe(h.taskQueue);
  }, 120_000);

  test('tdd --wait: 1 for a tree that failed (nobody answered its human step in time)', async () => {
    const repo = await repos.create('stuck');
    const id = h.id('exit-tdd-failed');
    const { spec, replies } = tddFiles('stuck', 'stuck');
    const args = ['tdd', spec, '--repo', repo, '--replies', replies, '--id', id];
    expect(await runTreadle(h, args)).toMatchObject({ code: 0, stdout: `${id}\n`, stderr: '' });
    expect((await h.client.tddResult(id)).status).toBe('failed');
    const waited = await runTreadle(h, [...args, '--wait']);
    expect(waited.code).toBe(1);
    expect(waited.stdout).toMatch(/stuck: failed/);
  }, 120_000);
});

describe('--wait-all: waits through people, so 0 or 1 and never 3', () => {
  test('run --wait-all: still waiting at a review; 0 once it is approved, with no "waits for a person"', async () => {
    const id = h.id('exit-all-review');
    const spec = write('reviewed.json', {
      name: 'reviewed-all',
      stages: [{ name: 'only', run: 'scripted', review_policy: 'always' }],
    });
    const run = runTreadle(h, ['run', '--file', spec, '--id', id, '--wait-all']);
    await eventually(async () => ((await h.client.getState(id)).status === 'waiting_review' ? true : undefined));
    // --wait would have exited 3 here.
    expect(await stillRunning(run, 2_000)).toBe(true);
    await h.client.review(id, 'only', { kind: 'approve' });
    const done = await run;
    expect({ code: done.code, stderr: done.stderr }).toEqual({ code: 0, stderr: '' });
    expect(done.stdout).toContain('ReviewRequested');
    expect(done.stdout).not.toContain('waits for a person');
  }, 60_000);

  test('loop --wait-all: waits through a failed loop; 1 once it is given up', async () => {
    const id = h.id('exit-all-loop');
    const { spec, input } = loopFiles('loop-all', [
      { output: '# 1\n', progress: '- 1\n', status: loopStatus },
      { output: 'x\n' },
    ]);
    const run = runTreadle(h, ['loop', spec, '--input', `@${input}`, '--id', id, '--wait-all']);
    await eventually(async () =>
      (await h.client.loops(id)).some((l) => l.state.status === 'failed') ? true : undefined,
    );
    expect(await stillRunning(run, 2_000)).toBe(true);
    expect((await runTreadle(h, ['resume', id, '--abandon', '--reason', 'giving up'])).code).toBe(0);
    const done = await run;
    expect(done.code).toBe(1);
    expect(done.stdout).toMatch(/\n\S+ · .*failed/);
  }, 90_000);

  test('tdd --wait-all: 1 for a tree that fails while it waits (nobody answered its human step in time)', async () => {
    const repo = await repos.create('stuck-all');
    const id = h.id('exit-all-tdd');
    const { spec, replies } = tddFiles('stuckall', 'stuck');
    const run = await runTreadle(h, ['tdd', spec, '--repo', repo, '--replies', replies, '--id', id, '--wait-all']);
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/stuckall: failed/);
    expect(run.stdout).not.toContain('waits for a person');
  }, 120_000);
});

describe('2: a usage or configuration error, before anything starts', () => {
  const toml = () => write('temporal.toml', '[profile.default]\naddress = "localhost:7233"\n');
  const cases: { name: string; args: () => string[]; env?: () => Record<string, string>; stderr: RegExp }[] = [
    {
      name: 'run --wait with a TEMPORAL_PROFILE the config file lacks',
      args: () => ['run', 'review-demo', '--wait'],
      env: () => ({ TEMPORAL_CONFIG_FILE: toml(), TEMPORAL_PROFILE: 'nosuch' }),
      stderr: /^treadle: TEMPORAL_PROFILE=nosuch: no such profile in /,
    },
    {
      name: 'watch with a CA certificate path that cannot be read',
      args: () => ['watch', 'any-id'],
      env: () => ({ TEMPORAL_TLS_SERVER_CA_CERT_PATH: '/nonexistent/ca.pem' }),
      stderr:
        /^treadle: cannot read \/nonexistent\/ca\.pem \(no such file\), named by TEMPORAL_TLS_SERVER_CA_CERT_PATH\n$/,
    },
    {
      name: 'result with a malformed Treadle setting',
      args: () => ['result', 'any-id'],
      env: () => ({ TREADLE_BLOB_THRESHOLD: 'lots' }),
      stderr: /^treadle: TREADLE_BLOB_THRESHOLD must be a whole number of bytes, got "lots"\n$/,
    },
    {
      name: 'run --wait with a pipeline file that does not exist',
      args: () => ['run', '--file', '/nonexistent/pipeline.yaml', '--wait'],
      stderr: /^treadle: cannot read pipeline file \/nonexistent\/pipeline\.yaml: ENOENT\n$/,
    },
    {
      name: 'loop --wait with a pipeline file that does not exist',
      args: () => ['loop', '/nonexistent/pipeline.yaml', '--wait'],
      stderr: /^treadle: cannot read pipeline file \/nonexistent\/pipeline\.yaml: ENOENT\n$/,
    },
    {
      name: 'tdd --wait with a spec file that does not exist',
      args: () => ['tdd', '/nonexistent/spec.yaml', '--repo', dir, '--wait'],
      stderr: /^treadle: cannot read pipeline file \/nonexistent\/spec\.yaml: ENOENT\n$/,
    },
    {
      name: 'run --wait with an input file that does not exist',
      args: () => ['run', 'review-demo', '--input', '@/nonexistent/input.json', '--wait'],
      stderr: /^treadle: cannot read \/nonexistent\/input\.json: ENOENT\n$/,
    },
    {
      name: 'tdd --wait with a spec that is invalid (refused by the client after connecting)',
      args: () => ['tdd', write('bad.tdd.json', { id: 'has space' }), '--repo', dir, '--wait'],
      stderr: /^treadle: TDD spec is invalid:\n {2}- id: letters, digits/,
    },
    {
      name: 'calls with a --since that is not a duration',
      args: () => ['calls', '--since', '3x'],
      stderr: /^treadle: option '--since <duration>' argument '3x' is invalid\. "3x" is not a duration \(use e\.g\. /,
    },
    {
      name: 'calls with a --by that is not a grouping',
      args: () => ['calls', '--by', 'nobody'],
      stderr:
        /^treadle: option '--by <group>' argument 'nobody' is invalid\. Allowed choices are model, provider, pipeline, stage\./,
    },
    {
      name: 'calls prune with a --before that is not a duration',
      args: () => ['calls', 'prune', '--before', 'soon'],
      stderr: /^treadle: option '--before <duration>' argument 'soon' is invalid\. "soon" is not a duration/,
    },
    {
      name: 'blobs gc with a --grace that is not a duration',
      args: () => ['blobs', 'gc', '--grace', 'forever'],
      stderr: /^treadle: option '--grace <duration>' argument 'forever' is invalid\. "forever" is not a duration/,
    },
  ];
  test.each(cases)('$name', async ({ args, env, stderr }) => {
    const run = await runTreadle(h, args(), env?.() ?? {});
    expect({ code: run.code, stdout: run.stdout }).toEqual({ code: 2, stdout: '' });
    expect(run.stderr).toMatch(stderr);
  });

  test('a server that cannot be reached is not a configuration error: 1', async () => {
    const run = await runTreadle(h, ['watch', 'any-id'], { TEMPORAL_ADDRESS: '127.0.0.1:1' });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^treadle: cannot reach the Temporal server at 127\.0\.0\.1:1/);
  });
});

describe('--task-queue', () => {
  test('run starts on the queue given over TREADLE_TASK_QUEUE, and the harness worker runs it', async () => {
    const id = h.id('exit-queue');
    const spec = write('queued.json', { name: 'queued', stages: [{ name: 'a', run: 'scripted' }] });
    const run = await runTreadle(h, ['run', '--file', spec, '--id', id, '--task-queue', h.taskQueue, '--wait'], {
      TREADLE_TASK_QUEUE: nowhere,
    });
    expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: '' });
    expect(await queueOf(id)).toBe(h.taskQueue);
  }, 60_000);

  test('on a queue no worker polls, run and tdd start anyway, exit 0 and say so on stderr in one line', async () => {
    const spec = write('unserved.json', { name: 'unserved', stages: [{ name: 'a', run: 'scripted' }] });
    const id = h.id('exit-unserved');
    const run = await runTreadle(h, ['run', '--file', spec, '--id', id, '--task-queue', nowhere]);
    expect(run).toEqual({
      code: 0,
      stdout: `${id}\n`,
      stderr: `treadle: no worker polls task queue ${nowhere} yet; the item waits until one does: start one with \`TREADLE_TASK_QUEUE=${nowhere} treadle worker\`\n`,
    });
    expect(await queueOf(id)).toBe(nowhere);

    const tree = h.id('exit-unserved-tdd');
    const { spec: tddSpec } = tddFiles('unserved', 'merges');
    const tdd = await runTreadle(h, ['tdd', tddSpec, '--repo', dir, '--id', tree], { TREADLE_TASK_QUEUE: nowhere });
    expect(tdd).toEqual({
      code: 0,
      stdout: `${tree}\n`,
      stderr: `treadle: no worker polls task queue ${nowhere} yet; the tree waits until one does: start one with \`TREADLE_TASK_QUEUE=${nowhere} treadle worker\`\n`,
    });
    expect(await queueOf(tree)).toBe(nowhere);
    for (const started of [id, tree]) await h.temporal.workflow.getHandle(started).terminate('test over');
  }, 60_000);
});
