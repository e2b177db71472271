/**
 * Issue 37 §1, code validators and revisers from the CLI (seed 002): `treadle worker` (the core queue, what
 * Treadle ships) beside a custom worker process that registers a validator and a reviser of its own on its
 * implementations queue, as docs/stages/contracts.md runs them. Cases: `treadle run --file` of a contract whose
 * `task_queue` names that queue completes, the validate and revise calls run there, and only the rejected
 * items are revised and validated again (before, `run` exited 2 "unknown validator" and the custom worker
 * refused to start: "an implementations queue serves stages, gates and action types"); without a queue,
 * `run`, `validate` and `TreadleClient.start` list the names and say to name one; a name the queue's workers
 * do not register fails the consuming stage, saying where to register it.
 */
import { Client, Connection } from '@temporalio/client';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { TreadleClient } from '../../src/client';
import { BUILT_IN_IMPLEMENTATIONS } from '../../src/pipelines/catalog';
import { FileBlobStore } from '../../src/storage/blob-store';
import type { Json } from '../../src/model/shapes';
import { runCommand, showRun, TREADLE_BIN as BIN, type CliRun } from '../support/cli';
import { eventually, testAddress } from '../support/harness';
import { pollerCount, stopProcess } from '../support/processes';
import { startTreadleWorker, type TreadleWorkerProcess } from '../support/worker-process';

const CONTRACTS_WORKER = path.join(__dirname, '..', 'fixtures', 'queues', 'contracts-worker.js');

let root: string;
let env: NodeJS.ProcessEnv;
let custom: { child: ChildProcess; log: string };
let core: TreadleWorkerProcess;
let connection: Connection;
let client: TreadleClient;
const suffix = Math.random().toString(36).slice(2, 10);
const coreQueue = `contracts-core-${suffix}`;
const contractsQueue = `contracts-q-${suffix}`;

/**
 * Seed 002's 1 → 2 boundary: the SolutionDesigner validates the OpportunityPM's briefs with the custom
 * worker's `actionability` validator, and the producer revises rejected ones with its `name-surface` reviser.
 */
function discovery(contract: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    name: 'discovery',
    stages: [
      { name: 'opportunity_pm', run: 'scripted' },
      { name: 'solution_designer', run: 'scripted', depends_on: ['opportunity_pm'] },
    ],
    contracts: [
      {
        from: 'opportunity_pm',
        to: 'solution_designer',
        items: 'briefs',
        item_id: 'affected_area',
        validate: 'actionability',
        revise: 'name-surface',
        max_retries: 2,
        ...contract,
      },
    ],
  };
}

/** Writes `spec` as a YAML file in the test's folder and returns its path. */
function specFile(name: string, spec: Record<string, unknown>): string {
  const file = path.join(root, `${name}.yaml`);
  writeFileSync(file, YAML.stringify(spec));
  return file;
}

/** The OpportunityPM's briefs, as the scripted stage produces them: only `checkout` names a surface. */
const BRIEFS = [
  { affected_area: 'checkout', problem: 'payment button does nothing', surface: 'checkout page' },
  { affected_area: 'search', problem: 'glitches and performance issues' },
  { affected_area: 'login', problem: 'sessions expire' },
];
const INPUT = { script: { opportunity_pm: [{ output: { briefs: BRIEFS } }] } };

/** Runs `treadle args…` to its end with the shared environment. */
function treadle(args: string[]): Promise<CliRun> {
  return runCommand(process.execPath, [BIN, ...args], { cwd: root, env, timeoutMs: 90_000 });
}

/** `treadle run --file <file> --input @input.json --id <id> --wait`. */
function runWaited(file: string, id: string): Promise<CliRun> {
  return treadle(['run', '--file', file, '--input', `@${path.join(root, 'input.json')}`, '--id', id, '--wait']);
}

