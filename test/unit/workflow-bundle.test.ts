/**
 * The prebuilt workflow bundle is used only while its manifest matches the files on disk: the SDK version, the
 * bundle's own size, and each input's size and sha256; otherwise the reason names what changed, and a worker
 * bundles at start with one line saying so.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  prebuiltWorkflowBundle,
  workflowCodeForWorker,
  type WorkflowBundleManifest,
} from '../../src/worker/workflow-bundle';

const ROOT = path.join(__dirname, '..', '..');
const SDK = (
  JSON.parse(readFileSync(require.resolve('@temporalio/workflow/package.json'), 'utf8')) as { version: string }
).version;
/** A real file of the package root stands in for a compiled input (the manifest's paths are relative to it). */
const INPUT = 'package.json';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'treadle-bundle-'));
  writeFileSync(path.join(dir, 'plain.js'), 'bundle');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function writeManifest(change: (manifest: WorkflowBundleManifest) => void = () => {}): void {
  const content = readFileSync(path.join(ROOT, INPUT));
  const manifest: WorkflowBundleManifest = {
    sdk: SDK,
    bundles: { plain: { file: 'plain.js', size: 6 }, traced: { file: 'traced.js', size: 6 } },
    inputs: [{ file: INPUT, size: content.length, sha256: createHash('sha256').update(content).digest('hex') }],
  };
  change(manifest);
  writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify(manifest));
}

it('uses the bundle while the manifest matches', () => {
  writeManifest();
  expect(prebuiltWorkflowBundle('plain', dir)).toEqual({ codePath: path.join(dir, 'plain.js') });
});

it('says why it cannot use the bundle', () => {
  expect(prebuiltWorkflowBundle('plain', dir)).toEqual({ stale: `no prebuilt workflow bundle in ${dir}` });
  writeManifest((m) => (m.sdk = '0.0.1'));
  expect(prebuiltWorkflowBundle('plain', dir)).toEqual({
    stale: `built with @temporalio/workflow 0.0.1, installed ${SDK}`,
  });
  writeManifest((m) => (m.inputs[0]!.sha256 = '0'.repeat(64)));
  expect(prebuiltWorkflowBundle('plain', dir)).toEqual({ stale: `${INPUT} changed since the bundle was built` });
  writeManifest((m) => (m.inputs[0]!.size += 1));
  expect(prebuiltWorkflowBundle('plain', dir)).toEqual({ stale: `${INPUT} changed since the bundle was built` });
  writeManifest();
  expect(prebuiltWorkflowBundle('traced', dir)).toEqual({
    stale: expect.stringMatching(/traced\.js is not as built$/),
  });
});

it('bundles at start, saying why in one line, when there is no current bundle', () => {
  const lines: string[] = [];
  // Under jest the module is src/, where no bundle is ever built.
  const code = workflowCodeForWorker('plain', (line) => lines.push(line));
  expect(code).toEqual({ workflowsPath: require.resolve('../../src/workflows') });
  expect(lines).toEqual([expect.stringMatching(/^treadle worker: bundling the workflow code at start \(no prebuilt/)]);
});
