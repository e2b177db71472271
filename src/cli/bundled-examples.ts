/**
 * The bundled examples as the CLI's worker serves them (`treadle worker`, `dev`, `demo`, and `node
 * lib/worker/index.js`): the generic registries (src/worker/registries.ts) with examples/ registered on top (the document
 * pipeline, the triage steps, the seed's five approval actions on a local task list). This is the one place
 * src/ reaches examples/; the module loads only when a command builds a worker.
 */
import path from 'node:path';
import type { ActionRegistry } from '../kinds/approval/actions';
import type { Registry } from '../activities/registry';
import { loadConfig } from '../config';
import { defaultRegistry } from '../worker/registries';

/** What examples/index.ts provides (`treadle/examples`): the examples' implementations and action types. */
export interface BundledExamples {
  /** Registers the example pipelines' stages and gates (documents, triage) on `registry` and returns it. */
  registerStages(registry: Registry): Registry;
  /** The example action types on a task list kept in `tasksFile`. */
  actionRegistry(options: { tasksFile: string }): ActionRegistry;
}

/**
 * The examples module. Beside `src/` (the sources under jest, the benchmark's build) it is `../../examples`;
 * in the package build it is `lib/examples/index.js`, bundled from examples/ by scripts/build-examples.js,
 * since lib/ holds src/'s output alone.
 */
function loadBundledExamples(): BundledExamples {
  const location = path.basename(path.dirname(__dirname)) === 'src' ? '../../examples' : '../examples';
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- the one src → examples edge, per layout
  return (require(location) as { bundledExamples: BundledExamples }).bundledExamples;
}

/** What the CLI's worker runs: the generic stage kinds plus the bundled examples' stages and gates. */
export function bundledRegistry(): Registry {
  return loadBundledExamples().registerStages(defaultRegistry());
}

/**
 * The action types approval stages of the CLI's worker may request: the seed's five examples, in a registry of
 * their own whose store is the local task list in `tasksFile`, else `TREADLE_TASKS_FILE` (default
 * `<TREADLE_HOME>/tasks.json`); the generic registry has no types and no store to add them to.
 */
export function bundledActionRegistry(options: { tasksFile?: string } = {}): ActionRegistry {
  return loadBundledExamples().actionRegistry({ tasksFile: options.tasksFile ?? loadConfig().tasksFile });
}

/** The worker options that make a worker the CLI's: the bundled registries. */
export function bundledWorkerOptions(): { registry: Registry; approvalActions: ActionRegistry } {
  return { registry: bundledRegistry(), approvalActions: bundledActionRegistry() };
}
