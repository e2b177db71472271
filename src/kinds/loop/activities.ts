/**
 * The loop stage's activities (seed 004): every file the seed names, in its layout, under the session's run
 * folder on the worker (`<workspace>/.treadle/pipeline-runs/<session>/`):
 *
 * ```
 * state.json                     the seed's pipeline state (and failure state)
 * inputs/                        upstream artefacts of ordinary stages, the work item's input
 * stage-NN-<id>/
 *   progress.md                  append-only learnings
 *   output.md                    the current output (a copy when the output lives elsewhere)
 *   iterations/NNN/              context.json, status.json, output.md (snapshot), verify.log
 * ```
 *
 * - `loopPrepare` checks the stage's config, makes the folders, writes the inputs and stores the plan once.
 * - `loopIteration` runs one iteration: writes `context.json`, renders the prompt with `${CTX}`,
 *   `${PROGRESS}`, `${OUTPUT}`, `${STATUS}` (and `${SESSION}`), runs a **fresh** agent (no conversation),
 *   reads and validates `status.json`, snapshots the output, makes sure `progress.md` has the iteration,
 *   and runs the `verify` commands. An agent that fails or reports an error is a *result* (fail fast: the
 *   workflow stops and waits for a resume), never a thrown error Temporal would retry blindly; what is
 *   thrown (a full disk, a lost worker) is infrastructure, Temporal's to retry, and a retried iteration first
 *   puts `progress.md` and the output back as they were before it.
 * - `loopQueueCheck` asks a command-based queue whether it is empty; `loopWriteState` writes `state.json`.
 *
 * A spec never names a file the worker reads: prompts come inline, paths are checked to stay inside the
 * workspace, and commands must be on the worker's allow-list (`TREADLE_LOOP_COMMANDS`).
 */
import { execFile } from 'node:child_process';
import {
  appendFile,
  copyFile,
  mkdir,
  readdir,
  readFile,
  rename,
  rm,
  stat,
  truncate,
  writeFile,
} from 'node:fs/promises';
import path from 'node:path';
import { CancelledFailure } from '@temporalio/common';
import { recordingAgent } from '../../agents';
import { defaultAgentName, type AgentProviders } from '../../agents/providers';
import { SCRIPTED_PROVIDER } from '../../agents/scripted';
import type { AgentRequest, AgentResult } from '../../agents/types';
import { worktreeAccess, worktreeTools } from '../../agents/worktree-tools';
import { readQueueOutput, type QueueReading } from './termination';
import {
  LOOP_ARTEFACT_ACTIVITY,
  LOOP_CHECK_QUEUE_ACTIVITY,
  LOOP_ITERATION_ACTIVITY,
  LOOP_PREPARE_ACTIVITY,
  LOOP_WRITE_STATE_ACTIVITY,
} from '../../model/activity-types';
import { DEFAULT_BLOB_THRESHOLD_BYTES, truncateText } from '../../model/limits';
import {
  checkLoopStageConfig,
  isInternalOutput,
  iterationDir,
  LOOP_DEFAULTS,
  LOOP_ITERATIONS_PER_RUN,
  LoopStageConfigSchema,
  MAX_STATUS_TEXT,
  stageDirName,
  StatusFileSchema,
  type IterationRecord,
  type LoopArtefact,
  type LoopContext,
  type LoopError,
  type LoopPlan,
  type LoopIterationInput,
  type LoopIterationResult,
  type LoopPrepareInput,
  type LoopPrepareResult,
  type LoopWriteStateInput,
} from './spec';
import { isBlobRef, type Artefact, type Json, type UsageTotals } from '../../model/shapes';
import { offloadArtefact, readJson, resolveArtefact, storeJson, type BlobStore } from '../../storage/blob-store';
import { callLogWriter, type CallLog } from '../../storage/call-log';
import { ConversationStore } from '../../storage/conversation';
import { supervise, withHeartbeats, type Supervision } from '../../activities/supervision';
import { isRecord } from '../../activities/sources';
import { checkCommand, commandList, PASSED_ENV, runTestCommand } from '../../activities/test-command';
import { writeFileInside } from '../../agents/worktree-files';

