/**
 * The seam for stage kinds (docs/stage-kinds.md): the workflow table (bundled into the workflow bundle) and
 * the worker table (config checks, activities) list the same kinds with the same model use, the kinds'
 * messages do not collide, and the spec validation knows each kind from the table without a stage activity,
 * in the worker and in the CLI (`treadle validate`'s names and config checks, src/pipelines/catalog.ts). The
 * test kind in test/fixtures/kinds/tally/ is registered on both sides here, as a kind added to the table.
 */
import { buildSync } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createActivities } from '../../src/activities';
import { registerWorkerKind, workerKinds } from '../../src/kinds';
import { workflowKind, workflowKindNames } from '../../src/kinds/workflow-table';
import { kindSpecChecks, validatePipeline } from '../../src/kinds/pipeline';
import { defaultRegistry } from '../../src/worker/registries';
import { MemoryBlobStore } from '../../src/storage/blob-store';
import { eventsQuery, resolveReviewUpdate, reviewSignal, stateQuery } from '../../src/workflow-kit/messages';
import { BUILT_IN_IMPLEMENTATIONS, GENERIC_IMPLEMENTATIONS } from '../../src/pipelines/catalog';
import { TALLY_STAGE } from '../fixtures/kinds/tally/kind';
import { checkTallyConfig } from '../fixtures/kinds/tally/worker/kind';

describe('the table of stage kinds', () => {
  it('lists the same kinds on the workflow side and the worker side', () => {
    const worker = workerKinds()
      .map((kind) => kind.name)
      .sort();
    expect(workflowKindNames()).toEqual(worker);
    expect(worker).toEqual(expect.arrayContaining(['approval', 'fan_out', 'human', 'loop', 'tdd']));
  });

  it('agrees on each side whether a kind calls models', () => {
    for (const kind of workerKinds())
      expect([kind.name, workflowKind(kind.name)?.callsModels]).toEqual([kind.name, kind.callsModels]);
  });

  it('gives every message wire name to one kind only, and none of the work item base messages', () => {
    const base = [reviewSignal.name, resolveReviewUpdate.name, stateQuery.name, eventsQuery.name];
    const owners = new Map<string, string>();
    for (const name of workflowKindNames()) {
      for (const message of workflowKind(name)!.messages) {
        expect({ message, owner: owners.get(message) ?? name }).toEqual({ message, owner: name });
        owners.set(message, name);
      }
    }
    expect(base.filter((message) => owners.has(message))).toEqual([]);
    expect(owners.size).toBeGreaterThan(0);
  });

  it('lets specs name a kind and checks its with: through the table, without a stage activity', () => {
    const registry = defaultRegistry();
    const known = registry.names();
    for (const kind of workerKinds()) expect(known.stages).toContain(kind.name);
    // No throwing stub: a kind's name is not an activity type the worker registers.
    const activities = createActivities({ registry, blobs: new MemoryBlobStore() });
    expect(workerKinds().filter((kind) => kind.name in activities)).toEqual([]);
    // The tdd kind's config check (worker side) reports a stage whose with: lacks its spec.
    const spec = { name: 'p', stages: [{ name: 'build', run: 'tdd', with: {} }] };
    const result = validatePipeline(spec, known);
    expect(result.ok).toBe(false);
    expect(JSON.stringify(result)).toMatch(/stage build: with\./);
    // The tdd and loop kinds call models: engines 1 to 3 put them under the token budget through this list.
    expect(registry.agentBackedTypes()).toEqual(expect.arrayContaining(['loop', 'tdd']));
  });

  it('refuses a second kind of the same name, and a stage implementation named like a kind', () => {
    expect(() => defaultRegistry().stage('tdd', async () => ({ outcome: 'completed' }))).toThrow(
      'stage implementation "tdd" is already registered',
    );
  });
});

