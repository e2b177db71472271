/**
 * Issue 26 §2, host-bound work: docs/stages/tdd.md's recipe for a worker that serves other repositories than its
 * neighbours. Two `treadle worker` processes, each with its own TREADLE_TDD_REPOS, cwd and home, each on a queue
 * of its own (TREADLE_TASK_QUEUE), and one TDD tree started on each queue with `treadle tdd --repo --wait`:
 * both trees merge. (With both workers on one queue, Temporal handed each tree's tasks to either worker and
 * trees failed "repository … is outside the folders this worker allows".)
 */
import { Connection } from '@temporalio/client';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { runCli, type CliRun } from '../support/cli';
import { testAddress } from '../support/harness';
import { startTreadleWorker, type TreadleWorkerProcess } from '../support/worker-process';

const ROOT = path.join(__dirname, '..', '..');
const SPEC = path.join(ROOT, 'examples', 'tdd', 'textkit.yaml');
const REPLIES = path.join(ROOT, 'examples', 'tdd', 'textkit.replies.yaml');

let root: string;
let connection: Connection;
const workers: TreadleWorkerProcess[] = [];
const suffix = Math.random().toString(36).slice(2, 10);

/** One worker's setting: its folder (repositories under it, its cwd), home and queue. */
function host(name: string): NodeJS.ProcessEnv & { folder: string } {
  const folder = path.join(root, name);
  mkdirSync(folder);
  execFileSync('git', ['init', '-q', '-b', 'main', 'textkit'], { cwd: folder });
  execFileSync('git', ['-C', 'textkit', 'commit', '-q', '--allow-empty', '-m', 'init'], { cwd: folder, env: gitEnv });
  const settings = /^(TREADLE_|TEMPORAL_|ANTHROPIC_|OTEL_|CLAUDE_)/;
  return {
    ...Object.fromEntries(Object.entries(process.env).filter(([key]) => !settings.test(key))),
    ...gitEnv,
    folder,
    TEMPORAL_ADDRESS: testAddress(),
    TREADLE_TASK_QUEUE: `tdd-${name}-${suffix}`,
    TREADLE_TDD_REPOS: folder,
    TREADLE_HOME: path.join(root, `${name}-home`),
    // Items that span both hosts (below) need one blob store: a shared folder here, S3 across machines.
    TREADLE_BLOB_DIR: path.join(root, 'shared-blobs'),
  };
}

const gitEnv = {
  GIT_AUTHOR_NAME: 'Test',
  GIT_AUTHOR_EMAIL: 'test@localhost',
  GIT_COMMITTER_NAME: 'Test',
  GIT_COMMITTER_EMAIL: 'test@localhost',
};

/** `treadle …` in `cwd` with `env` as its whole environment (one host's settings). */
function treadle(args: string[], env: NodeJS.ProcessEnv, cwd: string): Promise<CliRun> {
  return runCli(args, { cwd, env, timeoutMs: 150_000 });
}

beforeAll(async () => {
  root = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'tdd-queues-'));
  connection = await Connection.connect({ address: testAddress() });
});

afterAll(async () => {
  for (const worker of workers) await worker.stop();
  await connection?.close();
}, 60_000);

it('runs two trees in two repositories held by two workers, each on its own queue', async () => {
  const hosts = [host('a'), host('b')];
  workers.push(...(await Promise.all(hosts.map((env) => startTreadleWorker({ env, cwd: env.folder })))));
  const runs = await Promise.all(
    hosts.map((env) =>
      treadle(
        [
          'tdd',
          SPEC,
          '--repo',
          path.join(env.folder, 'textkit'),
          '--replies',
          REPLIES,
          '--id',
          `tdd-${env.TREADLE_TASK_QUEUE}`,
          '--wait',
        ],
        env,
        root,
      ),
    ),
  );
  for (const [i, run] of runs.entries()) {
    if (run.code !== 0)
      throw new Error(`tree ${i}: exit ${run.code}\n${run.stdout}\n${run.stderr}\n${workers[i]!.log()}`);
    expect(run.stdout).toContain(`started tdd-${hosts[i]!.TREADLE_TASK_QUEUE}: branch tdd/textkit`);
    expect(run.stdout).toContain('\ntextkit: merged (phase done, branch tdd/textkit, depth 0)\n');
    expect(run.stdout).toMatch(/ItemCompleted +textkit merged as [0-9a-f]{10}/);
  }

  // A pipeline started on b's queue whose tdd and loop stages name a's queue: the tree (a's repository,
  // which b's worker refuses) and the loop (its folders) run on a's worker; the item completes on b's.
  const [a, b] = hosts as [(typeof hosts)[0], (typeof hosts)[0]];
  const id = `host-stages-${suffix}`;
  const spec = {
    name: 'host-stages',
    stages: [
      {
        name: 'build',
        run: 'tdd',
        task_queue: a.TREADLE_TASK_QUEUE,
        with: {
          spec: YAML.parse(readFileSync(SPEC, 'utf8')),
          repo: path.join(a.folder, 'textkit'),
          replies: YAML.parse(readFileSync(REPLIES, 'utf8')),
        },
      },
      {
        name: 'refine',
        run: 'loop',
        task_queue: a.TREADLE_TASK_QUEUE,
        depends_on: ['build'],
        with: {
          stage: {
            name: 'refine',
            prompt: 'Read ${CTX}. Write ${OUTPUT}. Report in ${STATUS}.',
            termination: { type: 'fixed' },
          },
          max_iterations: 1,
        },
      },
    ],
  };
  const status = {
    decision: 'stop',
    reason: 'done',
    summary: 'done',
    work: { items_completed: [], files_touched: [] },
    errors: [],
  };
  const input = { agent_replies: { refine: [{ output: '# Notes\n', progress: '## 1\n', status }] } };
  writeFileSync(path.join(root, 'host-stages.yaml'), YAML.stringify(spec));
  writeFileSync(path.join(root, 'host-stages.input.json'), JSON.stringify(input));
  const run = await treadle(
    ['run', '--file', 'host-stages.yaml', '--input', '@host-stages.input.json', '--id', id, '--wait'],
    b,
    root,
  );
  if (run.code !== 0)
    throw new Error(`exit ${run.code}\n${run.stdout}\n${run.stderr}\n${workers.map((w) => w.log()).join('\n')}`);
  const tree = await connection.workflowService.describeWorkflowExecution({
    namespace: 'default',
    execution: { workflowId: `${id}.build.1` },
  });
  expect(tree.executionConfig?.taskQueue?.name).toBe(a.TREADLE_TASK_QUEUE);
  const runFolder = (home: string) => path.join(home, 'workspace', '.treadle', 'pipeline-runs', id);
  expect(existsSync(runFolder(a.TREADLE_HOME!))).toBe(true);
  expect(existsSync(runFolder(b.TREADLE_HOME!))).toBe(false);
}, 300_000);
