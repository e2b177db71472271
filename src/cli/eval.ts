/**
 * `treadle eval` (issue 42, docs/cli.md#evaluations): `run` a dataset on a pipeline's variants, `show` a run,
 * `compare` two runs (exit 1 when a variant's pass rate drops past the threshold, so CI can gate on it), `list`
 * the runs. Everything `run` is given (the pipeline, each variant's overrides, every line of the dataset, the
 * scorer) is checked before it connects, every problem listed (exit 2).
 */
import { Option, type Command } from 'commander';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import {
  EVAL_POLICIES,
  parseDataset,
  type EvalCase,
  type EvalComparison,
  type EvalPolicy,
  type EvalRunRecord,
  type EvalVariant,
  type EvalVariantSummary,
} from '../model/evals';
import type { Json } from '../model/shapes';
import { BUILT_IN_IMPLEMENTATIONS, findPipeline, readPipelineFile } from '../pipelines/catalog';
import { listed, wholeNumber } from './arguments';
import { EXIT, given } from './exit-codes';
import { load } from './lazy-modules';
import { table } from './render';
import type { WithClient } from './with-client';

/** `eval run`'s flags. */
interface RunFlags {
  dataset: string;
  variant: string[];
  concurrency?: number;
  id?: string;
  scorer: string;
  schema?: string;
  judgeModel?: string;
  rubric?: string;
  passMark?: number;
  outputStage?: string;
  policy: EvalPolicy;
  taskQueue?: string;
  json?: boolean;
}

/** Registers `treadle eval run|show|compare|list`. */
export function registerEvalCommands(program: Command, withClient: WithClient): void {
  const evalCommand = program
    .command('eval')
    .description('evaluations: run a dataset on variants of a pipeline, show a run, compare two runs');
  registerRun(evalCommand, withClient);
  evalCommand
    .command('show <run>')
    .description("a run's results per variant (--cases: and per case)")
    .option('--cases', 'every case on every variant too')
    .option('--json', "the run's whole record as JSON")
    .action(
      withClient(async (client, run: string, opts: { cases?: boolean; json?: boolean }) => {
        const record = await client.evals.show(run);
        process.stdout.write(opts.json ? `${JSON.stringify(record, null, 2)}\n` : renderRecord(record, opts.cases));
      }),
    );
  evalCommand
    .command('compare <runA> <runB>')
    .description("run B against run A per variant; exit 1 when a variant's pass rate drops past the threshold")
    .addOption(
      new Option('--threshold <drop>', 'the pass-rate drop (0 to 1) that fails the comparison')
        .argParser(fraction)
        .default(0.05),
    )
    .option('--json', 'the comparison as JSON')
    .action(
      withClient(async (client, runA: string, runB: string, opts: { threshold: number; json?: boolean }) => {
        const comparison = await client.evals.compare(runA, runB, opts.threshold);
        process.stdout.write(opts.json ? `${JSON.stringify(comparison, null, 2)}\n` : renderComparison(comparison));
        if (comparison.regressions.length > 0) process.exitCode = EXIT.failed;
      }),
    );
  evalCommand
    .command('list')
    .description('the finished runs, newest first')
    .option('--json', 'as JSON')
    .action(
      withClient(async (client, opts: { json?: boolean }) => {
        const runs = await client.evals.list();
        if (opts.json) return void process.stdout.write(`${JSON.stringify(runs, null, 2)}\n`);
        const rows = runs.map((r) => [
          r.run,
          r.pipeline,
          r.finishedAt,
          r.summaries.map((s) => `${s.variant} ${percent(s.passRate)}`).join(', '),
        ]);
        process.stdout.write(`${table(['RUN', 'PIPELINE', 'FINISHED', 'PASS RATE'], rows)}\n`);
      }),
    );
}

