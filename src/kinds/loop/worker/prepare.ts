/**
 * The loop stage's prepare step: checks the stage's config and commands, makes the stage's folders, writes
 * its inputs (upstream artefacts, the work item's input, the gate's feedback) and stores the plan once, for
 * every iteration to read by reference.
 */
import { appendFile, mkdir, readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { argvOf, DEFAULT_QUEUE_COMMAND, LOOP_COMMANDS_ENV, substitute } from './commands';
import { relativeOrAbsolute, safeName, sizeOf, type StoredPlan } from './run-folder';
import {
  checkLoopStageConfig,
  isInternalOutput,
  iterationDir,
  LOOP_DEFAULTS,
  LOOP_ITERATIONS_PER_RUN,
  LoopStageConfigSchema,
  stageDirName,
  type LoopArtefact,
  type LoopPrepareInput,
  type LoopPrepareResult,
  type LoopStageConfig,
} from '../spec';
import { isBlobRef, type Artefact, type Json } from '../../../model/shapes';
import { resolveArtefact, storeJson, type BlobStore } from '../../../storage/blob-store';
import { isRecord } from '../../../activities/sources';
import { checkCommand, commandList } from '../../../activities/test-command';

/** Where a stage's files go, worked out once from its config. */
interface StageLayout {
  session: string;
  stageIndex: number;
  stageDir: string;
  /** The session's run folder, absolute. */
  sessionAbs: string;
  /** The session's run folder as agents see it (workspace-relative when inside it). */
  sessionDir: string;
  /** Whether the output lives in the stage folder (else it is mirrored there). */
  internal: boolean;
  output: string;
}

/** Checks a loop stage, lays out its folders and inputs, and stores its plan; problems come back, not thrown. */
export async function prepare(
  input: LoopPrepareInput,
  deps: { blobs: BlobStore },
  env: NodeJS.ProcessEnv,
  at: { workspace: string; runs: string },
): Promise<LoopPrepareResult> {
  const raw = (await resolveArtefact(input.config ?? undefined, deps.blobs)) ?? null;
  const problems = checkLoopStageConfig(raw);
  if (problems.length > 0) return { ok: false, problems };
  const config = LoopStageConfigSchema.parse(raw);
  const layout = layoutOf(config, input, at);

  // Commands: every one on the allow-list, checked with the variables it will have.
  let allowed: string[][];
  try {
    allowed = commandList(env, LOOP_COMMANDS_ENV, []);
  } catch (error) {
    return { ok: false, problems: [(error as Error).message] };
  }
  const verify = config.verify ?? config.stage.verify ?? [];
  problems.push(...commandProblems(config, verify, layout, allowed));
  if (config.inputs && !(config.inputs.from in input.upstream)) {
    problems.push(
      `inputs.from: "${config.inputs.from}" is not a stage this one depends on (its dependencies: ${Object.keys(input.upstream).join(', ') || 'none'}); add it to depends_on, or name one of them`,
    );
  }
  if (problems.length > 0) return { ok: false, problems };

  const existing = await makeStageFolder(input, layout);
  const { fromStage, replies } = await writeInputs(config, input, layout.sessionAbs, deps.blobs);
  const plan = await planOf({ config, input, layout, verify, fromStage, replies, existing }, deps.blobs);
  const planRef = await storeJson(deps.blobs, plan, `loop plan of ${input.itemId}/${input.stage}`);
  const {
    itemId: _i,
    pipeline: _p,
    stage: _s,
    stageIndex: _x,
    template: _t,
    prompt: _pr,
    agent: _a,
    model: _m,
    verify: _v,
    fromStage: _f,
    repliesRef: _r,
    mirrorOutput: _mo,
    ...small
  } = plan;
  return { ok: true, planRef, plan: small };
}

function layoutOf(
  config: LoopStageConfig,
  input: LoopPrepareInput,
  at: { workspace: string; runs: string },
): StageLayout {
  const stage = config.stage;
  const session = config.session ?? safeName(input.itemId);
  const stageIndex = config.index ?? input.stageIndex;
  const stageDir = stageDirName(stageIndex, input.stage);
  const sessionAbs = path.join(at.runs, session);
  const sessionDir = relativeOrAbsolute(at.workspace, sessionAbs);
  const internal = isInternalOutput(config.output ?? stage.output);
  const output = internal
    ? path.posix.join(sessionDir, stageDir, 'output.md')
    : substitute(config.output ?? stage.output!, { SESSION: session });
  return { session, stageIndex, stageDir, sessionAbs, sessionDir, internal, output };
}

/** Why the stage's verify and queue commands would be refused (none when all are allowed). */
function commandProblems(
  config: LoopStageConfig,
  verify: string[],
  layout: StageLayout,
  allowed: string[][],
): string[] {
  const { session, sessionDir, stageDir, output } = layout;
  const problems: string[] = [];
  const variables = {
    SESSION: session,
    OUTPUT: output,
    PROGRESS: path.posix.join(sessionDir, stageDir, 'progress.md'),
    CTX: path.posix.join(sessionDir, stageDir, 'iterations', '001', 'context.json'),
    STATUS: path.posix.join(sessionDir, stageDir, 'iterations', '001', 'status.json'),
  };
  for (const command of verify) {
    const refused = checkCommand(argvOf(substitute(command, variables)), allowed, {
      what: 'verify command',
      env: LOOP_COMMANDS_ENV,
      args: 'relative file paths',
    });
    if (refused) problems.push(`verify: ${refused}`);
  }
  const termination = config.stage.termination;
  if (termination.type === 'queue' && (termination.queue?.provider ?? 'command') === 'command') {
    const command = termination.queue?.provider === 'command' ? termination.queue.command : DEFAULT_QUEUE_COMMAND;
    const refused = checkCommand(argvOf(command), allowed, {
      what: 'queue command',
      env: LOOP_COMMANDS_ENV,
      args: 'relative file paths',
    });
    if (refused) problems.push(`stage.termination.queue: ${refused}`);
  }
  return problems;
}

/**
 * Makes the stage's folders and appends the gate's feedback on a retried attempt to `progress.md`; returns
 * how many iterations the folder already holds.
 */
async function makeStageFolder(input: LoopPrepareInput, layout: StageLayout): Promise<number> {
  const { sessionAbs, stageDir } = layout;
  await mkdir(path.join(sessionAbs, stageDir, 'iterations'), { recursive: true });
  // Never overwrite an iteration: a later attempt (or a reused session) numbers its iterations after them.
  const existing = (await readdir(path.join(sessionAbs, stageDir, 'iterations'))).filter((d) =>
    /^\d{3,}$/.test(d),
  ).length;
  if (input.feedback && (input.attempt ?? 1) > 1) {
    // The gate's feedback on the last attempt, where the next agents read what was learned.
    const lines = [
      `## Quality gate feedback on attempt ${(input.attempt ?? 2) - 1}`,
      `- ${input.feedback.summary.replace(/\s+/g, ' ').trim()}`,
      ...input.feedback.failed.map((f) => `- failed: ${f.replace(/\s+/g, ' ').trim()}`),
    ];
    const progress = path.join(sessionAbs, stageDir, 'progress.md');
    const before = await sizeOf(progress);
    await appendFile(progress, `${before > 0 ? '\n' : ''}${lines.join('\n')}\n`);
  }
  return existing;
}

/**
 * Writes the stage's inputs to `inputs/` (a loop stage upstream is named by its snapshots instead) and
 * returns them as `context.json` lists them, with the scripted agent's replies taken out of the item's input.
 */
async function writeInputs(
  config: LoopStageConfig,
  input: LoopPrepareInput,
  sessionAbs: string,
  blobs: BlobStore,
): Promise<{ fromStage: Record<string, string[]>; replies: Json | undefined }> {
  // Inputs: the stage named by `inputs.from`, else every stage this one depends on.
  const fromStage: Record<string, string[]> = {};
  const sources = config.inputs ? [config.inputs.from] : Object.keys(input.upstream);
  for (const name of sources) {
    const artefact = input.upstream[name];
    if (artefact === undefined) continue;
    const loop = await loopArtefactOf(artefact, blobs);
    if (loop) {
      fromStage[name] = config.inputs?.select === 'all' ? snapshotsOf(loop) : [loop.latest];
      continue;
    }
    const value = await resolveArtefact(artefact, blobs);
    const file = `inputs/${name}.${typeof value === 'string' ? 'md' : 'json'}`;
    await writeInputFile(sessionAbs, file, value);
    fromStage[name] = [file];
  }
  const itemInput = await resolveArtefact(input.input, blobs);
  const { agent_replies: replies, ...rest } = isRecord(itemInput) ? itemInput : { agent_replies: undefined };
  if (!config.inputs && isRecord(itemInput) && Object.keys(rest).length > 0) {
    await writeInputFile(sessionAbs, 'inputs/input.json', rest as Json);
    fromStage.input = ['inputs/input.json'];
  } else if (!config.inputs && itemInput !== undefined && itemInput !== null && !isRecord(itemInput)) {
    await writeInputFile(sessionAbs, `inputs/input.${typeof itemInput === 'string' ? 'md' : 'json'}`, itemInput);
    fromStage.input = [`inputs/input.${typeof itemInput === 'string' ? 'md' : 'json'}`];
  }
  return { fromStage, replies };
}

/** The plan of a checked stage, its scripted replies stored by reference. */
async function planOf(
  from: {
    config: LoopStageConfig;
    input: LoopPrepareInput;
    layout: StageLayout;
    verify: string[];
    fromStage: Record<string, string[]>;
    replies: Json | undefined;
    existing: number;
  },
  blobs: BlobStore,
): Promise<StoredPlan> {
  const { config, input, layout, verify, fromStage, replies, existing } = from;
  const { stage } = config;
  const { session, stageIndex, stageDir, sessionDir, internal, output } = layout;
  const termination = stage.termination;
  const maxIterations = config.max_iterations ?? stage.guardrails?.max_iterations ?? LOOP_DEFAULTS.maxIterations;
  const plan: StoredPlan = {
    itemId: input.itemId,
    pipeline: input.pipeline,
    stage: input.stage,
    stageIndex,
    template: config.template ?? stage.name,
    prompt: stage.prompt,
    ...(stage.agent !== undefined ? { agent: stage.agent } : {}),
    ...(stage.model !== undefined ? { model: stage.model } : {}),
    verify,
    fromStage,
    ...(replies !== undefined
      ? { repliesRef: await storeJson(blobs, replies, `scripted replies for ${input.stage}`) }
      : {}),
    mirrorOutput: !internal,
    session,
    stageDir,
    sessionDir,
    termination,
    maxIterations,
    maxRuntimeSeconds: stage.guardrails?.max_runtime_seconds ?? LOOP_DEFAULTS.maxRuntimeSeconds,
    pipelineDeadlineMs:
      config.pipeline_max_runtime_seconds !== undefined
        ? input.itemStartedAtMs + config.pipeline_max_runtime_seconds * 1000
        : null,
    delaySeconds: stage.delay ?? 0,
    iterationsPerRun: config.iterations_per_run ?? LOOP_ITERATIONS_PER_RUN,
    output,
    ...(existing > 0 ? { startIteration: existing } : {}),
  };
  return plan;
}

async function loopArtefactOf(artefact: Artefact, blobs: BlobStore): Promise<LoopArtefact | undefined> {
  const value =
    isBlobRef(artefact) && artefact.mediaType === 'application/json'
      ? await resolveArtefact(artefact, blobs)
      : artefact;
  if (
    !isRecord(value) ||
    typeof value.stageDir !== 'string' ||
    typeof value.latest !== 'string' ||
    typeof value.iterations !== 'number' ||
    typeof value.session !== 'string'
  )
    return undefined;
  return value as unknown as LoopArtefact;
}

/** Every iteration snapshot of a finished loop stage, session-relative, in order. */
function snapshotsOf(loop: LoopArtefact): string[] {
  return Array.from({ length: loop.iterations }, (_, i) => `${loop.stageDir}/${iterationDir(i + 1)}/output.md`);
}

async function writeInputFile(sessionAbs: string, file: string, value: Json | undefined): Promise<void> {
  const target = path.join(sessionAbs, file);
  await mkdir(path.dirname(target), { recursive: true });
  await writeFile(target, typeof value === 'string' ? value : `${JSON.stringify(value ?? null, null, 2)}\n`);
}
