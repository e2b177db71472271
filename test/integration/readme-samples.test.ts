/**
 * Every fenced code block of the documentation runs as written, as a user would run it, against the run's dev
 * server and one real worker (`treadle worker`, started in a fresh project folder):
 * - TypeScript: type-checked together (tsc, strict) in a project where `treadle` resolves to the build through
 *   node_modules/treadle, then executed with node; `<!-- sample: worker -->` blocks must come up and poll
 *   their task queue, and are then stopped;
 * - YAML: `treadle validate`; a block that is part of a pipeline says so, `<!-- sample: fragment -->` (made
 *   a pipeline of its own: a list is its stages, a name is added when missing) or `<!-- sample: fragment
 *   examples/x.yaml -->` (merged into that pipeline: stages replaced by name, other keys replaced);
 * - a limits file, `<!-- sample: limits-file -->`: read by the worker's own reader (`readLimitsFile`), no problem;
 * - a notifications file, `<!-- sample: notify-file -->`: read by the worker's own reader (`readNotifyFile`, with its
 *   `secret_env` variables set), no problem;
 * - shell: run by bash in that project (with `examples/` linked in), `npx treadle` being the built CLI;
 * - anything else, and blocks that cannot run here, carry `<!-- sample: not-run (reason) -->`: counted and
 *   listed. A block the test cannot classify fails it.
 * Also: the approval sample's `with:` makes requests from elements shaped as it describes.
 */
import { Connection } from '@temporalio/client';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { readLimitsFile } from '../../src/capacity/worker/limits-file';
import { readNotifyFile } from '../../src/notify/worker/settings-file';
import { runCli, runCommand, showRun, TREADLE_BIN } from '../support/cli';
import { readMarkdown, type MarkdownSample } from '../support/markdown-samples';
import { eventually, startHarness, testAddress, type Harness } from '../support/harness';
import { pollerCount } from '../support/processes';
import { startTreadleWorker, type TreadleWorkerProcess } from '../support/worker-process';

const ROOT = path.join(__dirname, '..', '..');
/** The Markdown files whose samples must run: README.md and everything under docs/. */
const DOCUMENTS = ['README.md', ...markdownUnder('docs')];
const SHELL_LANGS = new Set(['sh', 'bash', 'shell']);
const TS_LANGS = new Set(['ts', 'typescript']);
const YAML_LANGS = new Set(['yaml', 'yml']);