function registerRun(evalCommand: Command, withClient: WithClient): void {
  evalCommand
    .command('run <pipeline>')
    .description('run every case of a dataset on every variant of a pipeline (a built-in name or a file)')
    .requiredOption('--dataset <file>', 'the cases, JSONL: one { "id"?, "input", "expected"? } per line')
    .option(
      '--variant <name[=overrides.yaml]>',
      'a variant: its name and the file of its overrides (none: the spec as written); repeat for more (default: baseline)',
      (value: string, list: string[]) => [...list, value],
      [] as string[],
    )
    .option(
      '--concurrency <n>',
      'items in flight at most (default 8)',
      wholeNumber(1, 'must be a whole number above 0'),
    )
    .option('--id <run>', 'the run id (default: <pipeline>-<time>-<random>); the same id again resumes the run')
    .option('--scorer <name>', 'exact, json-schema, llm-judge, or a module of your own (./my-scorer.js)', 'exact')
    .option('--schema <file>', 'the json-schema scorer: the JSON Schema the output must be valid against')
    .option('--judge-model <model>', 'the llm-judge scorer: its model (default: TREADLE_MODEL, else the default)')
    .option('--rubric <text>', 'the llm-judge scorer: what it looks for')
    .option('--pass-mark <score>', "the score a case must reach to pass (default: the scorer's own)", fraction)
    .option('--output-stage <stage>', "the stage whose artefact is scored (default: the pipeline's last)")
    .addOption(
      new Option('--policy <policy>', "how the items' human decisions are answered (as reviewer eval-policy)")
        .choices([...EVAL_POLICIES])
        .default('approve'),
    )
    .option('--task-queue <queue>', 'the task queue the items start on (default: TREADLE_TASK_QUEUE, else treadle)')
    .option('--json', "print the run's whole record as JSON")
    .action(async (pipeline: string, opts: RunFlags) => {
      // Checked before connecting: nothing starts while any of it is wrong.
      const { spec, variants, cases } = given(() => readRunInputs(pipeline, opts));
      const scorer = await load
        .evalScorers()
        .scorerFor({
          scorer: opts.scorer,
          ...(opts.schema !== undefined ? { schemaFile: opts.schema } : {}),
          judge: {
            ...(opts.judgeModel !== undefined ? { model: opts.judgeModel } : {}),
            ...(opts.rubric !== undefined ? { rubric: opts.rubric } : {}),
          },
          ...(opts.passMark !== undefined ? { passMark: opts.passMark } : {}),
        })
        .catch((error: unknown) =>
          given(() => {
            throw error;
          }),
        );
      await withClient(
        async (client) => {
          const record = await client.evals.run({
            pipeline: spec,
            variants,
            cases,
            scorer,
            policy: opts.policy,
            ...(opts.id !== undefined ? { run: opts.id } : {}),
            ...(opts.concurrency !== undefined ? { concurrency: opts.concurrency } : {}),
            ...(opts.outputStage !== undefined ? { outputStage: opts.outputStage } : {}),
            onResult: (r, done, total) =>
              process.stderr.write(
                `[${done}/${total}] ${r.variant} ${r.caseId}: ${r.outcome}, score ${r.score ?? `none (${r.scoreError})`}${r.passed ? ', passed' : ''}\n`,
              ),
          });
          process.stdout.write(opts.json ? `${JSON.stringify(record, null, 2)}\n` : renderRecord(record, false));
        },
        opts.taskQueue !== undefined ? { taskQueue: opts.taskQueue } : {},
      )();
    });
}

/** The spec, the variants (overrides applied and checked) and the cases `eval run` was given; throws every problem. */
function readRunInputs(
  pipeline: string,
  opts: RunFlags,
): { spec: unknown; variants: EvalVariant[]; cases: EvalCase[] } {
  const file = /\.(ya?ml|json)$/.test(pipeline) || existsSync(pipeline) ? path.resolve(pipeline) : undefined;
  const spec = readPipelineFile(file ?? findPipeline(pipeline).specFile);
  const variants = (opts.variant.length > 0 ? opts.variant : ['baseline']).map(variantOf);
  let text: string;
  try {
    text = readFileSync(opts.dataset, 'utf8');
  } catch (error) {
    throw new Error(`cannot read the dataset ${opts.dataset}: ${(error as NodeJS.ErrnoException).code ?? error}`);
  }
  const dataset = parseDataset(text);
  if (!dataset.ok) throw new Error(`the dataset ${opts.dataset} has problems:\n${listed(dataset.problems)}`);
  load.evalRunner().prepareVariants(spec, variants, BUILT_IN_IMPLEMENTATIONS, opts.outputStage);
  return { spec, variants, cases: dataset.cases };
}

/** `name=overrides.yaml` or `name`: a variant and its overrides (YAML or JSON, the fork's shape). */
function variantOf(flag: string): EvalVariant {
  const equals = flag.indexOf('=');
  if (equals < 0) return { name: flag, overrides: {} };
  const file = flag.slice(equals + 1);
  return { name: flag.slice(0, equals), file, overrides: (readPipelineFile(path.resolve(file)) ?? {}) as Json };
}