describe("the CLI's names and config checks (treadle validate)", () => {
  const WRONG_CONFIG = { no_such_field: true };

  it('come from the worker table: every kind, checked by its own row', () => {
    for (const kind of workerKinds()) {
      expect(GENERIC_IMPLEMENTATIONS.stages).toContain(kind.name);
      expect(BUILT_IN_IMPLEMENTATIONS.stages).toContain(kind.name);
      // A with: no kind takes: the CLI must say exactly what the kind's row says.
      const cli = BUILT_IN_IMPLEMENTATIONS.checkConfig!('stage', kind.name, WRONG_CONFIG);
      expect({ kind: kind.name, cli }).toEqual({ kind: kind.name, cli: kind.checkConfig?.(WRONG_CONFIG) ?? [] });
    }
    const checked = workerKinds().filter((kind) => (kind.checkConfig?.(WRONG_CONFIG) ?? []).length > 0);
    expect(checked.map((kind) => kind.name)).toEqual(expect.arrayContaining(['approval', 'loop', 'tdd', TALLY_STAGE]));
  });

  it('take a kind added to the table with no other edit: a tally stage validates by its own check', () => {
    const spec = (count: number) => ({ name: 'p', stages: [{ name: 'count', run: TALLY_STAGE, with: { count } }] });
    expect(validatePipeline(spec(3), BUILT_IN_IMPLEMENTATIONS)).toEqual(expect.objectContaining({ ok: true }));
    const result = validatePipeline(spec(0), BUILT_IN_IMPLEMENTATIONS);
    expect(result.ok ? [] : result.problems).toEqual(
      checkTallyConfig({ count: 0 }).map((line) => `stage count: with.${line}`),
    );
  });

  it("read the table without loading worker code, the Temporal SDK or a kind's zod schema", () => {
    // The table as the CLI's bundle holds it (one file, packages left as requires), loaded in a fresh process.
    const root = path.join(__dirname, '..', '..');
    const outfile = path.join(mkdtempSync(path.join(os.tmpdir(), 'kinds-table-')), 'kinds.js');
    const entryPoints = [path.join(root, 'src', 'kinds', 'index.ts')];
    buildSync({ entryPoints, outfile, bundle: true, platform: 'node', packages: 'external', logLevel: 'silent' });
    const script = `require(${JSON.stringify(outfile)}).workerKinds().map((kind) => kind.name);
      const packages = Object.keys(require.cache).filter((file) => file.includes('node_modules'));
      process.stdout.write(JSON.stringify(packages));`;
    const env = { ...process.env, NODE_PATH: path.join(root, 'node_modules') };
    const loaded = JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8', env })) as string[];
    expect(loaded).toEqual([]);
  });
});

describe("the kinds' own spec checks", () => {
  it("are each kind's row's: the validation and the worker's queue routing read them from the table", () => {
    const withChecks = workerKinds().filter((kind) => kind.specChecks);
    expect(withChecks.map((kind) => kind.name).sort()).toEqual(['approval', 'fan_out', 'human']);
    for (const kind of workerKinds()) expect(kindSpecChecks(kind.name)).toBe(kind.specChecks);
    // The fan-out's row checks its element stage (its with: schema loads when a spec names the kind).
    const spec = { name: 'p', stages: [{ name: 'each', run: 'fan_out', with: { stage: { run: 'llm', retries: 1 } } }] };
    const result = validatePipeline(spec);
    expect(result.ok ? [] : result.problems.join('\n')).toMatch(/stage each: with\.stage/);
  });

  it('take a kind added to the table with no other edit, and refuse checks named for another kind', () => {
    const specChecks = {
      name: 'probe_kind',
      configProblems: () => [{ layer: 'config' as const, line: 'size: too big for a probe' }],
      attemptEvents: 0,
    };
    expect(() =>
      registerWorkerKind({ name: 'other_kind', callsModels: false, activities: () => ({}), specChecks }),
    ).toThrow('stage kind "other_kind" has the spec checks of "probe_kind"');
    registerWorkerKind({ name: 'probe_kind', callsModels: false, activities: () => ({}), specChecks });
    const result = validatePipeline({ name: 'p', stages: [{ name: 's', run: 'probe_kind' }] });
    expect(result.ok ? [] : result.problems).toEqual(['stage s: with.size: too big for a probe']);
  });
});