function markdownUnder(folder: string): string[] {
  if (!existsSync(path.join(ROOT, folder))) return [];
  return readdirSync(path.join(ROOT, folder), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.md'))
    .map((entry) => path.relative(ROOT, path.join(entry.parentPath, entry.name)))
    .sort();
}

/** What the test does with a block. */
type Plan =
  | { kind: 'not-run'; reason: string }
  | { kind: 'typescript'; worker: boolean }
  | { kind: 'pipeline'; fragment: boolean; into?: string }
  | { kind: 'limits' }
  | { kind: 'notify' }
  | { kind: 'shell' };

/** The plan for a block, or the reason it cannot be classified (which fails the test). */
function planFor(sample: MarkdownSample): Plan | { unclassified: string } {
  const marker = sample.marker;
  if (marker?.mode === 'not-run') {
    if (!marker.reason) return { unclassified: 'a not-run marker needs its reason in parentheses' };
    return { kind: 'not-run', reason: marker.reason };
  }
  if (TS_LANGS.has(sample.lang)) {
    if (!marker) return { kind: 'typescript', worker: false };
    if (marker.mode === 'worker') return { kind: 'typescript', worker: true };
  } else if (YAML_LANGS.has(sample.lang)) {
    if (marker?.mode === 'limits-file') return { kind: 'limits' };
    if (marker?.mode === 'notify-file') return { kind: 'notify' };
    if (marker?.mode === 'fragment') {
      return { kind: 'pipeline', fragment: true, ...(marker.argument ? { into: marker.argument } : {}) };
    }
    if (!marker) {
      const parsed: unknown = YAML.parse(sample.code);
      const whole = isRecord(parsed) && typeof parsed.name === 'string' && Array.isArray(parsed.stages);
      if (whole) return { kind: 'pipeline', fragment: false };
      return { unclassified: 'YAML that is not a whole pipeline (name and stages) needs a `fragment` marker' };
    }
  } else if (SHELL_LANGS.has(sample.lang)) {
    // Comments may name placeholders (`{ <name>: … }`); commands may not.
    const commands = sample.code.replace(/(^|\s)#.*$/gm, '');
    const placeholder = /<[a-z][^>\s]*>/i.exec(commands);
    if (marker) return { unclassified: `shell blocks take no marker but not-run (got "${marker.mode}")` };
    if (placeholder) {
      const why = 'a shell block runs as written (give a real value, or mark it not-run)';
      return { unclassified: `${placeholder[0]} is a placeholder: ${why}` };
    }
    return { kind: 'shell' };
  } else if (!marker) {
    return { unclassified: `a block in "${sample.lang || 'no language'}" cannot run: mark it not-run with the reason` };
  }
  return { unclassified: `marker "${marker.mode}" does not apply to a ${sample.lang || 'bare'} block` };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A file name (and pipeline name) for a block, unique across the documents: `sample-readme-55`. */
const stem = (s: MarkdownSample): string => {
  const document = path
    .relative(ROOT, s.file)
    .replace(/\.md$/i, '')
    .replace(/[^A-Za-z0-9]+/g, '-')
    .toLowerCase();
  return `sample-${document}-${s.line}`;
};
const where = (s: MarkdownSample): string => `${path.relative(ROOT, s.file)}:${s.line} (${s.section})`;

const samples = DOCUMENTS.flatMap((doc) => readMarkdown(path.join(ROOT, doc)).samples);
const planned = samples.map((sample) => ({ sample, plan: planFor(sample) }));
const ofKind = <K extends Plan['kind']>(kind: K) =>
  planned.flatMap(({ sample, plan }) =>
    'kind' in plan && plan.kind === kind ? [{ sample, plan: plan as Extract<Plan, { kind: K }> }] : [],
  );

let project: string;
let env: NodeJS.ProcessEnv;
let worker: TreadleWorkerProcess | undefined;
let connection: Connection;

/** Waits until some worker polls `taskQueue` for workflow tasks. */
async function pollerOn(taskQueue: string, timeoutMs: number, alive: () => boolean): Promise<void> {
  await eventually(
    async () => {
      if (!alive()) throw new Error('the worker process exited');
      return (await pollerCount(connection, taskQueue)) > 0 ? true : undefined;
    },
    timeoutMs,
    `a worker polling ${taskQueue}`,
  );
}

beforeAll(async () => {
  connection = await Connection.connect({ address: testAddress() });
  // A user's project: its own folder, the package linked in as an install would.
  project = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'readme-project-'));
  mkdirSync(path.join(project, 'node_modules', '@types'), { recursive: true });
  symlinkSync(ROOT, path.join(project, 'node_modules', 'treadle'));
  symlinkSync(path.join(ROOT, 'node_modules', 'zod'), path.join(project, 'node_modules', 'zod'));
  symlinkSync(path.join(ROOT, 'node_modules', '@types', 'node'), path.join(project, 'node_modules', '@types', 'node'));
  symlinkSync(path.join(ROOT, 'examples'), path.join(project, 'examples'));
  const manifest = { name: 'readme-samples', private: true, type: 'module' };
  writeFileSync(path.join(project, 'package.json'), JSON.stringify(manifest));
  const shims = path.join(project, '.shims');
  mkdirSync(shims);
  // `npx treadle` in README is the package's own CLI; nothing else may be fetched by npx.
  writeFileSync(
    path.join(shims, 'npx'),
    [
      '#!/bin/sh',
      `if [ "$1" = treadle ]; then shift; exec "${process.execPath}" "${TREADLE_BIN}" "$@"; fi`,
      'echo "npx $1: README samples run only npx treadle" >&2',
      'exit 127',
      '',
    ].join('\n'),
    { mode: 0o755 },
  );
  // Only the configuration a user would have: the test's own TREADLE_* settings (call log, blob dir) stay out.
  const settings = /^(TREADLE_|TEMPORAL_|ANTHROPIC_|OTEL_|CLAUDE_)/;
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([name]) => !settings.test(name)));
  env = {
    ...inherited,
    PATH: `${shims}${path.delimiter}${path.dirname(process.execPath)}${path.delimiter}${process.env.PATH ?? ''}`,
    TEMPORAL_ADDRESS: testAddress(),
    TREADLE_TASK_QUEUE: `readme-${Math.random().toString(36).slice(2, 10)}`,
    // A user's per-user home holds the state; the test's is its own folder, never the real one.
    TREADLE_HOME: mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'readme-home-')),
    // As docs/stages/tdd.md and loop.md say to start the worker: TDD repositories and loops in the project.
    TREADLE_TDD_REPOS: project,
    TREADLE_LOOP_WORKSPACE: project,
    // A user's git knows who they are; the test machine's may not.
    GIT_AUTHOR_NAME: 'Readme Reader',
    GIT_AUTHOR_EMAIL: 'reader@localhost',
    GIT_COMMITTER_NAME: 'Readme Reader',
    GIT_COMMITTER_EMAIL: 'reader@localhost',
  };
  worker = await startTreadleWorker({ env, cwd: project });
}, 180_000);

