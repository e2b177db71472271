/**
 * Seed 004's files on the user's machine: a v3 `pipeline.yaml` whose stages name templates, each template a
 * folder with `stage.yaml` and its prompt file. `loadLoopPipeline` reads and checks them all (every problem
 * at once, naming the file, the field and the fix) and turns them into an ordinary pipeline spec of `loop`
 * stages, one after the other, with each template inlined: the worker never reads a file a spec names.
 *
 * Templates are found next to the pipeline file: `stages/<template>/stage.yaml` (the seed's layout), then
 * `<template>/stage.yaml`.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import {
  describeFileIssue,
  LOOP_STAGE,
  LoopPipelineFileSchema,
  outputProblems,
  StageFileSchema,
  type LoopPipelineFile,
  type StageFile,
} from '../spec';
import { LITERAL_VARIABLE, LOOP_VARIABLES } from '../spec';
import type { Json } from '../../../model/shapes';
import { unknownVariables } from '../../../model/spec-problems';
import { SpecLines } from '../../../pipelines/spec-lines';
import { load } from '../../../pipelines/lazy-modules';

/** Whether a parsed pipeline file is a v3 loop pipeline (its stages name templates). */
export function isLoopPipelineFile(raw: unknown): boolean {
  const stages = (raw as { stages?: unknown } | null)?.stages;
  return (
    Array.isArray(stages) &&
    stages.length > 0 &&
    stages.every((s) => typeof s === 'object' && s !== null && 'template' in s)
  );
}

export interface LoopPipelineOptions {
  /** The session: its folder under the runs directory, `${SESSION}` in paths (default: the work item's id). */
  session?: string;
}

/** Thrown with every problem of a loop pipeline's files. */
export class LoopFilesError extends Error {
  constructor(readonly problems: string[]) {
    super(
      `the loop pipeline has ${problems.length} problem${problems.length === 1 ? '' : 's'}:\n${problems.map((p) => `  - ${p}`).join('\n')}`,
    );
    this.name = 'LoopFilesError';
  }
}

const STAGE_FIELDS = Object.keys(StageFileSchema.shape);
const PIPELINE_FIELDS = Object.keys(LoopPipelineFileSchema.shape);

/**
 * The ordinary spec of a v3 pipeline (already parsed from `file`): each stage a `run: loop` stage depending
 * on the one before it (and on the one its `inputs.from` names). Throws {@link LoopFilesError}.
 */
export function loopPipelineSpec(file: string, raw: unknown, options: LoopPipelineOptions = {}): Json {
  const problems: string[] = [];
  const display = path.relative(process.cwd(), file) || file;
  const parsed = LoopPipelineFileSchema.safeParse(raw);
  if (!parsed.success) {
    for (const issue of parsed.error.issues)
      problems.push(
        describeFileIssue(
          display,
          issue,
          issue.path.length > 2 && issue.path[0] === 'stages'
            ? ['id', 'template', 'max_iterations', 'inputs', 'output', 'verify']
            : PIPELINE_FIELDS,
          valueAt(raw, issue.path),
        ),
      );
    throw new LoopFilesError(problems);
  }
  const pipeline = parsed.data;
  const dir = path.dirname(file);
  const ids = pipeline.stages.map((s) => s.id);
  ids.forEach((id, i) => {
    if (ids.indexOf(id) !== i)
      problems.push(`${display}: stages[${i}].id: "${id}" is used twice; stage ids are unique`);
  });
  const templates = new Map<string, StageFile>();
  for (const [i, entry] of pipeline.stages.entries()) {
    if (entry.inputs && !ids.slice(0, i).includes(entry.inputs.from)) {
      problems.push(
        `${display}: stages[${i}].inputs.from: "${entry.inputs.from}" is not an earlier stage (${i === 0 ? 'the first stage has no inputs; remove it' : `earlier: ${ids.slice(0, i).join(', ')}`})`,
      );
    }
    problems.push(...outputProblems(entry.output, `${display}: stages[${i}].output`));
    problems.push(...fieldVariables(display, ['stages', i, 'output'], entry.output, 'output'));
    (entry.verify ?? []).forEach((command, j) => {
      problems.push(...fieldVariables(display, ['stages', i, 'verify', j], command, 'verify'));
    });
    if (!templates.has(entry.template)) {
      const loaded = loadTemplate(dir, entry.template, `${display}: stages[${i}].template`);
      if (loaded.ok) templates.set(entry.template, loaded.stage);
      else problems.push(...loaded.problems);
    }
  }
  if (problems.length > 0) throw new LoopFilesError(problems);
  return toSpec(pipeline, templates, options);
}

/** Reads `file` (YAML or JSON, by its extension) and returns {@link loopPipelineSpec} of it. */
export function loadLoopPipeline(
  file: string,
  readFile: (file: string) => unknown,
  options: LoopPipelineOptions = {},
): Json {
  return loopPipelineSpec(file, readFile(file), options);
}

