/**
 * What starting costs, by the modules loaded (issue 26 §5; the times themselves are in the benchmark, not here):
 * - the SDK client (`lib/client/index.js`, what `status`, `reviews`, `review` and `approve list` load) loads neither the
 *   schemas (zod, Ajv), nor the start path, nor the audit: @temporalio/client plus Treadle's thin layer;
 * - the worker (`lib/worker/index.js`) loads neither the Anthropic SDK nor OpenTelemetry's SDK until used;
 * - the package (`lib/index.js`) loads no database driver (better-sqlite3, pg) or S3 client until a log or store
 *   of theirs is opened;
 * - the CLI's `ui` command (`lib/cli/ui.js`, loaded by every command at start) and the inbox's defaults load no
 *   fastify until the inbox is served.
 * Each check runs in a fresh node process on the build, as the CLI does.
 */
import { execFileSync } from 'node:child_process';
import path from 'node:path';

const ROOT = path.join(__dirname, '..', '..');

/** The files `require(entry)` loads in a fresh process, relative to the repository or its node_modules. */
function modulesLoadedBy(entry: string): string[] {
  const script = `require(${JSON.stringify(entry)}); process.stdout.write(JSON.stringify(Object.keys(require.cache)))`;
  const files = JSON.parse(execFileSync(process.execPath, ['-e', script], { cwd: ROOT, encoding: 'utf8' })) as string[];
  return files.map((file) => file.replace(/^.*\/node_modules\//, 'node_modules/').replace(`${ROOT}/`, ''));
}

const matching = (files: string[], pattern: RegExp) => files.filter((file) => pattern.test(file));

it('the client loads no schemas (zod, Ajv), start path or audit', () => {
  const files = modulesLoadedBy('./lib/client');
  expect(matching(files, /^node_modules\/@temporalio\/client\//).length).toBeGreaterThan(0);
  expect(
    matching(files, /^node_modules\/(zod|ajv|ajv-formats)\/|^lib\/(client\/start|client\/audit|model\/pipeline)\.js$/),
  ).toEqual([]);
});

it('the worker loads no Anthropic SDK and no OpenTelemetry SDK until they are used', () => {
  const files = modulesLoadedBy('./lib/worker');
  expect(matching(files, /^lib\/worker\/workflow-bundle\.js$/)).toEqual(['lib/worker/workflow-bundle.js']);
  expect(
    matching(files, /^node_modules\/(@anthropic-ai\/sdk|@opentelemetry\/sdk-trace-\w+|@opentelemetry\/resources)\//),
  ).toEqual([]);
});

it('the package loads no database driver and no S3 client until one is used', () => {
  const files = modulesLoadedBy('./lib/index');
  expect(matching(files, /^lib\/storage\/(sqlite|postgres)-call-log\.js$/).length).toBe(2);
  expect(matching(files, /^node_modules\/(better-sqlite3|pg|pg-pool|@aws-sdk\/[\w-]+)\//)).toEqual([]);
});

it("the CLI's ui command and the inbox's defaults load no fastify until the inbox is served", () => {
  for (const entry of ['./lib/cli/ui', './lib/ui/address'])
    expect(
      matching(modulesLoadedBy(entry), /^node_modules\/(fastify|@fastify\/[\w-]+)\/|^lib\/ui\/server\.js$/),
    ).toEqual([]);
});