/** The folder loops work in (agents act there; output paths are relative to it); default the worker's working directory. */
export const LOOP_WORKSPACE_ENV = 'TREADLE_LOOP_WORKSPACE';
/** The runs folder, relative to the workspace unless absolute; default `.treadle/pipeline-runs`. */
export const LOOP_RUNS_ENV = 'TREADLE_LOOP_RUNS';
export const DEFAULT_LOOP_RUNS = path.join('.treadle', 'pipeline-runs');
/** JSON list of argv prefixes `verify` and queue commands may use; default none. */
export const LOOP_COMMANDS_ENV = 'TREADLE_LOOP_COMMANDS';
/** The seed's beads queue, when a queue loop names no provider. */
export const DEFAULT_QUEUE_COMMAND = 'bd ready --count';
/** A verify or queue command is killed after this long. */
const COMMAND_TIMEOUT_MS = 120_000;
/** What verify.log and the output snapshot may hold in the history: nothing; what a summary line shows of a command. */
const MAX_VERIFY_SUMMARY = 300;

export interface LoopActivityDependencies {
  blobs: BlobStore;
  agents: AgentProviders;
  callLog?: CallLog;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Artefacts above this size go to the blob store (the worker's `TREADLE_BLOB_THRESHOLD`). */
  blobThresholdBytes?: number;
}

/** Everything an iteration needs, stored once per stage (prompt included). */
interface StoredPlan extends LoopPlan {
  itemId: string;
  pipeline: string;
  stage: string;
  stageIndex: number;
  template: string;
  prompt: string;
  agent?: string;
  model?: string;
  verify: string[];
  /** `context.json`'s `inputs.from_stage`, session-relative. */
  fromStage: Record<string, string[]>;
  /** The scripted agent's replies (the work item's `agent_replies`), by reference. */
  repliesRef?: string;
  /** The output file also goes to the stage folder's `output.md` (when it lives elsewhere). */
  mirrorOutput: boolean;
}

export function createLoopActivities(deps: LoopActivityDependencies) {
  const env = deps.env ?? process.env;
  const cwd = deps.cwd ?? process.cwd();
  // Plans and scripted replies are read by every iteration of a loop: once per worker is enough (content-addressed).
  const stored = new Map<string, unknown>();
  const jsonOf = async <T>(ref: string): Promise<T> => {
    if (stored.has(ref)) return stored.get(ref) as T;
    const value = await readJson<T>(deps.blobs, ref);
    if (stored.size > 100) stored.clear();
    stored.set(ref, value);
    return value;
  };
  const planOf = (ref: string): Promise<StoredPlan> => jsonOf<StoredPlan>(ref);
  const where = (): { workspace: string; runs: string } => {
    const workspace = path.resolve(cwd, env[LOOP_WORKSPACE_ENV] || '.');
    return { workspace, runs: path.resolve(workspace, env[LOOP_RUNS_ENV] || DEFAULT_LOOP_RUNS) };
  };
  return {
    // Every loop activity heartbeats: their heartbeat timeout is how soon a lost worker is noticed.
    [LOOP_PREPARE_ACTIVITY]: async (input: LoopPrepareInput): Promise<LoopPrepareResult> =>
      withHeartbeats(() => prepare(input, deps, env, where())),
    [LOOP_ITERATION_ACTIVITY]: async (input: LoopIterationInput): Promise<LoopIterationResult> => {
      const plan = await planOf(input.planRef);
      const replies = plan.repliesRef ? await jsonOf<Json>(plan.repliesRef) : undefined;
      return supervise((supervision) => iterate(plan, replies, input, deps, env, where().workspace, supervision), {
        blobs: deps.blobs,
        onCalls: callLogWriter(deps.callLog, { pipeline: plan.pipeline, stage: plan.stage }),
      });
    },
    [LOOP_CHECK_QUEUE_ACTIVITY]: async (input: { planRef: string }): Promise<QueueReading> => {
      const plan = await planOf(input.planRef);
      return withHeartbeats(() => checkQueue(plan, env, where().workspace));
    },
    // The stage's artefact for the work item: the loop's result with the final output's text, offloaded when large.
    [LOOP_ARTEFACT_ACTIVITY]: async (input: { artefact: LoopArtefact }): Promise<Artefact> => {
      const { artefact } = input;
      return withHeartbeats(async () => {
        const text = artefact.outputRef ? (await deps.blobs.get(artefact.outputRef)).toString('utf8') : undefined;
        const full = { ...artefact, ...(text !== undefined ? { text } : {}) } as unknown as Json;
        return (await offloadArtefact(
          full,
          deps.blobs,
          deps.blobThresholdBytes ?? DEFAULT_BLOB_THRESHOLD_BYTES,
          `loop ${artefact.stage}: ${artefact.iterations} iterations, ${artefact.outputBytes} bytes of output`,
        ))!;
      });
    },
    [LOOP_WRITE_STATE_ACTIVITY]: async (input: LoopWriteStateInput): Promise<void> => {
      const plan = await planOf(input.planRef);
      await withHeartbeats(() => writeState(plan, input, where().workspace));
    },
  };
}

// ---------------------------------------------------------------------------------------------------------
// prepare

async function prepare(
  input: LoopPrepareInput,
  deps: LoopActivityDependencies,
  env: NodeJS.ProcessEnv,
  at: { workspace: string; runs: string },
): Promise<LoopPrepareResult> {
  const raw = (await resolveArtefact(input.config ?? undefined, deps.blobs)) ?? null;
  const problems = checkLoopStageConfig(raw);
  if (problems.length > 0) return { ok: false, problems };
  const config = LoopStageConfigSchema.parse(raw);
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

  // Commands: every one on the allow-list, checked with the variables it will have.
  let allowed: string[][];
  try {
    allowed = commandList(env, LOOP_COMMANDS_ENV, []);
  } catch (error) {
    return { ok: false, problems: [(error as Error).message] };
  }
  const verify = config.verify ?? stage.verify ?? [];
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
  const termination = stage.termination;
  if (termination.type === 'queue' && (termination.queue?.provider ?? 'command') === 'command') {
    const command = termination.queue?.provider === 'command' ? termination.queue.command : DEFAULT_QUEUE_COMMAND;
    const refused = checkCommand(argvOf(command), allowed, {
      what: 'queue command',
      env: LOOP_COMMANDS_ENV,
      args: 'relative file paths',
    });
    if (refused) problems.push(`stage.termination.queue: ${refused}`);
  }

  // Inputs: the stage named by `inputs.from`, else every stage this one depends on.
  const fromStage: Record<string, string[]> = {};
  const sources = config.inputs ? [config.inputs.from] : Object.keys(input.upstream);
  if (config.inputs && !(config.inputs.from in input.upstream)) {
    problems.push(
      `inputs.from: "${config.inputs.from}" is not a stage this one depends on (its dependencies: ${Object.keys(input.upstream).join(', ') || 'none'}); add it to depends_on, or name one of them`,
    );
  }
  if (problems.length > 0) return { ok: false, problems };

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
  for (const name of sources) {
    const artefact = input.upstream[name];
    if (artefact === undefined) continue;
    const loop = await loopArtefactOf(artefact, deps.blobs);
    if (loop) {
      fromStage[name] = config.inputs?.select === 'all' ? snapshotsOf(loop) : [loop.latest];
      continue;
    }
    const value = await resolveArtefact(artefact, deps.blobs);
    const file = `inputs/${name}.${typeof value === 'string' ? 'md' : 'json'}`;
    await writeInputFile(sessionAbs, file, value);
    fromStage[name] = [file];
  }
  const itemInput = await resolveArtefact(input.input, deps.blobs);
  const { agent_replies: replies, ...rest } = isRecord(itemInput) ? itemInput : { agent_replies: undefined };
  if (!config.inputs && isRecord(itemInput) && Object.keys(rest).length > 0) {
    await writeInputFile(sessionAbs, 'inputs/input.json', rest as Json);
    fromStage.input = ['inputs/input.json'];
  } else if (!config.inputs && itemInput !== undefined && itemInput !== null && !isRecord(itemInput)) {
    await writeInputFile(sessionAbs, `inputs/input.${typeof itemInput === 'string' ? 'md' : 'json'}`, itemInput);
    fromStage.input = [`inputs/input.${typeof itemInput === 'string' ? 'md' : 'json'}`];
  }

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
      ? { repliesRef: await storeJson(deps.blobs, replies, `scripted replies for ${input.stage}`) }
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

// ---------------------------------------------------------------------------------------------------------
// one iteration

async function iterate(
  plan: StoredPlan,
  replies: Json | undefined,
  input: LoopIterationInput,
  deps: LoopActivityDependencies,
  env: NodeJS.ProcessEnv,
  workspace: string,
  supervision: Parameters<Parameters<typeof supervise>[0]>[0],
): Promise<LoopIterationResult> {
  const n = input.iteration;
  const stageRel = path.posix.join(plan.sessionDir, plan.stageDir);
  const iterRel = path.posix.join(stageRel, iterationDir(n));
  const abs = (relative: string): string => path.resolve(workspace, relative);
  const paths = {
    session_dir: plan.sessionDir,
    stage_dir: stageRel,
    progress: path.posix.join(stageRel, 'progress.md'),
    output: plan.output,
    status: path.posix.join(iterRel, 'status.json'),
  };
  await mkdir(abs(iterRel), { recursive: true });
  await restoreOrMark(abs(iterRel), abs(paths.progress), abs(paths.output), abs(paths.status));
  const progressBefore = await sizeOf(abs(paths.progress));

  const context: LoopContext = {
    session: plan.session,
    pipeline: plan.pipeline,
    stage: { id: plan.stage, index: plan.stageIndex, template: plan.template },
    iteration: n,
    paths,
    inputs: {
      from_stage: plan.fromStage,
      from_previous_iterations: Array.from({ length: n - 1 }, (_, i) => `${iterationDir(i + 1)}/output.md`),
    },
    limits: { max_iterations: plan.maxIterations, remaining_seconds: input.remainingSeconds },
  };
  const ctxRel = path.posix.join(iterRel, 'context.json');
  await writeFile(abs(ctxRel), `${JSON.stringify(context, null, 2)}\n`);
  const prompt = substitute(plan.prompt, {
    CTX: ctxRel,
    PROGRESS: paths.progress,
    OUTPUT: paths.output,
    STATUS: paths.status,
    SESSION: plan.session,
    ITERATION: String(n),
  });

  // A fresh agent for every iteration: no conversation id, nothing carried over but the files.
  const provider = plan.agent ?? defaultAgentName(env);
  const factory = deps.agents[provider];
  const fail = (type: LoopError['type'], message: string): LoopIterationResult => ({
    ok: false,
    iteration: n,
    error: { type, message: truncateText(message, 1_000), timestamp: new Date().toISOString() },
    calls: supervision.calls.length,
    ...iterationUsage(supervision),
  });
  if (!factory)
    return fail(
      'invalid_config',
      `unknown agent provider "${provider}" (available: ${Object.keys(deps.agents).join(', ')})`,
    );
  const agent = recordingAgent(
    factory({
      itemId: plan.itemId,
      stage: plan.stage,
      attempt: input.run ?? n,
      input: replies !== undefined ? { agent_replies: replies } : null,
      config: undefined,
    }),
    {
      calls: supervision.calls,
      conversations: new ConversationStore(deps.blobs),
      ...(input.correlationId !== undefined ? { runCorrelationId: input.correlationId } : {}),
    },
  );
  const readOnly = [ctxRel, path.posix.join(plan.sessionDir, 'state.json')];
  const request: AgentRequest = {
    messages: [{ role: 'user', content: prompt }],
    ...(plan.model !== undefined ? { model: plan.model } : {}),
    correlationId: `${plan.itemId}/${plan.stage}/${n}`,
    signal: supervision.signal,
    heartbeat: () => supervision.heartbeat(),
    ...(provider === 'anthropic' ? { tools: worktreeTools(worktreeAccess(workspace, { readOnly })) } : {}),
    ...(provider === 'claude-code' ? { workdir: workspace } : {}),
  };
  let result: AgentResult;
  try {
    result = await agent.run(request);
  } catch (error) {
    if (error instanceof CancelledFailure || supervision.signal.aborted) throw error;
    // Fail fast: an agent that crashed is not retried blindly; the loop stops and waits to be resumed.
    return fail(
      'agent_crash',
      `the ${provider} agent failed: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  if (provider === SCRIPTED_PROVIDER) {
    const written = await applyScriptedReply(
      result,
      workspace,
      { output: paths.output, progress: paths.progress, status: paths.status },
      readOnly,
    );
    if (written) return fail(written.type, written.message);
  }

  // status.json: present, JSON, the seed's format, no error.
  let text: string;
  try {
    text = await readFile(abs(paths.status), 'utf8');
  } catch {
    return fail('missing_status', `the agent wrote no status file at ${paths.status}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    return fail('invalid_status', `${paths.status} is not JSON: ${(error as Error).message}`);
  }
  const parsed = StatusFileSchema.safeParse(json);
  if (!parsed.success)
    return fail(
      'invalid_status',
      `${paths.status} is not in the status format: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(file)'}: ${i.message}`).join('; ')}`,
    );
  const status = parsed.data;
  if (status.decision === 'error') return fail('agent_error', `the agent decided "error": ${status.reason}`);
  if (status.errors.length > 0)
    return fail(
      'agent_error',
      `the agent reported errors: ${status.errors.map((e) => (typeof e === 'string' ? e : JSON.stringify(e))).join('; ')}`,
    );

  // The engine's history: the output snapshot (and the stage folder's copy), the progress entry.
  let outputRef: string | undefined;
  let outputBytes = 0;
  const content = await readFile(abs(paths.output)).catch(() => undefined);
  if (content !== undefined) {
    await writeFile(path.join(abs(iterRel), 'output.md'), content);
    if (plan.mirrorOutput) await writeFile(path.join(abs(stageRel), 'output.md'), content);
    outputRef = (await deps.blobs.put(content, 'text/markdown', `${plan.stage} output after iteration ${n}`)).ref;
    outputBytes = content.length;
  }
  if ((await sizeOf(abs(paths.progress))) === progressBefore) {
    await appendFile(
      abs(paths.progress),
      `${progressBefore > 0 ? '\n' : ''}## Iteration ${n}\n- ${oneLine(status.summary || status.reason)}\n`,
    );
  }
  const verify =
    plan.verify.length > 0
      ? await runVerify(plan, workspace, abs(iterRel), { ...paths, CTX: ctxRel }, env, supervision.signal)
      : null;
  if (verify)
    await appendFile(abs(paths.progress), `- verify: ${verify.passed ? 'passed' : `FAILED (${verify.summary})`}\n`);