function toSpec(pipeline: LoopPipelineFile, templates: Map<string, StageFile>, options: LoopPipelineOptions): Json {
  const runtime = pipeline.guardrails?.max_runtime_seconds;
  const stages = pipeline.stages.map((entry, i) => {
    const previous = i > 0 ? [pipeline.stages[i - 1]!.id] : [];
    const dependsOn = [...new Set([...previous, ...(entry.inputs ? [entry.inputs.from] : [])])];
    const config = {
      template: entry.template,
      stage: templates.get(entry.template)!,
      index: i,
      ...(entry.max_iterations !== undefined ? { max_iterations: entry.max_iterations } : {}),
      ...(entry.inputs ? { inputs: entry.inputs } : {}),
      ...(entry.output !== undefined ? { output: entry.output } : {}),
      ...(entry.verify !== undefined ? { verify: entry.verify } : {}),
      ...(options.session !== undefined ? { session: options.session } : {}),
      ...(runtime !== undefined ? { pipeline_max_runtime_seconds: runtime } : {}),
    };
    return {
      name: entry.id,
      run: LOOP_STAGE,
      ...(dependsOn.length > 0 ? { depends_on: dependsOn } : {}),
      with: config,
    };
  });
  return {
    name: pipeline.name,
    ...(pipeline.description !== undefined ? { description: pipeline.description } : {}),
    stages,
  } as unknown as Json;
}

/** A template's `stage.yaml`, checked, with its prompt file's text inlined. */
function loadTemplate(
  dir: string,
  template: string,
  where: string,
): { ok: true; stage: StageFile } | { ok: false; problems: string[] } {
  const candidates = [path.join(dir, 'stages', template, 'stage.yaml'), path.join(dir, template, 'stage.yaml')];
  const found = candidates.find((c) => existsSync(c));
  if (!found)
    return {
      ok: false,
      problems: [
        `${where}: no stage template "${template}": looked for ${candidates.map((c) => path.relative(process.cwd(), c)).join(' and ')}; create stages/${template}/stage.yaml next to the pipeline file`,
      ],
    };
  const display = path.relative(process.cwd(), found);
  let raw: unknown;
  try {
    raw = load.yaml().parse(readFileSync(found, 'utf8'));
  } catch (error) {
    return { ok: false, problems: [`${display}: not valid YAML: ${(error as Error).message.split('\n')[0]}`] };
  }
  const parsed = StageFileSchema.safeParse(raw);
  if (!parsed.success)
    return {
      ok: false,
      problems: parsed.error.issues.map((issue) =>
        describeFileIssue(
          display,
          issue,
          issue.path[0] === 'termination'
            ? ['type', 'min_iterations', 'consensus', 'queue']
            : issue.path[0] === 'guardrails'
              ? ['max_iterations', 'max_runtime_seconds']
              : STAGE_FIELDS,
          valueAt(raw, issue.path),
        ),
      ),
    };
  const problems = outputProblems(parsed.data.output, `${display}: output`);
  problems.push(...fieldVariables(display, ['output'], parsed.data.output, 'output'));
  (parsed.data.verify ?? []).forEach((command, j) => {
    problems.push(...fieldVariables(display, ['verify', j], command, 'verify'));
  });
  const promptFile = path.resolve(path.dirname(found), parsed.data.prompt);
  let prompt = '';
  try {
    prompt = readFileSync(promptFile, 'utf8');
    const shown = path.relative(process.cwd(), promptFile);
    const unknown = unknownVariables(prompt, LOOP_VARIABLES.prompt, LITERAL_VARIABLE.prompt);
    problems.push(...unknown.map((v) => `${shown}:${v.line}: ${v.message}`));
  } catch {
    problems.push(
      `${display}: prompt: cannot read ${path.relative(process.cwd(), promptFile)}; name the prompt template file, relative to the stage folder`,
    );
  }
  if (problems.length > 0) return { ok: false, problems };
  return { ok: true, stage: { ...parsed.data, prompt } };
}

/**
 * Unknown `${NAME}` variables in one field of a YAML file, as `file:line: field: …` (the line where the
 * field is, when the file has it).
 */
function fieldVariables(
  display: string,
  at: (string | number)[],
  text: string | undefined,
  where: keyof typeof LOOP_VARIABLES,
): string[] {
  if (text === undefined) return [];
  const found = unknownVariables(text, LOOP_VARIABLES[where], LITERAL_VARIABLE[where]);
  if (found.length === 0) return [];
  let line: number | undefined;
  try {
    line = new SpecLines(readFileSync(path.resolve(display), 'utf8')).lineOf(at);
  } catch {
    line = undefined;
  }
  const field = at.map((k, i) => (typeof k === 'number' ? `[${k}]` : `${i > 0 ? '.' : ''}${k}`)).join('');
  return found.map((v) => `${display}${line !== undefined ? `:${line}` : ''}: ${field}: ${v.message}`);
}

function valueAt(raw: unknown, at: PropertyKey[]): unknown {
  let value: unknown = raw;
  for (const key of at)
    value = value !== null && typeof value === 'object' ? (value as Record<PropertyKey, unknown>)[key] : undefined;
  return value;
}
