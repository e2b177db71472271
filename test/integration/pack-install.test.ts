/**
 * Treadle installs as users install it (issue 26 §5): `npm pack` of the build, installed into a fresh project
 * outside the repository with typescript and @types/node (from the npm cache the repository's own install
 * filled), then
 * - the tarball holds the build, the CLI, the examples the catalog reads and the docs, and no src/, test/ or
 *   bench/; the package's dependencies name no @types package and no test tool;
 * - `npx treadle --help` works there;
 * - a worker and a client written against the package type-check (strict tsc) with what it exports;
 * - that worker comes up on the prebuilt workflow bundle (no bundling at start), prints its ready line, and runs
 *   an item the installed client starts, to completion;
 * - (issue 37 §5) the optional peer dependencies (S3, PostgreSQL, tracing) are not installed, yet all of the above
 *   and `treadle validate` work, and the declarations need none of them; the settings that need one exit 2 with
 *   one line naming the package and an `npm install` command, and after that command they work.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';

const ROOT = path.join(__dirname, '..', '..');
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const NPX = process.platform === 'win32' ? 'npx.cmd' : 'npx';
/** npm install of the tarball and its ~400 dependencies from the cache: about a minute on a busy machine. */
const INSTALL_TIMEOUT_MS = 180_000;
/**
 * The packages `npm install treadle` leaves out (optional peer dependencies, src/config/optional-packages.ts): the S3
 * blob store's, the PostgreSQL call log's and tracing's.
 */
