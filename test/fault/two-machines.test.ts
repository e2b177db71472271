/**
 * Issue 26 §6, many machines: two "machines" A and B, each a working directory and a TREADLE_HOME of its own,
 * sharing only Temporal, an S3-protocol store (s3rver behind the conditional-write proxy, test/support/s3.ts)
 * and the PostgreSQL call log (test/support/postgres.ts), set up as docs/deploy.md says. Both run
 * `treadle worker` on one core queue; A also holds a git repository and a loop workspace, served by a second
 * worker on A's own queue (docs/stages/tdd.md's recipe); B holds neither. A third directory and home, "the
 * laptop", starts everything with the CLI: email-triage (llm, fan_out, implementations, approval),
 * review-demo (a gate, escalation to a person, a sign-off), discovery (quality contracts), a loop pipeline and
 * a TDD tree on A's queue. Cases: A's host worker is killed with SIGKILL once the tree is mid-way (a child
 * merged, the root not) and restarted with the same settings, and the tree merges; B's core worker is killed
 * with SIGKILL while items it may hold wait for people, and restarted; every item completes, and both core
 * workers ran some of their activities; `treadle calls` with A's settings and with B's shows the same calls,
 * per pipeline as many as each item and the tree counted; the large artefacts are in the bucket, and no home
 * holds a blob or a call log of its own.
 */
import { Client, Connection } from '@temporalio/client';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { TreadleClient } from '../../src/client';
import { isBlobRef } from '../../src/model/shapes';
import { S3BlobStore } from '../../src/storage/s3-blob-store';
import { runCli, type CliRun } from '../support/cli';
import { eventually, testAddress } from '../support/harness';
import { startPostgres, type TestPostgres } from '../support/postgres';
import { S3_CREDENTIALS, startS3, type TestS3 } from '../support/s3';
import { startTreadleWorker, type TreadleWorkerOptions, type TreadleWorkerProcess } from '../support/worker-process';

const ROOT = path.join(__dirname, '..', '..');
const EXAMPLES = path.join(ROOT, 'examples');

const suffix = Math.random().toString(36).slice(2, 10);
const CORE_QUEUE = `machines-core-${suffix}`;
const HOST_A_QUEUE = `machines-host-a-${suffix}`;
const PREFIX = `machines-${suffix}/`;
const ids = {
  triage: `machines-triage-${suffix}`,
  review: `machines-review-${suffix}`,
  discovery: `machines-discovery-${suffix}`,
  loop: `machines-loop-${suffix}`,
  tree: `machines-tdd-${suffix}`,
};

/** One machine: its directory, its home and the settings every process on it gets. */
interface Machine {
  cwd: string;
  home: string;
  env: NodeJS.ProcessEnv;
}

let root: string;
let pg: TestPostgres;
let s3: TestS3;
let machines: Record<'a' | 'b' | 'laptop', Machine>;
let connection: Connection;
let temporal: Client;
let client: TreadleClient;
/** The running workers by role; a role's options restart it as it was, and its earlier processes are kept. */
const workers = new Map<
  string,
  { options: TreadleWorkerOptions; process: TreadleWorkerProcess; earlier: TreadleWorkerProcess[] }
>();

const gitEnv = {
  GIT_AUTHOR_NAME: 'Test',
  GIT_AUTHOR_EMAIL: 'test@localhost',
  GIT_COMMITTER_NAME: 'Test',
  GIT_COMMITTER_EMAIL: 'test@localhost',
};

/** A machine's folders and settings: a user's shell (none of the test run's own settings) plus the shared state. */
function machine(name: string, callLog: string): Machine {
  const cwd = path.join(root, name);
  const home = path.join(root, `${name}-home`);
  mkdirSync(cwd);
  const settings = /^(TREADLE_|TEMPORAL_|ANTHROPIC_|OTEL_|CLAUDE_|AWS_)/;
  return {
    cwd,
    home,
    env: {
      ...Object.fromEntries(Object.entries(process.env).filter(([key]) => !settings.test(key))),
      ...gitEnv,
      ...s3.env(PREFIX),
      TEMPORAL_ADDRESS: testAddress(),
      TREADLE_TASK_QUEUE: CORE_QUEUE,
      TREADLE_HOME: home,
      TREADLE_CALL_LOG: callLog,
      TREADLE_AGENT: 'scripted',
    },
  };
}