  return {
    ok: true,
    iteration: n,
    decision: status.decision,
    reason: truncateText(status.reason, MAX_STATUS_TEXT),
    summary: truncateText(status.summary, MAX_STATUS_TEXT),
    filesTouched: status.work?.files_touched.length ?? 0,
    itemsCompleted: status.work?.items_completed.length ?? 0,
    verify,
    ...(outputRef !== undefined ? { outputRef } : {}),
    outputBytes,
    calls: supervision.calls.length,
    ...iterationUsage(supervision),
  };
}

/** The totals of an iteration's model calls, when it made any (the records go to the call log). */
function iterationUsage(supervision: Supervision): { usage?: UsageTotals } {
  const usage = supervision.usage();
  return usage.calls > 0 ? { usage } : {};
}

/**
 * A retried iteration starts from the files as they were before its first try: `.begin.json` records the
 * progress file's size and whether there was an output (copied to `.output-before`).
 */
async function restoreOrMark(
  iterAbs: string,
  progressAbs: string,
  outputAbs: string,
  statusAbs: string,
): Promise<void> {
  const marker = path.join(iterAbs, '.begin.json');
  const before = path.join(iterAbs, '.output-before');
  const recorded = await readFile(marker, 'utf8').then(
    (t) => JSON.parse(t) as { progressBytes: number; hadOutput: boolean },
    () => undefined,
  );
  if (!recorded) {
    const hadOutput = await copyFile(outputAbs, before).then(
      () => true,
      () => false,
    );
    await writeFile(marker, JSON.stringify({ progressBytes: await sizeOf(progressAbs), hadOutput }));
    return;
  }
  if ((await sizeOf(progressAbs)) > recorded.progressBytes) await truncate(progressAbs, recorded.progressBytes);
  if (recorded.hadOutput) await copyFile(before, outputAbs);
  else await rm(outputAbs, { force: true });
  await rm(statusAbs, { force: true });
}