const OPTIONAL_PACKAGES = [
  '@aws-sdk/client-s3',
  'pg',
  '@opentelemetry/exporter-trace-otlp-http',
  '@opentelemetry/resources',
  '@opentelemetry/sdk-trace-base',
  '@opentelemetry/sdk-trace-node',
  '@temporalio/interceptors-opentelemetry',
];
/** The `npm install …` command a missing-package error names (the rest of its one line). */
const INSTALL_COMMAND = /which is not installed: npm install ((?:\S+ ?)+)\n$/;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function run(file: string, args: string[], cwd: string, timeoutMs = 120_000, env = process.env): Promise<Run> {
  return new Promise((resolve) => {
    execFile(file, args, { cwd, env, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) =>
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

const show = (r: Run): string => `exit ${r.code}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`;

/** The custom worker: the generic kinds plus one implementation of the user's, on the test's own task queue. */
const WORKER_TS = `
import {
  defaultRegistry,
  runWorker,
  createBlobStore,
  loadConfig,
  treadleExternalStorage,
  WORKER_READY_LINE,
  type CallLog,
  type StageImplementation,
} from 'treadle';

const shout: StageImplementation = async (ctx) => ({
  outcome: 'completed',
  artefact: { text: String((ctx.input as { text: string }).text).toUpperCase() },
});
const config = loadConfig();
const blobs = createBlobStore(config.blobStore);
// Exported for hand-built clients; typed here so the check covers it.
const storage: ReturnType<typeof treadleExternalStorage> = treadleExternalStorage(blobs);
const callLog: CallLog | null = null;
void storage;
void WORKER_READY_LINE;
runWorker({ registry: defaultRegistry().stage('shout', shout), blobs, callLog, taskQueue: process.env.QUEUE }).catch(
  (error: unknown) => {
    process.stderr.write(String(error) + '\\n');
    process.exit(1);
  },
);
`;

/** The client: starts a one-stage item through the installed package and prints its result. */
const START_TS = `
import { pipeline, TreadleClient, type WorkItemResult } from 'treadle';

async function main(): Promise<void> {
  const client = await TreadleClient.connect({ taskQueue: process.env.QUEUE });
  try {
    const spec = pipeline('shout-it').stage('shout', 'shout').build();
    const { id } = await client.start(spec, { text: 'hello from a fresh project' }, { id: process.env.ITEM });
    const result: WorkItemResult = await client.result(id);
    process.stdout.write(JSON.stringify(result));
  } finally {
    await client.close();
  }
}
main().catch((error: unknown) => {
  process.stderr.write(String(error) + '\\n');
  process.exit(1);
});
`;

const TSCONFIG = {
  compilerOptions: {
    target: 'es2022',
    module: 'node16',
    moduleResolution: 'node16',
    rootDir: 'src',
    strict: true,
    noUncheckedIndexedAccess: true,
    esModuleInterop: true,
    // As `tsc --init` sets it: the SDK's own .d.ts files need types its packages do not export under node16
    // (`ms`); the .d.ts files of Treadle are checked for packages without types separately, below.
    skipLibCheck: true,
    types: ['node'],
    outDir: 'dist',
  },
  include: ['src'],
};

/** The packages (`@scope/name` or `name`) that the .d.ts files under `lib` import. */
function packagesImportedBy(lib: string): Set<string> {
  const names = new Set<string>();
  const files = readdirSync(lib, { recursive: true, withFileTypes: true }).filter(
    (entry) => entry.isFile() && entry.name.endsWith('.d.ts'),
  );
  for (const entry of files) {
    // Comments may quote words as `from "…"`: only the declarations' own imports count.
    const text = readFileSync(path.join(entry.parentPath, entry.name), 'utf8')
      .replace(/\/\*[\s\S]*?\*\//g, '')
      .replace(/^\s*\/\/.*$/gm, '');
    for (const [, specifier] of text.matchAll(/(?:from\s+|import\()['"]([^'".][^'"]*)['"]/g)) {
      if (specifier!.startsWith('node:')) continue;
      const parts = specifier!.split('/');
      names.add(specifier!.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!);
    }
  }
  return names;
}

/** Whether an installed package declares its types itself (`types`/`typings`, or an index.d.ts). */
function hasOwnTypes(packageDir: string): boolean {
  if (!existsSync(path.join(packageDir, 'package.json'))) return false;
  const manifest = JSON.parse(readFileSync(path.join(packageDir, 'package.json'), 'utf8')) as Record<string, unknown>;
  return Boolean(manifest.types ?? manifest.typings) || existsSync(path.join(packageDir, 'index.d.ts'));
}

let dir: string;
let worker: ChildProcess | undefined;

beforeAll(() => {
  // Outside the repository, so nothing resolves through its node_modules.
  dir = mkdtempSync(path.join(os.tmpdir(), 'treadle-pack-'));
});

afterAll(() => {
  if (worker?.exitCode === null) worker.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

it(
  'packs, installs into a fresh project, type-checks and runs a custom worker and client there',
  async () => {
    // The tarball: built already (the test runs lib/), so packing does not rebuild.
    const packed = await run(NPM, ['pack', '--ignore-scripts', '--json', '--pack-destination', dir], ROOT);
    expect(packed.code).toBe(0);
    const [{ filename, files }] = JSON.parse(packed.stdout) as [{ filename: string; files: { path: string }[] }];
    const paths = files.map((f) => f.path);
    expect(paths.filter((p) => /^(src|test|bench)\//.test(p))).toEqual([]);
    expect(paths).toEqual(
      expect.arrayContaining([
        'lib/index.js',
        'lib/index.d.ts',
        'lib/workflow-bundle/manifest.json',
        'lib/workflow-bundle/plain.js',
        'lib/workflow-bundle/traced.js',
        'lib/examples/index.js',
        'bin/treadle.js',
        'examples/review-demo.yaml',
        'docs/sdk.md',
        'README.md',
      ]),
    );
    const manifest = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
      private?: boolean;
      dependencies: Record<string, string>;
      peerDependenciesMeta: Record<string, { optional?: boolean }>;
    };
    expect(manifest.private).toBeUndefined();
    expect(Object.keys(manifest.dependencies).filter((name) => OPTIONAL_PACKAGES.includes(name))).toEqual([]);
    const optionalPeers = Object.entries(manifest.peerDependenciesMeta).filter(([, meta]) => meta.optional);
    expect(optionalPeers.map(([name]) => name).sort()).toEqual([...OPTIONAL_PACKAGES].sort());
    const devOnly = Object.keys(manifest.dependencies).filter((name) =>
      /^@types\/|^(jest|s3rver|typescript|eslint|prettier|esbuild)$|^@swc\//.test(name),
    );
    expect(devOnly).toEqual([]);

    // A fresh project, as a user starts one.
    const project = path.join(dir, 'project');
    mkdirSync(path.join(project, 'src'), { recursive: true });
    expect((await run(NPM, ['init', '-y'], project)).code).toBe(0);
    const install = await run(
      NPM,
      [
        'install',
        path.join(dir, filename),
        'typescript',
        '@types/node@20',
        '--prefer-offline',
        // Install scripts only build better-sqlite3's binding from source (minutes); this worker keeps no call log.
        '--ignore-scripts',
        '--no-audit',
        '--no-fund',
      ],
      project,
      INSTALL_TIMEOUT_MS,
    );
    expect(install.code).toBe(0);

    // npm 7+ installs no optional peer dependency: everything below runs without them.
    expect(OPTIONAL_PACKAGES.filter((name) => existsSync(path.join(project, 'node_modules', name)))).toEqual([]);

    const help = await run(NPX, ['--no-install', 'treadle', '--help'], project);
    expect(`${help.code}\n${help.stdout}`).toMatch(/^0\nUsage: treadle/);
    const validate = await run(
      NPX,
      [
        '--no-install',
        'treadle',
        'validate',
        path.join(project, 'node_modules', 'treadle', 'examples', 'review-demo.yaml'),
      ],
      project,
    );
    expect(show(validate)).toMatch(/^exit 0\n/);

    writeFileSync(path.join(project, 'tsconfig.json'), JSON.stringify(TSCONFIG, null, 2));
    writeFileSync(path.join(project, 'src', 'worker.ts'), WORKER_TS);
    writeFileSync(path.join(project, 'src', 'start.ts'), START_TS);
    const tsc = await run(NPX, ['--no-install', 'tsc', '-p', '.'], project);
    expect(show(tsc)).toBe(show({ code: 0, stdout: '', stderr: '' }));

    // Every package the installed declarations import brings its own types (none needs an @types package the
    // user would have to add).
    const untyped = [...packagesImportedBy(path.join(project, 'node_modules', 'treadle', 'lib'))].filter(
      (name) => !hasOwnTypes(path.join(project, 'node_modules', name)),
    );
    expect(untyped).toEqual([]);

    const queue = `pack-install-${process.pid}-${Date.now()}`;
    const env = {
      ...process.env,
      TEMPORAL_ADDRESS: process.env.TREADLE_TEST_ADDRESS!,
      TREADLE_HOME: path.join(dir, 'home'),
      QUEUE: queue,
      ITEM: `${queue}-item`,
    };
    let log = '';
    worker = spawn(process.execPath, ['dist/worker.js'], { cwd: project, env, stdio: ['ignore', 'pipe', 'pipe'] });
    worker.stdout!.on('data', (chunk: Buffer) => (log += chunk.toString()));
    worker.stderr!.on('data', (chunk: Buffer) => (log += chunk.toString()));
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the worker did not get ready in 60 s:\n${log}`)), 60_000);
      const check = () => {
        if (log.includes('treadle worker: ready')) {
          clearTimeout(timer);
          resolve();
        }
      };
      worker!.stderr!.on('data', check);
      worker!.on('exit', (code) => reject(new Error(`the worker exited ${code}:\n${log}`)));
    });
    // The prebuilt bundle was current, so the worker did not bundle at start.
    expect(log).not.toMatch(/bundling the workflow code/);

    const started = await run(process.execPath, ['dist/start.js'], project, 60_000, env);
    expect(started.code === 0 ? '' : show(started)).toBe('');
    const result = JSON.parse(started.stdout) as { status: string; artefacts: Record<string, unknown> };
    expect(result).toMatchObject({ status: 'completed', artefacts: { shout: { text: 'HELLO FROM A FRESH PROJECT' } } });

    await settingsNeedingOptionalPackages(project, env);

    worker.kill('SIGTERM');
    await new Promise((resolve) => worker!.once('exit', resolve));
  },
  2 * INSTALL_TIMEOUT_MS + 240_000,
);

/**
 * Each setting that needs an optional package, in the project without them: exit 2 and one line naming the setting,
 * the package and an `npm install` command; that command, run as printed, makes every one of them work.
 */
async function settingsNeedingOptionalPackages(project: string, env: NodeJS.ProcessEnv): Promise<void> {
  const treadle = (args: string[], extra: NodeJS.ProcessEnv) =>
    run(NPX, ['--no-install', 'treadle', ...args], project, 60_000, { ...env, ...extra });
  // Nothing listens on port 9 (discard): a configured store or log that got as far as connecting fails otherwise.
  const s3 = { TREADLE_S3_BUCKET: 'treadle-blobs', TREADLE_S3_ENDPOINT: 'http://127.0.0.1:9' };
  const postgres = { TREADLE_CALL_LOG: 'postgres://treadle@127.0.0.1:9/treadle' };
  const tracing = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' };
  const item = env.ITEM!;

  const missing = {
    s3Status: await treadle(['status', item], s3),
    s3Worker: await treadle(['worker'], { ...s3, TREADLE_CALL_LOG: 'off' }),
    postgresCalls: await treadle(['calls'], postgres),
    tracingStatus: await treadle(['status', item], tracing),
    tracingWorker: await treadle(['worker'], { ...tracing, TREADLE_CALL_LOG: 'off' }),
  };
  const s3Line =
    /^The S3 blob store \(TREADLE_BLOB_STORE=s3, or TREADLE_S3_BUCKET set\) needs @aws-sdk\/client-s3, which is not installed: npm install @aws-sdk\/client-s3@\S+\n$/;
  const postgresLine =
    /^A PostgreSQL call log \(TREADLE_CALL_LOG=postgres:\/\/…\) needs pg, which is not installed: npm install pg@\S+\n$/;
  const tracingLine =
    /^Tracing \(OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or createTracing\) needs @\S+, which is not installed: npm install( @opentelemetry\/\S+@\S+){4} @temporalio\/interceptors-opentelemetry@\S+\n$/;
  const stripped = (r: Run) => ({ code: r.code, stderr: r.stderr.replace(/^treadle(?: worker)?: /, '') });
  expect(stripped(missing.s3Status)).toEqual({ code: 2, stderr: expect.stringMatching(s3Line) });
  expect(stripped(missing.s3Worker)).toEqual({ code: 2, stderr: expect.stringMatching(s3Line) });
  expect(stripped(missing.postgresCalls)).toEqual({ code: 2, stderr: expect.stringMatching(postgresLine) });
  expect(stripped(missing.tracingStatus)).toEqual({ code: 2, stderr: expect.stringMatching(tracingLine) });
  expect(stripped(missing.tracingWorker)).toEqual({ code: 2, stderr: expect.stringMatching(tracingLine) });
  // From TypeScript too: createTracing throws the same configuration error.
  const sdk = await run(
    process.execPath,
    [
      '-e',
      "try { require('treadle').createTracing({ spanProcessor: {} }) } catch (e) { console.log(e.code, e.message) }",
    ],
    project,
  );
  expect(sdk.stdout).toMatch(/^config Tracing \(.*\) needs @\S+, which is not installed: npm install /);

  // The commands, as printed (one install for the three).
  const specs = [missing.s3Status, missing.postgresCalls, missing.tracingStatus].flatMap((r) =>
    INSTALL_COMMAND.exec(r.stderr)![1]!.trim().split(' '),
  );
  const install = await run(
    NPM,
    ['install', ...specs, '--prefer-offline', '--ignore-scripts', '--no-audit', '--no-fund'],
    project,
    INSTALL_TIMEOUT_MS,
  );
  expect(show(install)).toMatch(/^exit 0\n/);
  // Tracing now exports: a stand-in OTLP/HTTP collector receives the command's spans.
  const traces: string[] = [];
  const collector = createServer((request, response) => {
    traces.push(`${request.method} ${request.url}`);
    request.resume().on('end', () => response.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
  });
  await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
  const collectorUrl = `http://127.0.0.1:${(collector.address() as AddressInfo).port}`;
  const installed = {
    s3Status: await treadle(['status', item], s3),
    tracingStatus: await treadle(['status', item], { OTEL_EXPORTER_OTLP_ENDPOINT: collectorUrl }).finally(() =>
      collector.close(),
    ),
    // The pool is made and connects: the failure is now the database's (nothing listens), not the package's.
    postgresCalls: await treadle(['calls'], postgres),
  };
  expect(show(installed.s3Status)).toMatch(/^exit 0\n/);
  expect(show(installed.tracingStatus)).toMatch(/^exit 0\n/);
  expect(traces).toContain('POST /v1/traces');
  expect(installed.postgresCalls.stderr).not.toMatch(/not installed/);
  expect(installed.postgresCalls.stderr).toMatch(/ECONNREFUSED|connect/i);
}