/** `--threshold` and `--pass-mark`: a number from 0 to 1. */
function fraction(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !(n >= 0 && n <= 1)) throw new Error(`must be a number from 0 to 1, got "${value}"`);
  return n;
}

const percent = (rate: number): string => `${(rate * 100).toFixed(1)}%`;
const signed = (n: number, digits = 2): string => `${n >= 0 ? '+' : ''}${n.toFixed(digits)}`;
const usd = (cost: number | null): string => (cost === null ? 'unknown' : `$${cost.toFixed(4)}`);

/** The summary rows of a run. */
function summaryRows(summaries: EvalVariantSummary[]): string[][] {
  return summaries.map((s) => [
    s.variant,
    String(s.cases),
    `${s.passed} (${percent(s.passRate)})`,
    s.meanScore === null ? '-' : s.meanScore.toFixed(3),
    s.meanAttempts.toFixed(2),
    String(s.escalations),
    `${s.tokens.input}/${s.tokens.output}`,
    usd(s.costUsd),
    `${Math.round(s.meanWallMs)} ms`,
  ]);
}

/** A run as `eval run` and `eval show` print it. */
export function renderRecord(record: EvalRunRecord, cases = false): string {
  const head = `evaluation ${record.run}: ${record.pipeline}, scorer ${record.scorer.name} (pass mark ${record.scorer.passMark}), policy ${record.policy}\n`;
  const summary = table(
    ['VARIANT', 'CASES', 'PASSED', 'MEAN SCORE', 'ATTEMPTS', 'ESCALATIONS', 'TOKENS IN/OUT', 'COST', 'MEAN WALL'],
    summaryRows(record.summaries),
  );
  if (!cases) return `${head}${summary}\n`;
  const rows = record.results.map((r) => [
    r.variant,
    r.caseId,
    r.outcome,
    r.score === null ? `none: ${r.scoreError ?? ''}` : r.score.toFixed(3),
    r.passed ? 'yes' : 'no',
    String(r.attempts),
    `${r.verdicts.passed}/${r.verdicts.rejected}/${r.verdicts.uncertain}`,
    String(r.escalations),
    usd(r.costUsd),
    `${r.wallMs} ms`,
  ]);
  const perCase = table(
    ['VARIANT', 'CASE', 'OUTCOME', 'SCORE', 'PASSED', 'ATTEMPTS', 'VERDICTS +/-/?', 'ESCALATIONS', 'COST', 'WALL'],
    rows,
  );
  return `${head}${summary}\n\n${perCase}\n`;
}

/** A comparison as `eval compare` prints it, the regressions last. */
export function renderComparison(c: EvalComparison): string {
  const rows = c.deltas.map((d) => [
    d.variant,
    `${percent(d.a.passRate)} → ${percent(d.b.passRate)}`,
    `${signed(d.passRate * 100, 1)} pts`,
    d.meanScore === null ? '-' : signed(d.meanScore, 3),
    signed(d.meanAttempts),
    signed(d.escalationsPerCase),
    signed(d.tokensPerCase, 0),
    d.costPerCase === null ? 'unknown' : signed(d.costPerCase, 4),
    `${signed(d.meanWallMs, 0)} ms`,
  ]);
  const lines = [
    `${c.runB} against ${c.runA} (threshold: a pass-rate drop of ${signed(-c.threshold * 100, 1)} pts)`,
    table(
      ['VARIANT', 'PASS RATE', 'Δ', 'Δ SCORE', 'Δ ATTEMPTS', 'Δ ESC/CASE', 'Δ TOKENS/CASE', 'Δ COST/CASE', 'Δ WALL'],
      rows,
    ),
  ];
  if (c.onlyInA.length > 0) lines.push(`only in ${c.runA}: ${c.onlyInA.join(', ')}`);
  if (c.onlyInB.length > 0) lines.push(`only in ${c.runB}: ${c.onlyInB.join(', ')}`);
  for (const d of c.deltas.filter((x) => x.regressed))
    lines.push(
      `regression: ${d.variant} passes ${percent(d.b.passRate)}, down from ${percent(d.a.passRate)} (${signed(d.passRate * 100, 1)} pts, more than the threshold)`,
    );
  if (c.regressions.length === 0) lines.push('no regression');
  return `${lines.join('\n')}\n`;
}