/** `treadle …` on a machine, in its directory, with `extra` over its settings. */
function treadle(on: Machine, args: string[], extra: NodeJS.ProcessEnv = {}): Promise<CliRun> {
  return runCli(args, { cwd: on.cwd, env: { ...on.env, ...extra }, timeoutMs: 200_000 });
}

/** Starts (or restarts, with the same settings) the worker playing `role`. */
async function startWorker(role: string, options?: TreadleWorkerOptions): Promise<void> {
  const before = workers.get(role);
  const chosen = options ?? before!.options;
  const earlier = before ? [...before.earlier, before.process] : [];
  workers.set(role, { options: chosen, process: await startTreadleWorker(chosen), earlier });
}

/** Kills a worker with SIGKILL, as a lost machine goes, and starts it again with the same settings. */
async function killAndRestart(role: string): Promise<void> {
  await workers.get(role)!.process.kill('SIGKILL');
  await startWorker(role);
}

/** Every worker's log, for a failure's message. */
function workerLogs(): string {
  return [...workers]
    .flatMap(([role, w]) => [...w.earlier, w.process].map((p) => `--- worker ${role} (pid ${p.child.pid})\n${p.log()}`))
    .join('\n');
}

/**
 * Runs a decision command (`review`, `approve`) until it is sent, as its message asks: for about 10 s after a worker
 * is killed, Temporal hands its items' queries to the dead worker's sticky queue, so the command says "was not
 * sent … send it again" (exit 1, nothing sent) until another worker takes the item (docs/cli.md).
 */
async function sendDecision(on: Machine, args: string[]): Promise<CliRun> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const run = await treadle(on, args);
    if (run.code !== 1 || !run.stderr.includes('was not sent') || Date.now() > deadline) return run;
  }
}

/** A run's output and every worker's log, when it did not exit as expected. */
function expectExit(run: CliRun, code: number, what: string): void {
  if (run.code !== code)
    throw new Error(`${what}: exit ${run.code}, expected ${code}\n${run.stdout}\n${run.stderr}\n${workerLogs()}`);
}

beforeAll(async () => {
  root = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'two-machines-'));
  [pg, s3] = await Promise.all([startPostgres(), startS3()]);
  const callLog = await pg.createDatabase('machines');
  machines = { a: machine('a', callLog), b: machine('b', callLog), laptop: machine('laptop', callLog) };
  // A's repository, in A's directory: only A's host worker may use it.
  execFileSync('git', ['init', '-q', '-b', 'main', 'textkit'], { cwd: machines.a.cwd });
  execFileSync('git', ['-C', 'textkit', 'commit', '-q', '--allow-empty', '-m', 'init'], {
    cwd: machines.a.cwd,
    env: { ...process.env, ...gitEnv },
  });
  connection = await Connection.connect({ address: testAddress() });
  temporal = new Client({ connection });
  client = new TreadleClient(temporal, {
    taskQueue: CORE_QUEUE,
    blobs: new S3BlobStore({
      bucket: s3.bucket,
      prefix: PREFIX,
      endpoint: s3.endpoint,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: S3_CREDENTIALS,
    }),
  });
  await Promise.all([
    startWorker('a-core', { env: machines.a.env, cwd: machines.a.cwd }),
    startWorker('a-host', {
      env: { ...machines.a.env, TREADLE_TASK_QUEUE: HOST_A_QUEUE, TREADLE_TDD_REPOS: machines.a.cwd },
      cwd: machines.a.cwd,
    }),
    startWorker('b-core', { env: machines.b.env, cwd: machines.b.cwd }),
  ]);
}, 180_000);

