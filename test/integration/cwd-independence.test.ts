/**
 * Issue 26 §3, one home for local state: a `treadle worker` started in one directory and CLI commands run from
 * three others, sharing only TREADLE_HOME, see the same blobs, call log and task list. Cases: `run review-demo
 * --input @big.json` (an input over the blob threshold) from X, then `status` and `artefact` (an offloaded
 * artefact) from Y; `run email-triage --wait` from X, then `approve list`, `approve` (the worker writes the task
 * list in the home) and `calls` from Z; a CLI with another home reports the missing blob naming the folder and
 * the setting; nothing is written under any of those directories. Then the per-user default and the one-line
 * warning about an older version's `./.treadle/`. Before issue 26 the defaults were under each command's
 * directory, so the first command reading a blob failed "blob sha256:… not found in .treadle/blobs".
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { runCli, showRun, type CliRun } from '../support/cli';
import { eventually, testAddress } from '../support/harness';
import { startTreadleWorker, type TreadleWorkerProcess } from '../support/worker-process';
import type { WorkItemState } from '../../src/model/state';

let root: string;
let home: string;
/** The worker's directory and the three the CLI runs in. */
const dirs: Record<'worker' | 'x' | 'y' | 'z', string> = { worker: '', x: '', y: '', z: '' };
let env: NodeJS.ProcessEnv;
let worker: TreadleWorkerProcess | undefined;

/** `treadle …` in `cwd`, with the shared environment (and `extra` over it). */
function treadleIn(cwd: string, args: string[], extra: NodeJS.ProcessEnv = {}): Promise<CliRun> {
  return runCli(args, { cwd, env: { ...env, ...extra }, timeoutMs: 90_000 });
}

/** The command's stdout, failing with everything it printed when it did not exit 0. */
async function ok(cwd: string, args: string[]): Promise<string> {
  const run = await treadleIn(cwd, args);
  if (run.code !== 0)
    throw new Error(`treadle ${args.join(' ')} in ${cwd}: ${showRun(run)}\n--- worker\n${worker?.log()}`);
  return run.stdout;
}

beforeAll(async () => {
  root = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'cwd-independence-'));
  home = path.join(root, 'home');
  for (const name of Object.keys(dirs) as (keyof typeof dirs)[]) {
    dirs[name] = path.join(root, name);
    mkdirSync(dirs[name]);
  }
  // Only what a user would set: the test run's own TREADLE_* settings (its home, any blob dir) stay out.
  const settings = /^(TREADLE_|TEMPORAL_|ANTHROPIC_|OTEL_|CLAUDE_)/;
  env = {
    ...Object.fromEntries(Object.entries(process.env).filter(([name]) => !settings.test(name))),
    TEMPORAL_ADDRESS: testAddress(),
    TREADLE_TASK_QUEUE: `cwd-${Math.random().toString(36).slice(2, 10)}`,
    TREADLE_HOME: home,
    TREADLE_AGENT: 'scripted',
  };
  worker = await startTreadleWorker({ env, cwd: dirs.worker });
}, 180_000);

afterAll(async () => {
  await worker?.stop();
}, 60_000);

it('runs an item with a large input from X and reads its state and offloaded artefact from Y', async () => {
  const id = `cwd-review-${env.TREADLE_TASK_QUEUE}`;
  const input = {
    topic: `durable execution ${'and more '.repeat(2_000)}`,
    script: {
      draft: [{ summary: 'drafted', outputBytes: 20_000 }],
      fact_check: [{ summary: 'facts checked' }],
      format: [{ summary: 'formatted' }],
    },
  };
  // Over the default threshold (2048 bytes): the CLI stores the input in the blob store, the worker reads it.
  expect(JSON.stringify(input).length).toBeGreaterThan(10_000);
  writeFileSync(path.join(dirs.x, 'big.json'), JSON.stringify(input));
  expect(await ok(dirs.x, ['run', 'review-demo', '--input', '@big.json', '--id', id])).toBe(`${id}\n`);

  // The publish stage always asks for sign-off: the item got there only if the worker read the input.
  const state = await eventually(
    async () => {
      const run = await treadleIn(dirs.y, ['status', id, '--json']);
      const parsed = run.code === 0 ? (JSON.parse(run.stdout) as WorkItemState) : undefined;
      if (parsed?.status === 'failed')
        throw new Error(`the item failed: ${showRun(run)}\n--- worker\n${worker?.log()}`);
      return parsed?.status === 'waiting_review' ? parsed : undefined;
    },
    60_000,
    'the item waiting for review',
  );
  expect(state.pendingReviews.map((r) => r.stage)).toEqual(['publish']);
  expect(state.stages.draft?.artefact).toMatchObject({ ref: expect.stringMatching(/^sha256:/) });

  const artefact = JSON.parse(await ok(dirs.y, ['artefact', id, 'draft'])) as { text: string };
  expect(artefact.text).toBe('x'.repeat(20_000));
  expect(readdirSync(path.join(home, 'blobs')).length).toBeGreaterThan(0);

  // A CLI with another home has another blob store, and says which one and which setting chose it.
  const elsewhere = path.join(root, 'other-home');
  const missing = await treadleIn(dirs.y, ['artefact', id, 'draft'], { TREADLE_HOME: elsewhere });
  expect(missing.code).toBe(1);
  const ref = (state.stages.draft!.artefact as { ref: string }).ref;
  expect(missing.stderr).toBe(
    `treadle: blob ${ref} not found in ${path.join(elsewhere, 'blobs')} (TREADLE_BLOB_DIR; the workers and the CLI ` +
      'must share it, or use TREADLE_BLOB_STORE=s3)\n',
  );
}, 120_000);

