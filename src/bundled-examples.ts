/**
 * The default registries: the generic stage kinds plus the bundled examples (examples/: the document pipeline,
 * the triage steps, the seed's five approval actions on a local task list). This is the one place the core
 * reaches the examples; they are loaded when a default registry is first made, so nothing else in the core
 * depends on them.
 */
import path from 'node:path';
import type { ActionRegistry } from './kinds/approval/actions';
import { Registry } from './activities/registry';
import { loadConfig } from './config';
import { registerApproval } from './kinds/approval/registration';
import { registerFanOut } from './kinds/fan-out/registration';
import { registerLlm } from './pipelines/llm';
import { registerLoop } from './kinds/loop/registration';
import { registerScripted } from './pipelines/scripted';
import { registerTdd } from './kinds/tdd/registration';

/** What examples/index.ts provides: the examples' implementations and action types. */
export interface BundledExamples {
  /** Registers the example pipelines' stages and gates (documents, triage) on `registry` and returns it. */
  registerStages(registry: Registry): Registry;
  /** The example action types on a task list kept in `tasksFile`. */
  actionRegistry(options: { tasksFile: string }): ActionRegistry;
}

/**
 * The examples module. Beside `src/` (the sources under jest, the benchmark's build) it is `../examples`; in
 * the package build it is `lib/examples/index.js`, bundled from examples/ by scripts/build-examples.js, since
 * lib/ holds src/'s output alone.
 */
function loadBundledExamples(): BundledExamples {
  const location = path.basename(__dirname) === 'src' ? '../examples' : './examples';
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- the one core → examples edge, per layout
  return (require(location) as { bundledExamples: BundledExamples }).bundledExamples;
}

/**
 * The built-in implementations: `scripted`, `llm` / `llm-judge`, `tdd`, `loop`, `approval`, `fan_out`, and the
 * bundled examples' stages and gates.
 */
export function defaultRegistry(): Registry {
  const generic = registerLoop(
    registerFanOut(registerApproval(registerTdd(registerLlm(registerScripted(new Registry()))))),
  );
  return loadBundledExamples().registerStages(generic);
}

/**
 * The action types approval stages of the default worker may request: the seed's five examples on a local
 * task list in `tasksFile`, else `TREADLE_TASKS_FILE` (default `.treadle/tasks.json`).
 */
export function defaultActionRegistry(options: { tasksFile?: string } = {}): ActionRegistry {
  return loadBundledExamples().actionRegistry({ tasksFile: options.tasksFile ?? loadConfig().tasksFile });
}