afterAll(async () => {
  for (const { process: worker } of workers.values()) await worker.stop();
  await client?.close();
  await connection?.close();
  await s3?.close();
  await pg?.stop();
}, 60_000);

it('runs every stage kind across two machines that share S3 and PostgreSQL, through SIGKILLs of a host and a core worker', async () => {
  const { a, b, laptop } = machines;
  const onHostA = { TREADLE_TASK_QUEUE: HOST_A_QUEUE };
  // review-demo's sample script, with drafts large enough to be stored in the blob store.
  const reviewInput = JSON.parse(readFileSync(path.join(EXAMPLES, 'review-demo.input.json'), 'utf8')) as {
    script: { draft: Record<string, unknown>[] };
  };
  reviewInput.script.draft = reviewInput.script.draft.map((step) => ({ ...step, outputBytes: 20_000 }));
  writeFileSync(path.join(laptop.cwd, 'review.json'), JSON.stringify(reviewInput));

  const runs = {
    tree: treadle(
      laptop,
      [
        'tdd',
        path.join(EXAMPLES, 'tdd', 'textkit.yaml'),
        '--repo',
        path.join(a.cwd, 'textkit'),
        '--replies',
        path.join(EXAMPLES, 'tdd', 'textkit.replies.yaml'),
        '--id',
        ids.tree,
        '--wait',
      ],
      onHostA,
    ),
    loop: treadle(
      laptop,
      [
        'loop',
        path.join(EXAMPLES, 'loops', 'full-ideation', 'pipeline.yaml'),
        '--replies',
        path.join(EXAMPLES, 'loops', 'full-ideation', 'replies.yaml'),
        '--id',
        ids.loop,
        '--wait',
      ],
      onHostA,
    ),
    triage: treadle(laptop, ['run', 'email-triage', '--id', ids.triage, '--wait']),
    discovery: treadle(laptop, ['run', 'discovery', '--id', ids.discovery, '--wait']),
    review: treadle(laptop, ['run', 'review-demo', '--input', '@review.json', '--id', ids.review]),
  };

  // Mid-tree: a child has merged into the root's branch, the root has not merged.
  await eventually(
    async () => {
      const root = await client.getTddState(ids.tree);
      return root.status === 'running' && root.children.some((c) => c.status === 'merged') ? true : undefined;
    },
    120_000,
    'a child of the tree merged, the root not yet',
  ).catch((error: Error) => {
    throw new Error(`${error.message}\n${workerLogs()}`);
  });
  await killAndRestart('a-host');

  // Items held by the core workers, waiting for people: B's worker goes, and comes back. Once discovery is done,
  // so that no core activity is lost with it: that would only add its timeout (2 minutes for a contract step).
  expectExit(await runs.discovery, 0, 'run discovery --wait');
  await eventually(
    async () => {
      const [review, triage] = await Promise.all([client.getState(ids.review), client.getState(ids.triage)]);
      return review.pendingReviews.some((r) => r.stage === 'draft') && triage.status === 'waiting_approval'
        ? true
        : undefined;
    },
    90_000,
    'review-demo waiting for its draft review, email-triage for its approvals',
  ).catch((error: Error) => {
    throw new Error(`${error.message}\n${workerLogs()}`);
  });
  await killAndRestart('b-core');

  expectExit(await runs.review, 0, 'run review-demo');
  expectExit(await sendDecision(b, ['review', ids.review, 'draft', '--approve', '--reviewer', 'b']), 0, 'review draft');
  expectExit(await runs.triage, 3, 'run email-triage --wait');
  const approvals = JSON.parse(
    (await treadle(a, ['approve', 'list', '--json', '--pipeline', 'email-triage'])).stdout,
  ) as { id: string; itemId: string }[];
  const mine = approvals.filter((r) => r.itemId === ids.triage);
  expect(mine.length).toBeGreaterThan(0);
  for (const request of mine)
    expectExit(await sendDecision(a, ['approve', request.id, '--by', 'a']), 0, `approve ${request.id}`);
  await eventually(
    async () =>
      (await client.getState(ids.review)).pendingReviews.some((r) => r.stage === 'publish') ? true : undefined,
    60_000,
    'review-demo waiting for its sign-off',
  );
  expectExit(await treadle(laptop, ['review', ids.review, 'publish', '--approve']), 0, 'review publish');

  expectExit(await runs.loop, 0, 'loop --wait');
  const tree = await runs.tree;
  expectExit(tree, 0, 'tdd --wait');
  expect(tree.stdout).toContain('\ntextkit: merged (phase done, branch tdd/textkit, depth 0)\n');
  const items = [ids.triage, ids.review, ids.discovery, ids.loop];
  for (const id of items) expect({ id, status: (await client.result(id)).status }).toEqual({ id, status: 'completed' });

  // Every call, once, whichever machine asks: per pipeline, as many as each item and the tree counted themselves
  // (a fan-out's elements log under <pipeline>.<stage>, and their calls are the item's too).
  const usageOf = async (id: string): Promise<number> => (await client.usage(id)).total.calls;
  const counted = {
    discovery: await usageOf(ids.discovery),
    'email-triage': await usageOf(ids.triage),
    'full-ideation': await usageOf(ids.loop),
    tdd: (await client.tddResult(ids.tree)).usage?.calls ?? 0,
  };
  expect(await usageOf(ids.review)).toBe(0);
  for (const [pipeline, calls] of Object.entries(counted))
    expect({ pipeline, made: calls > 0 }).toEqual({ pipeline, made: true });
  for (const by of ['pipeline', 'stage']) {
    const [fromA, fromB] = await Promise.all([a, b].map((on) => treadle(on, ['calls', '--by', by, '--json'])));
    expectExit(fromA!, 0, `calls --by ${by} on A`);
    expect(fromB).toEqual(fromA);
    const logged = JSON.parse(fromA!.stdout) as {
      groups: { group: string; calls: number }[];
      total: { calls: number };
    };
    expect(logged.total.calls).toBe(Object.values(counted).reduce((x, y) => x + y, 0));
    if (by === 'pipeline') {
      const perPipeline: Record<string, number> = {};
      for (const { group, calls } of logged.groups) {
        const pipeline = group.split('.')[0]!;
        perPipeline[pipeline] = (perPipeline[pipeline] ?? 0) + calls;
      }
      expect(perPipeline).toEqual(counted);
    }
  }

  // Both machines ran the core queue's work: activities of the items were started by a worker of each.
  const ranBy = new Set<string>();
  for (const id of [ids.triage, ids.review, ids.discovery]) {
    const history = await temporal.workflow.getHandle(id).fetchHistory();
    for (const event of history.events ?? []) {
      const identity = event.activityTaskStartedEventAttributes?.identity;
      if (identity) ranBy.add(identity.split('@')[0]!);
    }
  }
  const pidsOf = (role: string): string[] =>
    [...workers.get(role)!.earlier, workers.get(role)!.process].map((p) => String(p.child.pid));
  for (const role of ['a-core', 'b-core'])
    expect({ role, ran: pidsOf(role).some((pid) => ranBy.has(pid)) }).toEqual({ role, ran: true });

  // The large artefacts are in the bucket; no machine keeps a blob of its own.
  const keys = new Set(await s3.keysUnder(PREFIX));
  const refs = (await Promise.all(items.map((id) => client.getState(id)))).flatMap((state) =>
    Object.values(state.stages).flatMap((stage) => (isBlobRef(stage.artefact) ? [stage.artefact.ref] : [])),
  );
  expect(refs.length).toBeGreaterThan(0);
  for (const ref of refs) expect(keys).toContain(`${PREFIX}blobs/${ref.slice('sha256:'.length)}`);
  for (const on of [a, b, laptop])
    for (const local of ['blobs', 'calls.sqlite'])
      expect({ home: on.home, local, exists: existsSync(path.join(on.home, local)) }).toEqual({
        home: on.home,
        local,
        exists: false,
      });
}, 300_000);