/**
 * The scripted agent acts through its reply: `{ output, progress, status, files }` writes the output (whole),
 * appends the progress entry, writes `status.json` (an object, or a string written as it is, so a reply can
 * script a malformed file) and any other workspace files; `{ crash: "…" }` is an agent crash.
 */
async function applyScriptedReply(
  result: AgentResult,
  workspace: string,
  paths: { output: string; progress: string; status: string },
  readOnly: string[],
): Promise<{ type: LoopError['type']; message: string } | undefined> {
  let reply: Json | undefined = result.output;
  if (reply === undefined) {
    try {
      reply = JSON.parse(result.text) as Json;
    } catch {
      return undefined; // plain text: the agent wrote nothing (and the status check says so)
    }
  }
  if (!isRecord(reply)) return undefined;
  if (typeof reply.crash === 'string') return { type: 'agent_crash', message: reply.crash };
  try {
    if (isRecord(reply.files))
      for (const [file, content] of Object.entries(reply.files))
        if (typeof content === 'string') await writeFileInside(workspace, file, content, { readOnly });
    if (typeof reply.output === 'string') await writeFileInside(workspace, paths.output, reply.output);
    if (typeof reply.progress === 'string') {
      const target = path.resolve(workspace, paths.progress);
      await appendFile(target, reply.progress.endsWith('\n') ? reply.progress : `${reply.progress}\n`);
    }
    if (reply.status !== undefined)
      await writeFileInside(
        workspace,
        paths.status,
        typeof reply.status === 'string' ? reply.status : `${JSON.stringify(reply.status, null, 2)}\n`,
      );
  } catch (error) {
    return { type: 'agent_crash', message: `the scripted reply's files were refused: ${(error as Error).message}` };
  }
  return undefined;
}

