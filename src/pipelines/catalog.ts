/**
 * Built-in pipelines that `treadle run <name>` knows, each with a sample input. Specs are files under
 * `examples/` so that users read and copy the same YAML the CLI runs.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type * as KindsModule from '../kinds';
import { load } from './lazy-modules';
import { outputSchemaChecks } from '../agents/output-schema-checks-lazy';
import type { KnownImplementations } from '../model/pipeline';
import type { Json } from '../model/shapes';

/** A pipeline shipped with Treadle. */
export interface CatalogEntry {
  name: string;
  description: string;
  specFile: string;
  sampleInputFile: string;
}

/** The examples folder, found from both `src/` (tests) and `lib/` (the built CLI). */
export const EXAMPLES_DIR = path.resolve(__dirname, '..', '..', 'examples');

export const CATALOG: CatalogEntry[] = [
  {
    name: 'review-demo',
    description: 'scripted: retry with feedback, escalation to a human, parallel checks, sign-off',
    specFile: path.join(EXAMPLES_DIR, 'review-demo.yaml'),
    sampleInputFile: path.join(EXAMPLES_DIR, 'review-demo.input.json'),
  },
  {
    name: 'documents',
    description:
      'seed 000 use case B: text to markdown, concepts, embeddings, FTS index, cross references, final review',
    specFile: path.join(EXAMPLES_DIR, 'documents', 'pipeline.yaml'),
    sampleInputFile: path.join(EXAMPLES_DIR, 'documents', 'report.json'),
  },
  {
    name: 'documents-llm',
    description:
      'the document pipeline with model-backed conversion and concept extraction (scripted replies offline, Claude with ANTHROPIC_API_KEY)',
    specFile: path.join(EXAMPLES_DIR, 'documents', 'pipeline-llm.yaml'),
    sampleInputFile: path.join(EXAMPLES_DIR, 'documents', 'report-llm.json'),
  },
  {
    name: 'discovery',
    description:
      'seed 002: opportunity briefs → solutions → technical specs → delivery plan, each boundary validated by the stage that receives it (scripted replies offline)',
    specFile: path.join(EXAMPLES_DIR, 'discovery', 'pipeline.yaml'),
    sampleInputFile: path.join(EXAMPLES_DIR, 'discovery', 'findings.json'),
  },
  {
    name: 'email-triage',
    description:
      'seed 003: extract, classify (fan-out), dedup and route an inbox, then approve the tasks, meetings and replies to make (scripted replies offline)',
    specFile: path.join(EXAMPLES_DIR, 'triage', 'pipeline.yaml'),
    sampleInputFile: path.join(EXAMPLES_DIR, 'triage', 'inbox.json'),
  },
];

/**
 * The worker side of the table of stage kinds (src/kinds/index.ts): their names and config checks. Its rows
 * load their activities only when a worker registers them, so this loads no worker code and no Temporal SDK;
 * it is loaded when a spec is checked, because the config checks load zod, which `--help` never needs.
 */
function stageKinds(): ReturnType<typeof KindsModule.workerKinds> {
  return load.kinds().workerKinds();
}

/**
 * The implementation names `defaultRegistry()` registers and, with no action types, `defaultActionRegistry()`'s,
 * known without loading the implementations and the Temporal SDK behind them (~60 ms and more; issue 7): the
 * generic stages and gates written out, the stage kinds from their table. test/integration/cli.test.ts fails when
 * they disagree.
 */
export const GENERIC_IMPLEMENTATIONS = {
  /** `llm`, `scripted` and every stage kind, sorted. */
  get stages(): string[] {
    return ['llm', 'scripted', ...stageKinds().map((kind) => kind.name)].sort();
  },
  gates: ['llm-judge', 'scripted'],
  actions: [] as string[],
};

/**
 * The names the bundled examples (examples/, src/cli/bundled-examples.ts) add for the CLI's worker: the
 * document pipeline's and triage's stages and gates, the seed's five action types. cli.test.ts checks them too.
 */
export const EXAMPLE_IMPLEMENTATIONS = {
  stages: [
    'build_fts_index',
    'cross_reference',
    'extract_concepts',
    'final_review',
    'generate_embeddings',
    'pdf_to_markdown',
    'triage_dedup',
    'triage_route',
  ],
  gates: ['concept_graph', 'markdown_quality'],
  actions: ['add_busy_block', 'batch_create_tasks', 'create_task', 'modify_task', 'send_message'],
};

const together = (generic: string[], examples: string[]): string[] => [...generic, ...examples].sort();

/**
 * What the CLI's worker (`treadle worker`, `dev`, `demo`) registers, the generic names and the examples'
 * together, sorted as a registry lists them: what `treadle validate` and `treadle run` check specs against.
 */
export const BUILT_IN_IMPLEMENTATIONS: KnownImplementations = {
  get stages() {
    return together(GENERIC_IMPLEMENTATIONS.stages, EXAMPLE_IMPLEMENTATIONS.stages);
  },
  gates: together(GENERIC_IMPLEMENTATIONS.gates, EXAMPLE_IMPLEMENTATIONS.gates),
  actions: together(GENERIC_IMPLEMENTATIONS.actions, EXAMPLE_IMPLEMENTATIONS.actions),
  // Configs are checked as the worker checks them: a stage kind's by its row of the table, the llm ones
  // (templates) here; the checks load only when needed.
  checkConfig: (kind, name, config) => {
    const stageKind = kind === 'stage' ? stageKinds().find((k) => k.name === name) : undefined;
    if (stageKind) return stageKind.checkConfig?.(config) ?? [];
    if (!(kind === 'stage' && name === 'llm') && !(kind === 'gate' && name === 'llm-judge')) return [];
    const checks = load.llmConfig();
    return kind === 'stage' ? checks.llmStageConfigProblems(config) : checks.llmJudgeConfigProblems(config);
  },
  // Ajv loads only for specs with an `output_schema:`.
  outputSchemaProblem: (schema) => outputSchemaChecks().outputSchemaProblem(schema),
};

/** Reads a pipeline file (YAML or JSON) into the raw spec; validation happens later, listing every problem. */
export function readPipelineFile(file: string): unknown {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new Error(
      `cannot read pipeline file ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
    );
  }
  try {
    return file.endsWith('.json') ? JSON.parse(text) : parseYaml(text);
  } catch (error) {
    throw new Error(
      `${file} is not valid ${file.endsWith('.json') ? 'JSON' : 'YAML'}: ${oneLine((error as Error).message.split('\n')[0]!.replace(/:\s*$/, ''))}`,
    );
  }
}

/** The YAML parser (~35 ms to load), loaded by the first YAML file read rather than by every CLI command. */
function parseYaml(text: string): unknown {
  return load.yaml().parse(text);
}

/** Finds a built-in pipeline by name, with an error listing the names. */
export function findPipeline(name: string): CatalogEntry {
  const entry = CATALOG.find((e) => e.name === name);
  if (!entry)
    throw new Error(
      `unknown pipeline "${name}" (built-in: ${CATALOG.map((e) => e.name).join(', ')}; or pass --file pipeline.yaml)`,
    );
  return entry;
}

/** Reads a JSON file. */
export function readJsonFile(file: string): Json {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new Error(`cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  try {
    return JSON.parse(text) as Json;
  } catch (error) {
    throw new Error(`${file} is not valid JSON: ${oneLine((error as Error).message)}`);
  }
}

/** Parser messages may quote the input, newlines and all; errors stay on one line. */
export function oneLine(message: string): string {
  return message.replace(/\s+/g, ' ').trim();
}