afterAll(async () => {
  await worker?.stop();
  await connection?.close();
}, 60_000);

it('classifies every code block, and lists those that do not run', () => {
  const unclassified = planned.flatMap(({ sample, plan }) =>
    'unclassified' in plan ? [`${where(sample)}: ${plan.unclassified}`] : [],
  );
  expect(unclassified).toEqual([]);
  const notRun = ofKind('not-run').map(({ sample, plan }) => `${where(sample)}: ${plan.reason}`);
  const list = notRun.map((line) => `\n  ${line}`).join('');
  process.stderr.write(`[readme-samples] ${samples.length} blocks; ${notRun.length} not run:${list}\n`);
  expect(samples.length - notRun.length).toBeGreaterThan(notRun.length / 2);
});

it('validates every YAML pipeline with `treadle validate`', async () => {
  const failures: string[] = [];
  for (const { sample, plan } of ofKind('pipeline')) {
    const file = path.join(project, `${stem(sample)}.yaml`);
    writeFileSync(file, plan.fragment ? YAML.stringify(completedFragment(sample, plan.into)) : sample.code);
    const result = await runCli(['validate', file], { cwd: project, env, timeoutMs: 60_000 });
    if (result.code !== 0) failures.push(`${where(sample)}: ${showRun(result)}`);
  }
  expect(failures).toEqual([]);
}, 180_000);

it('reads every notifications file sample as treadle worker reads TREADLE_NOTIFY', () => {
  const failures = ofKind('notify').flatMap(({ sample }) => {
    const file = path.join(project, `${stem(sample)}.yaml`);
    writeFileSync(file, sample.code);
    // The keys are the user's: any value stands for them here.
    const secrets = Object.fromEntries([...sample.code.matchAll(/secret_env:\s*(\w+)/g)].map((m) => [m[1]!, 'key']));
    const read = readNotifyFile(file, secrets);
    return read.ok && read.settings.webhooks.length > 0
      ? []
      : [`${where(sample)}: ${read.ok ? 'no webhooks' : read.problems.join('; ')}`];
  });
  expect(failures).toEqual([]);
});

it('reads every limits file sample as treadle worker reads TREADLE_LIMITS', () => {
  const failures = ofKind('limits').flatMap(({ sample }) => {
    const file = path.join(project, `${stem(sample)}.yaml`);
    writeFileSync(file, sample.code);
    const read = readLimitsFile(file);
    return read.ok && read.limits.limits.length > 0
      ? []
      : [`${where(sample)}: ${read.ok ? 'no limits' : read.problems.join('; ')}`];
  });
  expect(failures).toEqual([]);
});

/** A fragment made a whole pipeline: on its own, or merged into the pipeline file it belongs to. */
function completedFragment(sample: MarkdownSample, into: string | undefined): Record<string, unknown> {
  const fragment: unknown = YAML.parse(sample.code);
  const part = Array.isArray(fragment) ? { stages: fragment } : isRecord(fragment) ? fragment : undefined;
  if (!part) throw new Error(`${where(sample)}: a fragment is a list of stages or a mapping`);
  if (!into) return { name: stem(sample), ...part };
  const base = YAML.parse(readFileSync(path.join(ROOT, into), 'utf8')) as Record<string, unknown>;
  const merged: Record<string, unknown> = { ...base, ...part };
  if (Array.isArray(part.stages)) {
    const stages = [...(base.stages as { name: string }[])];
    for (const stage of part.stages as { name: string }[]) {
      const at = stages.findIndex((s) => s.name === stage.name);
      if (at >= 0) stages[at] = stage;
      else stages.push(stage);
    }
    merged.stages = stages;
  }
  return merged;
}

