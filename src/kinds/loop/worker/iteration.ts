/**
 * One loop iteration on the worker: writes `context.json`, renders the prompt, runs a **fresh** agent (no
 * conversation), reads and validates `status.json`, snapshots the output, makes sure `progress.md` has the
 * iteration, and runs the `verify` commands. An agent that fails or reports an error is a *result* (fail
 * fast, with `progress.md` stored for the person judging it), never a thrown error; a retried iteration first
 * puts `progress.md` and the output back as they were.
 */
import { appendFile, copyFile, mkdir, readFile, rm, truncate, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { CancelledFailure } from '@temporalio/common';
import { recordingAgent } from '../../../agents';
import { defaultAgentName, type AgentProviders } from '../../../agents/providers';
import { SCRIPTED_PROVIDER } from '../../../agents/scripted';
import type { AgentRequest, AgentResult } from '../../../agents/types';
import { worktreeAccess, worktreeTools } from '../../../agents/worktree-tools';
import { writeFileInside } from '../../../agents/worktree-files';
import { runVerify, substitute } from './commands';
import { sizeOf, type StoredPlan } from './run-folder';
import {
  iterationDir,
  MAX_STATUS_TEXT,
  StatusFileSchema,
  type LoopContext,
  type LoopError,
  type LoopIterationInput,
  type LoopIterationResult,
  type StatusFile,
} from '../spec';
import { REVIEW_TEXT_MAX_BYTES, truncateText, utf8Cut } from '../../../model/limits';
import type { Json, UsageTotals } from '../../../model/shapes';
import type { BlobStore } from '../../../storage/blob-store';
import { ConversationStore } from '../../../storage/conversation';
import type { Supervision } from '../../../activities/supervision';
import { isRecord } from '../../../activities/sources';

/** Why an iteration failed, before it becomes the iteration's result. */
type IterationFailure = { type: LoopError['type']; message: string };

/** An iteration's files, workspace-relative (posix), and how to make one absolute. */
interface IterationFiles {
  stageRel: string;
  iterRel: string;
  ctxRel: string;
  paths: LoopContext['paths'];
  abs(relative: string): string;
}

/** What one iteration runs with: its plan and activity input, the worker's stores and agents, its workspace. */
export interface IterationRun {
  plan: StoredPlan;
  /** The scripted agent's replies (the plan's `repliesRef`), when the loop has them. */
  replies: Json | undefined;
  input: LoopIterationInput;
  deps: { blobs: BlobStore; agents: AgentProviders };
  env: NodeJS.ProcessEnv;
  workspace: string;
  /** The activity's supervision: its model calls, heartbeats and cancellation signal. */
  supervision: Supervision;
}

/** Runs iteration `input.iteration` of the plan under supervision; a failed agent is a result, not a throw. */
export async function iterate(run: IterationRun): Promise<LoopIterationResult> {
  const { plan, input, deps, env, workspace, supervision } = run;
  const n = input.iteration;
  const files = iterationFiles(plan, n, workspace);
  const { abs, paths } = files;
  await mkdir(abs(files.iterRel), { recursive: true });
  await restoreOrMark(abs(files.iterRel), abs(paths.progress), abs(paths.output), abs(paths.status));
  const progressBefore = await sizeOf(abs(paths.progress));
  const prompt = await writeContext(plan, input, files);

  const fail = async (failure: IterationFailure): Promise<LoopIterationResult> => ({
    ok: false,
    iteration: n,
    error: { type: failure.type, message: truncateText(failure.message, 1_000), timestamp: new Date().toISOString() },
    calls: supervision.calls.length,
    ...(await storeProgress(abs(paths.progress), deps.blobs, `${plan.stage} progress.md after iteration ${n}`)),
    ...iterationUsage(supervision),
  });
  const failed = await runAgent(run, files, prompt);
  if (failed) return await fail(failed);
  const read = await readStatus(abs, paths.status);
  if ('failure' in read) return await fail(read.failure);
  const { status } = read;

  // The engine's history: the output snapshot (and the stage folder's copy), the progress entry.
  const { outputRef, outputBytes } = await snapshotOutput(plan, n, files, deps.blobs);
  if ((await sizeOf(abs(paths.progress))) === progressBefore) {
    await appendFile(
      abs(paths.progress),
      `${progressBefore > 0 ? '\n' : ''}## Iteration ${n}\n- ${oneLine(status.summary || status.reason)}\n`,
    );
  }
  const verify =
    plan.verify.length > 0
      ? await runVerify({
          plan,
          workspace,
          iterAbs: abs(files.iterRel),
          vars: { ...paths, CTX: files.ctxRel },
          env,
          signal: supervision.signal,
        })
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

function iterationFiles(plan: StoredPlan, n: number, workspace: string): IterationFiles {
  const stageRel = path.posix.join(plan.sessionDir, plan.stageDir);
  const iterRel = path.posix.join(stageRel, iterationDir(n));
  return {
    stageRel,
    iterRel,
    ctxRel: path.posix.join(iterRel, 'context.json'),
    paths: {
      session_dir: plan.sessionDir,
      stage_dir: stageRel,
      progress: path.posix.join(stageRel, 'progress.md'),
      output: plan.output,
      status: path.posix.join(iterRel, 'status.json'),
    },
    abs: (relative) => path.resolve(workspace, relative),
  };
}

/** Writes the iteration's `context.json` and returns the prompt with its variables filled in. */
async function writeContext(plan: StoredPlan, input: LoopIterationInput, files: IterationFiles): Promise<string> {
  const n = input.iteration;
  const { paths, ctxRel } = files;
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
    ...(input.note !== undefined
      ? { resume: { note: input.note, ...(input.noteBy !== undefined ? { by: input.noteBy } : {}) } }
      : {}),
  };
  await writeFile(files.abs(ctxRel), `${JSON.stringify(context, null, 2)}\n`);
  return substitute(plan.prompt, {
    CTX: ctxRel,
    PROGRESS: paths.progress,
    OUTPUT: paths.output,
    STATUS: paths.status,
    SESSION: plan.session,
    ITERATION: String(n),
  });
}

/** Runs the iteration's agent (the scripted one acting through its reply); how it failed, if it did. */
async function runAgent(
  { plan, replies, input, deps, env, workspace, supervision }: IterationRun,
  files: IterationFiles,
  prompt: string,
): Promise<IterationFailure | undefined> {
  const n = input.iteration;
  // A fresh agent for every iteration: no conversation id, nothing carried over but the files.
  const provider = plan.agent ?? defaultAgentName(env);
  const factory = deps.agents[provider];
  if (!factory)
    return {
      type: 'invalid_config',
      message: `unknown agent provider "${provider}" (available: ${Object.keys(deps.agents).join(', ')})`,
    };
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
  const readOnly = [files.ctxRel, path.posix.join(plan.sessionDir, 'state.json')];
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
    return {
      type: 'agent_crash',
      message: `the ${provider} agent failed: ${error instanceof Error ? error.message : String(error)}`,
    };
  }
  if (provider === SCRIPTED_PROVIDER) {
    const { output, progress, status } = files.paths;
    return applyScriptedReply(result, workspace, { output, progress, status }, readOnly);
  }
  return undefined;
}

