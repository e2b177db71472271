/**
 * The seam for stage kinds (docs/stage-kinds.md): the workflow table (bundled into the workflow bundle) and
 * the worker table (config checks, activities) list the same kinds with the same model use, the kinds'
 * messages do not collide, and the spec validation knows each kind from the table without a stage activity.
 */
import { createActivities } from '../../src/activities';
import { workerKinds } from '../../src/kinds';
import { workflowKind, workflowKindNames } from '../../src/kinds/workflow-table';
import { validatePipeline } from '../../src/kinds/pipeline';
import { defaultRegistry } from '../../src/worker/registries';
import { MemoryBlobStore } from '../../src/storage/blob-store';
import { eventsQuery, resolveReviewUpdate, reviewSignal, stateQuery } from '../../src/workflow-kit/messages';

describe('the table of stage kinds', () => {
  it('lists the same kinds on the workflow side and the worker side', () => {
    const worker = workerKinds()
      .map((kind) => kind.name)
      .sort();
    expect(workflowKindNames()).toEqual(worker);
    expect(worker).toEqual(expect.arrayContaining(['approval', 'fan_out', 'loop', 'tdd']));
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