it('type-checks every TypeScript sample as a project that installed treadle', async () => {
  const typescript = ofKind('typescript');
  for (const { sample } of typescript) writeFileSync(path.join(project, `${stem(sample)}.ts`), sample.code);
  writeFileSync(
    path.join(project, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'nodenext',
        moduleResolution: 'nodenext',
        strict: true,
        skipLibCheck: true,
        types: ['node'],
        outDir: 'out',
      },
      include: ['sample-*.ts'],
    }),
  );
  const tscBin = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  const tsc = await runCommand(process.execPath, [tscBin, '-p', project], { cwd: project, env, timeoutMs: 150_000 });
  expect(tsc.stdout + tsc.stderr).toBe('');
  expect(typescript.length).toBeGreaterThan(0);
}, 180_000);

it('runs every TypeScript sample against the server and the worker', async () => {
  const failures: string[] = [];
  for (const { sample, plan } of ofKind('typescript')) {
    const script = path.join(project, 'out', `${stem(sample)}.js`);
    if (!plan.worker) {
      const result = await runCommand(process.execPath, [script], { cwd: project, env, timeoutMs: 90_000 });
      if (result.code !== 0) failures.push(`${where(sample)}: ${showRun(result)}`);
      continue;
    }
    // A worker runs until stopped: it must come up and poll its queue (one of its own, so it serves nothing else).
    const taskQueue = `readme-worker-${sample.line}-${Math.random().toString(36).slice(2, 8)}`;
    const child = spawn(process.execPath, [script], {
      cwd: project,
      env: { ...env, TREADLE_TASK_QUEUE: taskQueue },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let log = '';
    child.stdout!.on('data', (d: Buffer) => (log += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (log += d.toString()));
    const exited = new Promise((resolve) => child.once('exit', resolve));
    try {
      await pollerOn(taskQueue, 90_000, () => child.exitCode === null);
    } catch (error) {
      failures.push(`${where(sample)}: ${(error as Error).message}\n${log}`);
    }
    child.kill('SIGTERM');
    await exited;
  }
  expect(failures).toEqual([]);
}, 300_000);

it('runs every shell sample in the project, with npx treadle the built CLI', async () => {
  const failures: string[] = [];
  for (const { sample } of ofKind('shell')) {
    const bash = ['-e', '-o', 'pipefail', '-c', sample.code];
    const result = await runCommand('bash', bash, { cwd: project, env, timeoutMs: 150_000 });
    // `run --wait` and `tdd --wait` exit 1 for a failed item (and 3 at a person's turn); the status line is checked too.
    const failedItem = / · pipeline \S+ · failed$|^\S+: failed \(phase /m.test(result.stdout);
    if (result.code !== 0 || failedItem) failures.push(`${where(sample)}: ${showRun(result)}`);
  }
  expect(failures).toEqual([]);
}, 400_000);

describe('the approval sample', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.shutdown();
  });

  it('makes requests from elements shaped as its with: describes', async () => {
    const approval = samples.find((s) => YAML_LANGS.has(s.lang) && /type: approval/.test(s.code));
    expect(approval).toBeDefined();
    type ApprovalStage = { name: string; depends_on: string[]; with: Record<string, string> };
    const [stage] = YAML.parse(approval!.code) as ApprovalStage[];
    const producer = stage!.depends_on[0]!;
    const field = stage!.with.context_field;
    // An element is the action's payload, with the field the sample names as its own context.
    const element = { title: 'Book the venue', ...(field ? { [field]: 'from the weekly meeting' } : {}) };
    const spec = { name: 'readme-approval', stages: [{ name: producer, run: 'scripted' }, stage] };
    const id = h.id('approval');
    await h.client.start(spec, { script: { [producer]: [{ output: { [stage!.with.items!]: [element] } }] } }, { id });
    const state = await eventually(
      async () => {
        const s = await h.client.getState(id);
        return s.status === 'running' ? undefined : s;
      },
      30_000,
      'the approval step to settle',
    );
    const outcome = { status: state.status, error: state.stages[stage!.name]?.error };
    expect(outcome).toEqual({ status: 'waiting_approval', error: undefined });
    const [request] = state.approvals ?? [];
    expect(request?.payload).toEqual(element);
    expect(field).toBeDefined(); // the sample shows context_field; its element's field becomes the context
    expect(request?.context).toContain('from the weekly meeting');
    // Leave nothing pending for other test files' namespace-wide listings.
    await h.client.decideApproval(request!.id, 'reject', { reason: 'the sample is checked' });
  }, 60_000);
});