beforeAll(async () => {
  root = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'contract-queues-'));
  const settings = /^(TREADLE_|TEMPORAL_|ANTHROPIC_|OTEL_|CLAUDE_)/;
  env = {
    ...Object.fromEntries(Object.entries(process.env).filter(([name]) => !settings.test(name))),
    TEMPORAL_ADDRESS: testAddress(),
    TREADLE_TASK_QUEUE: coreQueue,
    TREADLE_HOME: path.join(root, 'home'),
    TREADLE_AGENT: 'scripted',
  };
  writeFileSync(path.join(root, 'input.json'), JSON.stringify(INPUT));
  connection = await Connection.connect({ address: testAddress() });
  client = new TreadleClient(new Client({ connection }), {
    taskQueue: coreQueue,
    known: BUILT_IN_IMPLEMENTATIONS,
    blobs: new FileBlobStore(path.join(root, 'home', 'blobs')),
  });
  core = await startTreadleWorker({ env, cwd: root });
  const child = spawn(process.execPath, [CONTRACTS_WORKER], {
    cwd: root,
    env: { ...env, CONTRACTS_QUEUE: contractsQueue, TREADLE_TEST_BUNDLE: process.env.TREADLE_TEST_BUNDLE },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  custom = { child, log: '' };
  child.stdout!.on('data', (d: Buffer) => (custom.log += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (custom.log += d.toString()));
  await eventually(
    async () => {
      if (child.exitCode !== null) throw new Error(`the contracts worker exited:\n${custom.log}`);
      return (await pollerCount(connection, coreQueue, 1)) >= 2 &&
        (await pollerCount(connection, contractsQueue, 2)) >= 1
        ? true
        : undefined;
    },
    150_000,
    'both workers polling',
  );
}, 180_000);

afterAll(async () => {
  if (custom) await stopProcess(custom.child);
  await core?.stop();
  await connection?.close();
}, 60_000);

/** The briefs the consuming stage received (the scripted stage's artefact names its upstream). */
async function received(id: string): Promise<Record<string, Json>[]> {
  const result = await client.result(id);
  const artefact = (await client.readArtefact(result.artefacts.solution_designer)) as {
    upstream: Record<string, Json>;
  };
  const upstream = (await client.readArtefact(artefact.upstream.opportunity_pm as Json)) as {
    briefs: Record<string, Json>[];
  };
  return upstream.briefs;
}

it("runs a contract's code validator and reviser on their worker's queue from `treadle run`: only the rejected items are revised", async () => {
  const id = `discovery-${suffix}`;
  const file = specFile('routed', discovery({ task_queue: contractsQueue }));
  const run = await runWaited(file, id);
  expect({ code: run.code, log: showRun(run) }).toEqual({ code: 0, log: expect.any(String) });

  const briefs = await received(id);
  const pid = custom.child.pid!;
  expect(briefs).toEqual([
    BRIEFS[0],
    {
      ...BRIEFS[1],
      surface: 'search settings page',
      revised: { by: pid, because: 'search: no concrete surface a developer could open' },
    },
    {
      ...BRIEFS[2],
      surface: 'login settings page',
      revised: { by: pid, because: 'login: no concrete surface a developer could open' },
    },
  ]);
  // Round 0 validates the three briefs; round 1 only the two revised ones.
  const rounds = (await client.events(id))
    .filter((e) => e.type === 'InputValidation' && typeof e.details?.round === 'number' && !e.details.final)
    .map((e) => [e.details!.round, e.details!.validated, e.details!.rejected, e.details!.revised ?? null]);
  expect(rounds).toEqual([
    [0, 3, 2, null],
    [1, 2, 0, 2],
  ]);
  expect((await client.getState(id)).stages.solution_designer!.qualityFlags).toEqual({
    items_produced: 3,
    validation_rejections: 2,
    validation_retries: 1,
  });
  // The validate and revise calls went to the contract's queue; the final list was made on the item's own.
  const history = (await client.client.workflow.getHandle(id).fetchHistory()).events ?? [];
  const queues = history
    .map((e) => e.activityTaskScheduledEventAttributes)
    .filter((a) => a?.activityType?.name?.startsWith('treadle.contract'))
    .map((a) => `${a!.activityType!.name} on ${a!.taskQueue!.name}`);
  expect(queues.sort()).toEqual(
    [
      `treadle.contractValidate on ${contractsQueue}`,
      `treadle.contractRevise on ${contractsQueue}`,
      `treadle.contractRevise on ${contractsQueue}`,
      `treadle.contractValidate on ${contractsQueue}`,
      `treadle.contractFinalize on ${coreQueue}`,
    ].sort(),
  );
}, 120_000);

it("accepts the names with the consuming stage's or the pipeline's queue, and without any queue lists them and names the fix", async () => {
  const hint =
    'Implementations Treadle does not ship run on a queue of their own: name the task_queue their worker polls ' +
    '(on the stage or the contract, or on the pipeline for all of them';
  const problems =
    '  - contracts[0] (opportunity_pm → solution_designer): validate: unknown validator "actionability" (registered: llm)\n' +
    '  - contracts[0] (opportunity_pm → solution_designer): revise: unknown reviser "name-surface" (registered: llm)';
  const bare = specFile('bare', discovery());
  const run = await treadle(['run', '--file', bare, '--input', '{}']);
  expect(run.code).toBe(2);
  expect(run.stderr).toContain(`pipeline discovery is invalid:\n${problems}\n${hint}`);
  const validate = await treadle(['validate', bare]);
  expect(validate.code).toBe(1);
  expect(validate.stderr).toContain(hint);
  await expect(client.start(discovery(), INPUT, { id: `bare-${suffix}` })).rejects.toThrow(`${problems}\n${hint}`);

  const onStage = discovery();
  (onStage.stages as Record<string, unknown>[])[1]!.task_queue = contractsQueue;
  for (const [name, spec] of [
    ['on-stage', onStage],
    ['on-pipeline', { ...discovery(), task_queue: contractsQueue }],
  ] as const) {
    const file = specFile(name, spec);
    expect(await treadle(['validate', file])).toEqual({
      code: 0,
      stdout: `${file}: pipeline discovery is valid (2 stages)\n`,
      stderr: '',
    });
  }
  // The consuming stage's queue routes the contract: the item completes with the briefs revised there.
  const id = `on-stage-${suffix}`;
  await client.start(onStage, INPUT, { id });
  const briefs = await received(id);
  expect(briefs.map((b) => b.surface)).toEqual(['checkout page', 'search settings page', 'login settings page']);
}, 120_000);

it("fails the consuming stage when the queue's workers do not register the validator or the reviser, saying where to register it", async () => {
  for (const [role, contract] of [
    ['validator', { validate: 'clarity' }],
    ['reviser', { revise: 'rewrite' }],
  ] as const) {
    const id = `unknown-${role}-${suffix}`;
    const name = role === 'validator' ? 'clarity' : 'rewrite';
    const file = specFile(`unknown-${role}`, discovery({ ...contract, task_queue: contractsQueue }));
    const run = await runWaited(file, id);
    expect({ code: run.code, log: showRun(run) }).toEqual({ code: 1, log: expect.any(String) });
    const result = await client.result(id);
    expect(result.status).toBe('failed');
    expect(result.failedStages).toEqual(['solution_designer']);
    const registered = role === 'validator' ? 'actionability, llm' : 'llm, name-surface';
    expect(result.stageErrors?.solution_designer).toContain(
      `opportunity_pm → solution_designer: unknown contract ${role} "${name}" on task queue ${contractsQueue} ` +
        `(its workers register: ${registered}): register it with registry.${role}('${name}', …) on every worker ` +
        `polling ${contractsQueue}, or name as the contract's task_queue the queue whose workers register it`,
    );
  }
}, 120_000);

it('a worker whose implementations queue would serve nothing says so, exit 2 (not "Cannot close connection while Workers hold a reference to it")', async () => {
  const lib = path.join(__dirname, '..', '..', 'lib', 'index.js');
  const script =
    `require(${JSON.stringify(lib)}).runWorker({ implementationsQueue: 'nothing-here', ` +
    `workflowBundle: { codePath: process.env.TREADLE_TEST_BUNDLE } }).catch((error) => {` +
    `process.stderr.write(error.message + '\\n'); process.exit(error.code === 'config' ? 2 : 1); });`;
  const run = await runCommand(process.execPath, ['-e', script], {
    cwd: root,
    env: { ...env, TREADLE_TEST_BUNDLE: process.env.TREADLE_TEST_BUNDLE },
    timeoutMs: 90_000,
  });
  expect(run.stderr).toContain(
    'the implementations queue nothing-here would serve nothing: the registry and approvalActions add no stage, gate, validator, reviser or action type to what Treadle ships',
  );
  expect(run.stderr).not.toContain('Cannot close connection');
  expect(run.code).toBe(2);
}, 120_000);