async function runVerify(
  plan: StoredPlan,
  workspace: string,
  iterAbs: string,
  vars: Record<string, string>,
  env: NodeJS.ProcessEnv,
  signal: AbortSignal,
): Promise<IterationRecord['verify']> {
  const allowed = commandList(env, LOOP_COMMANDS_ENV, []);
  const log: string[] = [];
  const failed: string[] = [];
  for (const command of plan.verify) {
    const argv = argvOf(
      substitute(command, {
        SESSION: plan.session,
        OUTPUT: vars.output!,
        PROGRESS: vars.progress!,
        STATUS: vars.status!,
        CTX: vars.CTX!,
      }),
    );
    const refused = checkCommand(argv, allowed, {
      what: 'verify command',
      env: LOOP_COMMANDS_ENV,
      args: 'relative file paths',
    });
    if (refused) {
      log.push(`$ ${argv.join(' ')}\n${refused}\n`);
      failed.push(`${argv.join(' ')} (not allowed)`);
      continue;
    }
    try {
      const run = await runTestCommand({ cwd: workspace, command: argv, timeoutMs: COMMAND_TIMEOUT_MS, signal });
      log.push(
        `$ ${argv.join(' ')}\n${run.output}${run.output.endsWith('\n') || run.output === '' ? '' : '\n'}(exit ${run.exitCode ?? run.signal}${run.timedOut ? ', timed out' : ''})\n`,
      );
      if (!run.passed)
        failed.push(`${argv.join(' ')} (exit ${run.exitCode ?? run.signal}${run.timedOut ? ', timed out' : ''})`);
    } catch (error) {
      if (signal.aborted) throw error;
      log.push(`$ ${argv.join(' ')}\n${(error as Error).message}\n`);
      failed.push(`${argv.join(' ')} (could not start)`);
    }
  }
  await writeFile(path.join(iterAbs, 'verify.log'), log.join('\n'));
  const summary =
    failed.length === 0
      ? `${plan.verify.length} command${plan.verify.length === 1 ? '' : 's'} passed`
      : failed.join('; ');
  return { ran: true, passed: failed.length === 0, summary: truncateText(summary, MAX_VERIFY_SUMMARY) };
}

