/**
 * The prebuilt workflow bundles: `npm run build` (scripts/build-workflow-bundle.js) bundles the workflow code once
 * into lib/workflow-bundle/, and a worker loads that bundle instead of bundling at every start (5-6 s of webpack).
 * A manifest records what the bundles were built from, so a worker whose sources changed since (tsc run alone, an
 * edited lib/ file, another SDK version) bundles as before and says why.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync, mkdirSync, statSync } from 'node:fs';
import path from 'node:path';
// Plain imports: everything that loads this module (the worker, `require('treadle')`) has loaded both already, and
// the SDK loads its bundler (webpack) only when `bundleWorkflowCode` runs.
import { bundleWorkflowCode } from '@temporalio/worker';
import { WORKFLOW_TRACING_MODULE } from '../observability/tracing';

/** The build's root, `lib/` (this file is `lib/worker/workflow-bundle.js`). */
const LIB_DIR = path.dirname(__dirname);

/** Where the bundles and their manifest live: `lib/workflow-bundle/` beside the compiled workflows. */
export const WORKFLOW_BUNDLE_DIR = path.join(LIB_DIR, 'workflow-bundle');

/** The package root the manifest's input paths are relative to (`lib/..`). */
const PACKAGE_ROOT = path.dirname(LIB_DIR);

/** The manifest's file name in {@link WORKFLOW_BUNDLE_DIR}. */
const MANIFEST_FILE = 'manifest.json';

/** The two bundles: the workflows, and the workflows with the OpenTelemetry workflow interceptors for tracing. */
export type WorkflowBundleVariant = 'plain' | 'traced';

/** One file a bundle was built from, as it was then. */
export interface BundleInput {
  /** Relative to the package root, with `/` separators (`lib/workflows/index.js`). */
  file: string;
  size: number;
  sha256: string;
}

/** What `lib/workflow-bundle/manifest.json` says about the prebuilt bundles. */
export interface WorkflowBundleManifest {
  /** The `@temporalio/workflow` version bundled (its packages and their dependencies come with it). */
  sdk: string;
  /** The bundle files by variant, with their sizes, so a truncated copy is never loaded. */
  bundles: Record<WorkflowBundleVariant, { file: string; size: number }>;
  /** Treadle's own compiled files in the bundles. */
  inputs: BundleInput[];
}

/** A usable prebuilt bundle, or why there is none. */
export type PrebuiltBundle = { codePath: string } | { stale: string };

/**
 * The prebuilt bundle for `variant` if the manifest still matches the files on disk (the SDK version, then every
 * input's size and sha256: tens of milliseconds), else the reason it cannot be used.
 */
export function prebuiltWorkflowBundle(variant: WorkflowBundleVariant, dir = WORKFLOW_BUNDLE_DIR): PrebuiltBundle {
  const manifestPath = path.join(dir, MANIFEST_FILE);
  if (!existsSync(manifestPath)) return { stale: `no prebuilt workflow bundle in ${dir}` };
  let manifest: WorkflowBundleManifest;
  try {
    manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as WorkflowBundleManifest;
  } catch (error) {
    return { stale: `${manifestPath} is unreadable (${(error as Error).message})` };
  }
  const sdk = workflowSdkVersion();
  if (manifest.sdk !== sdk) return { stale: `built with @temporalio/workflow ${manifest.sdk}, installed ${sdk}` };
  const bundle = manifest.bundles[variant];
  const codePath = path.join(dir, bundle.file);
  if (sizeOf(codePath) !== bundle.size) return { stale: `${path.relative(PACKAGE_ROOT, codePath)} is not as built` };
  for (const input of manifest.inputs) {
    const file = path.join(PACKAGE_ROOT, input.file);
    // The size first: most edits change it, and it costs a stat instead of a read.
    if (sizeOf(file) !== input.size || sha256(readFileSync(file)) !== input.sha256)
      return { stale: `${input.file} changed since the bundle was built` };
  }
  return { codePath };
}

/**
 * What a worker should load: the prebuilt bundle when it is current, else the workflow sources to bundle at start,
 * after one stderr line saying why (the worker then starts 5-6 s slower).
 */
export function workflowCodeForWorker(
  variant: WorkflowBundleVariant,
  report: (line: string) => void = (line) => process.stderr.write(`${line}\n`),
): { workflowBundle: { codePath: string } } | { workflowsPath: string } {
  const prebuilt = prebuiltWorkflowBundle(variant);
  if ('codePath' in prebuilt) return { workflowBundle: { codePath: prebuilt.codePath } };
  report(`treadle worker: bundling the workflow code at start (${prebuilt.stale}); \`npm run build\` prebuilds it`);
  return { workflowsPath: require.resolve('../workflows') };
}