it('lists approvals, approves one and reads the call log from Z, for an item started from X', async () => {
  const id = `cwd-triage-${env.TREADLE_TASK_QUEUE}`;
  // `--wait` stops at the approvals: exit 3, a person's turn (src/cli/exit-codes.ts).
  const waited = await treadleIn(dirs.x, ['run', 'email-triage', '--id', id, '--wait']);
  expect(waited.code).toBe(3);
  const started = waited.stdout;
  expect(started).toMatch(new RegExp(`${id} · pipeline email-triage · waiting_approval`));

  const listed = JSON.parse(await ok(dirs.z, ['approve', 'list', '--json', '--pipeline', 'email-triage'])) as {
    id: string;
    itemId: string;
    actionType: string;
  }[];
  const mine = listed.filter((r) => r.itemId === id);
  expect(mine.length).toBeGreaterThan(0);
  const task = mine.find((r) => r.actionType === 'create_task') ?? mine[0]!;
  await ok(dirs.z, ['approve', task.id, '--by', 'someone']);
  // The worker (in its own directory) keeps the task list in the home.
  const tasksFile = path.join(home, 'tasks.json');
  const list = await eventually(
    async () => {
      if (!existsSync(tasksFile)) return undefined;
      const parsed = JSON.parse(readFileSync(tasksFile, 'utf8')) as { applied: Record<string, unknown> };
      return Object.keys(parsed.applied).length > 0 ? parsed : undefined;
    },
    30_000,
    'the approved action in the task list',
  );
  expect(Object.keys(list.applied)).toHaveLength(1);

  const calls = JSON.parse(await ok(dirs.z, ['calls', '--pipeline', 'email-triage', '--json'])) as {
    total: { calls: number };
  };
  expect(calls.total.calls).toBeGreaterThan(0);
}, 120_000);

it('writes nothing under the directories the worker and the commands ran in', () => {
  for (const dir of Object.values(dirs)) {
    const entries = readdirSync(dir);
    expect({ dir, entries }).toEqual({ dir, entries: dir === dirs.x ? ['big.json'] : [] });
  }
});

it("defaults to the per-user home, and warns once about an older version's ./.treadle/", async () => {
  const user = path.join(root, 'user');
  const project = path.join(root, 'project');
  const perUser = { HOME: user, XDG_STATE_HOME: '', TREADLE_HOME: '' };
  mkdirSync(path.join(project, '.treadle', 'pipeline-runs'), { recursive: true });

  // A loop's runs folder is not an older version's state: no warning.
  const quiet = await treadleIn(project, ['--help'], perUser);
  expect(quiet.stderr).toBe('');
  expect(quiet.stdout).toContain(
    `Local state (blobs, call log, task list): ${user}/.local/state/treadle (TREADLE_HOME).`,
  );

  writeFileSync(path.join(project, '.treadle', 'calls.sqlite'), '');
  const warned = await treadleIn(project, ['pipelines'], perUser);
  expect(warned.code).toBe(0);
  expect(warned.stderr).toBe(
    `treadle: ${project}/.treadle holds state from an older version, which now keeps it in ` +
      `${user}/.local/state/treadle; to keep using it, set TREADLE_HOME=${project}/.treadle\n`,
  );
  expect((await treadleIn(project, ['pipelines'], { TREADLE_HOME: path.join(project, '.treadle') })).stderr).toBe('');
});