// ---------------------------------------------------------------------------------------------------------
// queue and state

async function checkQueue(plan: StoredPlan, env: NodeJS.ProcessEnv, workspace: string): Promise<QueueReading> {
  const queue = plan.termination.queue;
  if (queue?.provider === 'signal') return { kind: 'failed', error: 'a signal-fed queue is not checked by command' };
  const argv = argvOf(queue?.provider === 'command' ? queue.command : DEFAULT_QUEUE_COMMAND);
  const refused = checkCommand(argv, commandList(env, LOOP_COMMANDS_ENV, []), {
    what: 'queue command',
    env: LOOP_COMMANDS_ENV,
    args: 'relative file paths',
  });
  if (refused) return { kind: 'failed', error: refused };
  return new Promise((resolve) => {
    const passed = Object.fromEntries(PASSED_ENV.flatMap((k) => (env[k] !== undefined ? [[k, env[k]]] : [])));
    execFile(
      argv[0]!,
      argv.slice(1),
      { cwd: workspace, env: passed, timeout: COMMAND_TIMEOUT_MS, maxBuffer: 1024 * 1024 },
      (error, stdout, stderr) => {
        if (error)
          resolve({ kind: 'failed', error: truncateText(`${argv.join(' ')}: ${stderr.trim() || error.message}`, 500) });
        else resolve(readQueueOutput(stdout));
      },
    );
  });
}