/**
 * Bundles the workflows (plain and traced) into `dir` and writes the manifest; `npm run build` runs it through
 * scripts/build-workflow-bundle.js, after tsc.
 */
export async function buildWorkflowBundles(dir = WORKFLOW_BUNDLE_DIR): Promise<WorkflowBundleManifest> {
  const workflowsPath = require.resolve('../workflows');
  const quiet = { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} };
  const [plain, traced] = await Promise.all([
    bundleWorkflowCode({ workflowsPath, logger: quiet }),
    bundleWorkflowCode({ workflowsPath, workflowInterceptorModules: [WORKFLOW_TRACING_MODULE], logger: quiet }),
  ]);
  mkdirSync(dir, { recursive: true });
  const bundles = {} as WorkflowBundleManifest['bundles'];
  const inputs = new Set<string>();
  for (const [variant, bundle] of [
    ['plain', plain],
    ['traced', traced],
  ] as const) {
    const file = `${variant}.js`;
    const { code, sources } = withSlimSourceMap(bundle.code);
    writeFileSync(path.join(dir, file), code);
    bundles[variant] = { file, size: Buffer.byteLength(code) };
    for (const input of treadleInputsOf(sources)) inputs.add(input);
  }
  const manifest: WorkflowBundleManifest = {
    sdk: workflowSdkVersion(),
    bundles,
    inputs: [...inputs].sort().map((file) => {
      const content = readFileSync(path.join(PACKAGE_ROOT, file));
      return { file, size: content.length, sha256: sha256(content) };
    }),
  };
  writeFileSync(path.join(dir, MANIFEST_FILE), `${JSON.stringify(manifest, null, 2)}\n`);
  return manifest;
}

/**
 * The bundle with its inline source map minus `sourcesContent` (the embedded sources: two thirds of the file, which
 * every worker start would read and decode; stack traces still name files and lines), and the map's sources.
 */
function withSlimSourceMap(code: string): { code: string; sources: string[] } {
  const marker = 'sourceMappingURL=data:application/json;charset=utf-8;base64,';
  const at = code.lastIndexOf(marker);
  if (at < 0) throw new Error('the workflow bundle has no inline source map to list its inputs from');
  const { sourcesContent: _dropped, ...map } = JSON.parse(
    Buffer.from(code.slice(at + marker.length).trim(), 'base64').toString(),
  ) as { sources: string[]; sourcesContent?: string[] };
  const slim = `${code.slice(0, at)}${marker}${Buffer.from(JSON.stringify(map)).toString('base64')}\n`;
  return { code: slim, sources: map.sources };
}

/**
 * Treadle's compiled files among a bundle's source-map sources. The map follows tsc's maps back to `src/*.ts`, so a
 * source under src/ stands for its compiled file under lib/; packages are covered by the SDK version.
 */
function treadleInputsOf(sources: string[]): string[] {
  const inputs: string[] = [];
  for (const source of sources) {
    // Webpack's own runtime (`webpack/bootstrap`), packages (pinned by the SDK version) and the SDK's generated,
    // in-memory entry point are not Treadle's files.
    if (!path.isAbsolute(source) || source.endsWith('-autogenerated-entrypoint.cjs')) continue;
    const absolute = path.resolve(source);
    if (absolute.split(path.sep).includes('node_modules')) continue;
    const relative = path.relative(PACKAGE_ROOT, absolute).split(path.sep).join('/');
    const compiled = relative.startsWith('src/') ? `lib/${relative.slice(4).replace(/\.ts$/, '.js')}` : relative;
    if (!compiled.startsWith('lib/') || !existsSync(path.join(PACKAGE_ROOT, compiled)))
      throw new Error(`the workflow bundle includes ${source}, which is not a compiled file under lib/`);
    inputs.push(compiled);
  }
  return inputs;
}

/** The installed `@temporalio/workflow` version, as resolved from the compiled workflows. */
function workflowSdkVersion(): string {
  const manifest = require.resolve('@temporalio/workflow/package.json', { paths: [__dirname] });
  return (JSON.parse(readFileSync(manifest, 'utf8')) as { version: string }).version;
}

function sizeOf(file: string): number | undefined {
  try {
    return statSync(file).size;
  } catch {
    return undefined;
  }
}

function sha256(content: Buffer): string {
  return createHash('sha256').update(content).digest('hex');
}
