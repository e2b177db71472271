/**
 * `treadle validate`: a pipeline file checked against the built-in implementations (or a custom worker's
 * registry), every problem listed with its line. It never talks to the server (it runs from the bundle).
 */
import type { Command } from 'commander';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { SpecLines as SpecLinesType } from '../pipelines/spec-lines';
import { missingQueueHint } from '../worker/task-queues';
import type { KnownImplementations as KnownImplementationsType } from '../model/pipeline';
import type { SpecProblem as SpecProblemType } from '../model/pipeline';
import { BUILT_IN_IMPLEMENTATIONS, GENERIC_IMPLEMENTATIONS, oneLine, readPipelineFile } from '../pipelines/catalog';
import { listed } from './arguments';
import { given } from './exit-codes';
import { load } from './lazy-modules';

/** Registers `treadle validate`. */
export function registerValidateCommand(program: Command): void {
  program
    .command('validate <file>')
    .description('validate a pipeline file against the built-in implementations, listing every problem with its line')
    .option('--custom-worker <module>', "check against your worker's registry: a module exporting it as `registry`")
    .action((file: string, opts: { customWorker?: string }) => {
      const resolved = path.resolve(file);
      // A file or module that cannot be read is a usage error (2); problems in a file read are the report (1).
      const { known, raw } = given(() => ({
        known: opts.customWorker !== undefined ? customWorkerNames(opts.customWorker) : BUILT_IN_IMPLEMENTATIONS,
        raw: readPipelineFile(resolved),
      }));
      const loops = load.loopFiles();
      // A loop pipeline's spec is made from several files, whose problems name them; the rest are placed in this file.
      const loopPipeline = loops.isLoopPipelineFile(raw);
      const result = load
        .pipeline()
        .validatePipeline(loopPipeline ? loops.loopPipelineSpec(resolved, raw) : raw, known);
      if (!result.ok) {
        const problems = loopPipeline ? result.problems : placedProblems(resolved, file, result.problems, result.found);
        const count = `${problems.length} problem${problems.length === 1 ? '' : 's'}`;
        const hint = opts.customWorker === undefined ? missingQueueHint(problems) : '';
        throw new Error(`${file} is invalid (${count}):\n${listed(problems)}${hint}`);
      }
      process.stdout.write(
        `${file}: pipeline ${result.spec.name} is valid (${result.spec.stages.length} stage${result.spec.stages.length === 1 ? '' : 's'})\n`,
      );
    });
}

/**
 * The names and checks `validate --custom-worker <module>` validates against: the module's Registry (its
 * export `registry`, its default export, the module itself, or what a function of those returns) and its
 * `approvalActions` when it has them, else none, as `runWorker` defaults them (`defaultActionRegistry()`).
 */
function customWorkerNames(module: string): KnownImplementationsType {
  const file = path.resolve(module);
  let loaded: Record<string, unknown>;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- the user's module, named at run time
    loaded = require(file) as Record<string, unknown>;
  } catch (error) {
    throw new Error(`--custom-worker: cannot load ${module}: ${oneLine((error as Error).message)}`);
  }
  const isRegistry = (r: unknown): r is { names(): KnownImplementationsType } =>
    typeof (r as { names?: unknown } | null)?.names === 'function';
  // A function that is no registry itself builds one.
  const pick = (value: unknown): unknown =>
    typeof value === 'function' && !isRegistry(value) ? (value as () => unknown)() : value;
  const registry = [loaded.registry, loaded.default, loaded].map(pick).find(isRegistry);
  if (!registry) {
    const how = "export your worker's registry as `registry` (module.exports = { registry })";
    throw new Error(`--custom-worker: ${module} exports no Registry: ${how}`);
  }
  const actions = pick(loaded.approvalActions) as { names?: () => string[] } | undefined;
  const actionTypes = typeof actions?.names === 'function' ? actions.names() : GENERIC_IMPLEMENTATIONS.actions;
  return { ...registry.names(), actions: actionTypes };
}

/** Every problem as `shown:line: problem` (the line where `file` has the field), for `validate`. */
function placedProblems(file: string, shown: string, problems: string[], found: readonly SpecProblemType[]): string[] {
  let lines: SpecLinesType | undefined;
  try {
    const { SpecLines } = load.specLines();
    lines = new SpecLines(readFileSync(file, 'utf8'));
  } catch {
    lines = undefined;
  }
  return problems.map((problem, i) => {
    const line = found[i] && found[i].at.length > 0 ? lines?.lineOf(found[i].at) : undefined;
    return `${shown}${line !== undefined ? `:${line}` : ''}: ${problem}`;
  });
}