async function writeState(plan: StoredPlan, input: LoopWriteStateInput, workspace: string): Promise<void> {
  const file = path.resolve(workspace, plan.sessionDir, 'state.json');
  await mkdir(path.dirname(file), { recursive: true });
  const existing = await readFile(file, 'utf8').then(
    (t) => JSON.parse(t) as Record<string, Json>,
    () => ({}) as Record<string, Json>,
  );
  const stages = isRecord(existing.stages) ? existing.stages : {};
  const mine = {
    status: input.status,
    iteration: input.iteration,
    ...(input.stoppedBy ? { stopped_by: input.stoppedBy } : {}),
    updated_at: new Date().toISOString(),
  };
  // The seed's failure state is the top level: status, iteration, error, resume_from.
  const top = input.failure
    ? {
        status: 'failed',
        stage: plan.stage,
        iteration: input.failure.iteration,
        error: input.failure.error,
        resume_from: input.failure.resume_from,
      }
    : { status: input.status, stage: plan.stage, iteration: input.iteration };
  const state = { session: plan.session, pipeline: plan.pipeline, ...top, stages: { ...stages, [plan.stage]: mine } };
  const temporary = `${file}.${process.pid}.tmp`;
  await writeFile(temporary, `${JSON.stringify(state, null, 2)}\n`);
  await rename(temporary, file);
}

// ---------------------------------------------------------------------------------------------------------
// helpers

/** `${NAME}` replaced for the names given; anything else is left as written. */
export function substitute(text: string, variables: Record<string, string>): string {
  return text.replace(/\$\{([A-Z_]+)\}/g, (whole, name: string) => variables[name] ?? whole);
}

/** A command line as argv: split on whitespace, with "double" or 'single' quotes keeping spaces (no shell). */
export function argvOf(command: string): string[] {
  const argv: string[] = [];
  const pattern = /"([^"]*)"|'([^']*)'|(\S+)/g;
  for (let m = pattern.exec(command); m !== null; m = pattern.exec(command)) argv.push(m[1] ?? m[2] ?? m[3]!);
  return argv;
}

function relativeOrAbsolute(workspace: string, target: string): string {
  const relative = path.relative(workspace, target);
  return relative.startsWith('..') || path.isAbsolute(relative) ? target : relative.split(path.sep).join('/');
}

function safeName(id: string): string {
  return id.replace(/[^A-Za-z0-9._-]/g, '_');
}

async function sizeOf(file: string): Promise<number> {
  return stat(file).then(
    (s) => s.size,
    () => 0,
  );
}

function oneLine(text: string): string {
  return truncateText(text.replace(/\s+/g, ' ').trim(), MAX_STATUS_TEXT);
}