/** status.json: present, JSON, the seed's format, no error. */
async function readStatus(
  abs: (relative: string) => string,
  statusRel: string,
): Promise<{ status: StatusFile } | { failure: IterationFailure }> {
  const failed = (type: LoopError['type'], message: string) => ({ failure: { type, message } });
  let text: string;
  try {
    text = await readFile(abs(statusRel), 'utf8');
  } catch {
    return failed('missing_status', `the agent wrote no status file at ${statusRel}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    return failed('invalid_status', `${statusRel} is not JSON: ${(error as Error).message}`);
  }
  const parsed = StatusFileSchema.safeParse(json);
  if (!parsed.success)
    return failed(
      'invalid_status',
      `${statusRel} is not in the status format: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(file)'}: ${i.message}`).join('; ')}`,
    );
  const status = parsed.data;
  if (status.decision === 'error') return failed('agent_error', `the agent decided "error": ${status.reason}`);
  if (status.errors.length > 0)
    return failed(
      'agent_error',
      `the agent reported errors: ${status.errors.map((e) => (typeof e === 'string' ? e : JSON.stringify(e))).join('; ')}`,
    );
  return { status };
}

/** Copies the output to the iteration's folder (and the stage folder's `output.md`) and stores it. */
async function snapshotOutput(
  plan: StoredPlan,
  n: number,
  files: IterationFiles,
  blobs: BlobStore,
): Promise<{ outputRef?: string; outputBytes: number }> {
  const { abs } = files;
  const content = await readFile(abs(files.paths.output)).catch(() => undefined);
  if (content === undefined) return { outputBytes: 0 };
  await writeFile(path.join(abs(files.iterRel), 'output.md'), content);
  if (plan.mirrorOutput) await writeFile(path.join(abs(files.stageRel), 'output.md'), content);
  const outputRef = (await blobs.put(content, 'text/markdown', `${plan.stage} output after iteration ${n}`)).ref;
  return { outputRef, outputBytes: content.length };
}

/**
 * Stores `progress.md` as it is now, for the person judging a failed iteration (only then: the file grows every
 * iteration, so storing it each time would cost a new blob per iteration); none when there is no such file. A
 * file over `maxBytes` keeps its end, after a first line saying how much was left out.
 */
export async function storeProgress(
  progressAbs: string,
  blobs: BlobStore,
  summary: string,
  maxBytes = REVIEW_TEXT_MAX_BYTES,
): Promise<{ progressRef?: string }> {
  const content = await readFile(progressAbs).catch(() => undefined);
  if (content === undefined) return {};
  // Its newest part: entries are appended.
  const start = content.length > maxBytes ? utf8Cut(content, content.length - maxBytes, 'tail') : 0;
  const kept =
    start === 0
      ? content
      : Buffer.concat([
          Buffer.from(`… progress.md cut: its first ${start} bytes are left out\n`),
          content.subarray(start),
        ]);
  const stored = await blobs.put(kept, 'text/markdown', summary);
  return { progressRef: stored.ref };
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

function oneLine(text: string): string {
  return truncateText(text.replace(/\s+/g, ' ').trim(), MAX_STATUS_TEXT);
}
