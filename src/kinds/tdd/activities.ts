/**
 * The TDD node's activities (seed 001): one call of a graph node (Scaffold, TDDWriteTests, Impl,
 * TDDReviewImpl, Merger, Rebaser) and the git worktree each node works in.
 *
 * A node call renders the seed's template for that node, asks the agent, parses the reply into the node's
 * typed exit (a malformed reply is fed back to the agent, up to `maxInvalidReplies` times; no decision, or no
 * reply within the nudge timeout, gets the seed's reminder once), applies the reply's file changes inside the
 * worktree (paths checked: nothing outside it, nothing read-only), and then does what the exit claims for
 * real, so no agent can lie about it. The `anthropic` agent also acts in the worktree during its reply, with
 * the worktree tools (`agents/worktree-tools.ts`: the same path checks and read-only files), and
 * `claude-code` runs in the worktree:
 *
 * - Scaffold `InitWork`: commits the scaffold; the interface file and contract suite must exist; child specs
 *   are checked against the tree's depth and child-count limits and their contexts stored.
 * - TDDWriteTests `TestsReady`: commits the tests and runs the test command: on a first round the tests
 *   must fail (red), or the agent hears so.
 * - Impl: commits; `TestsPassed` runs the tests, and a red run becomes `RequestRetry` with the real failures.
 *   Test files are read-only for Impl.
 * - TDDReviewImpl: reads the diff since the scaffold (by reference).
 * - Merger: squash-merges the node's branch into the branch it merges into (`feat(<id>): implement`) and
 *   runs the tests there; a red run or a conflict is `MergeRejected` whatever the agent says.
 * - Rebaser: rebases onto the parent's new head; a conflict is `RebaseConflict`, built from git's report.
 *
 * Commit hashes in exits are the real ones. Each commit carries a `Treadle-Op` trailer naming the workflow,
 * node and call, so a retried activity finds its commit instead of making a second one.
 */
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { Context, log } from '@temporalio/activity';
import type { BlobStore } from '../../storage/blob-store';
import { ConversationStore } from '../../storage/conversation';
import { callLogWriter, type CallLog } from '../../storage/call-log';
import { recordingAgent } from '../../agents';
import { defaultAgentName, type AgentProviders } from '../../agents/providers';
import type { AgentMessage, AgentTool, ToolUse } from '../../agents/types';
import { TOOL_ROUNDS_EXHAUSTED } from '../../agents/anthropic';
import { worktreeAccess, worktreeTools } from '../../agents/worktree-tools';
import { callsOf, supervise, withHeartbeats, type Supervision } from '../../activities/supervision';
import { commitAll } from './commits';
import { git, headCommit } from './git';
import { MergeConflictError, rebaseOnto, squashMerge } from './merge-rebase';
import { diffText, restoreFromHead } from './worktree-changes';
import { ensureWorktree } from './worktrees';
import { applyFileWrites, PathEscapeError, readFileInside, ReadOnlyPathError } from '../../agents/worktree-files';
import { allowedTestCommands, checkTestCommand, runTestCommand, type TestRun } from '../../activities/test-command';
import {
  invalidReplyFeedback,
  nudgeMessage,
  parseNodeReply,
  renderNodeTemplate,
  replyInstructions,
  type WorktreeMode,
} from './prompts';
import {
  checkChildSpecs,
  checkTddStageConfig,
  seedSpecOf,
  tddRootInput,
  TddStageConfigSchema,
  validateTddSpec,
  type ChildSpec,
  type Critique,
  type InitWorkPayload,
  type MergeComplete,
  type MergeEvent,
  type NodeExit,
  type PlannedTest,
  type TDDApproval,
  type TestsReadyPayload,
  type ImplResult,
} from './spec';
import {
  MAX_REFUSAL_CHARS,
  MAX_REFUSALS_PER_CALL,
  type NodeContext,
  type TddEnvelope,
  type TddNodeCallInput,
  type TddNodeCallResult,
  type TddNodeInput,
  type TddPrepareInput,
  type TddRefusals,
  type TddWorktreeInput,
  type TddWorktreeResult,
} from './shapes';
import { TDD_NODE_ACTIVITY, TDD_PREPARE_ACTIVITY, TDD_WORKTREE_ACTIVITY } from '../../model/activity-types';
import { readJson, resolveArtefact, storeJson } from '../../storage/blob-store';
import { truncateText } from '../../model/limits';
import type { Json } from '../../model/shapes';

/** Folders (separated by `path.delimiter`) whose repositories TDD trees may work in. */
export const TDD_REPOS_ENV = 'TREADLE_TDD_REPOS';
/** The diff shown to the reviewer is cut to this many bytes (the whole diff is stored). */
const MAX_PROMPT_DIFF_BYTES = 100_000;
/** Interface text a child receives from its parent, at most. */
const MAX_PARENT_INTERFACE_CHARS = 20_000;
/** Inline lists in envelopes are cut to this many entries. */
const MAX_ENVELOPE_ITEMS = 50;
/**
 * How each provider reaches the worktree: `anthropic` through the worktree tools (its tool loop), `claude-code`
 * by running in it with its own tools; any other (`scripted`) only through the reply's `files`.
 */
const WORKTREE_MODES: Readonly<Record<string, WorktreeMode>> = { anthropic: 'tools', 'claude-code': 'workdir' };

export interface TddActivityDependencies {
  blobs: BlobStore;
  agents: AgentProviders;
  env?: NodeJS.ProcessEnv;
  /** The cross-run call log (see `storage/call-log.ts`). */
  callLog?: CallLog;
}

/** The repository roots TDD trees may use: `TREADLE_TDD_REPOS`, else the worker's working directory. */
export function allowedRepoRoots(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): string[] {
  const listed = (env[TDD_REPOS_ENV] ?? '').split(path.delimiter).filter((p) => p.trim() !== '');
  return (listed.length > 0 ? listed : [cwd]).map((p) => path.resolve(cwd, p));
}

/** Refuses a repository outside the allowed roots (a spec or a start request is not trusted to name one). */
export function checkRepo(repo: string, roots: string[]): string | null {
  if (!path.isAbsolute(repo)) return `repository "${repo}" must be an absolute path on the worker`;
  const resolved = path.resolve(repo);
  if (roots.some((root) => resolved === root || resolved.startsWith(root + path.sep))) return null;
  return `repository ${resolved} is outside the folders this worker allows (${TDD_REPOS_ENV}: ${roots.join(path.delimiter)})`;
}

export function createTddActivities(deps: TddActivityDependencies): Record<string, (input: never) => Promise<unknown>> {
  const env = deps.env ?? process.env;
  return {
    // Shares the node calls' short heartbeat timeout: a large repository's checkout must heartbeat too.
    [TDD_WORKTREE_ACTIVITY]: async (input: TddWorktreeInput): Promise<TddWorktreeResult> =>
      withHeartbeats(async () => {
        const problem = checkRepo(input.repo, allowedRepoRoots(env));
        if (problem) throw ApplicationFailure.nonRetryable(problem, 'RepositoryNotAllowed');
        const commonDir = path.resolve(input.repo, await git(input.repo, ['rev-parse', '--git-common-dir']));
        const made = await ensureWorktree({
          repo: input.repo,
          worktreesDir: path.join(commonDir, 'treadle-worktrees'),
          branch: input.branch,
          base: input.base,
        });
        return { worktree: made.path, head: made.head };
      }),
    [TDD_NODE_ACTIVITY]: async (input: TddNodeCallInput): Promise<TddNodeCallResult> =>
      supervise((supervision) => runNodeCall(input, deps, env, supervision), {
        blobs: deps.blobs,
        onCalls: callLogWriter(deps.callLog, { pipeline: 'tdd', stage: `${input.nodePath}.${input.node}` }),
      }),
    // A `tdd` stage of an ordinary pipeline: its config becomes the root node's input, stored by reference.
    [TDD_PREPARE_ACTIVITY]: async (input: TddPrepareInput): Promise<TddNodeInput> => {
      const config = (await resolveArtefact(input.config as Json, deps.blobs)) ?? null;
      const problems = checkTddStageConfig(config);
      if (problems.length > 0)
        throw ApplicationFailure.nonRetryable(`invalid tdd stage: ${problems.join('; ')}`, 'InvalidConfig');
      const { spec, repo, replies } = TddStageConfigSchema.parse(config);
      const checked = validateTddSpec(spec);
      if (!checked.ok)
        throw ApplicationFailure.nonRetryable(`invalid tdd spec: ${checked.problems.join('; ')}`, 'InvalidConfig');
      return tddRootInput(checked.spec, {
        treeId: input.treeId,
        repo,
        contextRef: await storeJson(
          deps.blobs,
          { spec: seedSpecOf(checked.spec), parentContext: null },
          `TDD spec ${checked.spec.id}`,
        ),
        ...(replies
          ? { repliesRef: await storeJson(deps.blobs, replies, `scripted replies for ${checked.spec.id}`) }
          : {}),
      });
    },
  };
}

/** What a node's handler gives back after its mechanical checks. */
type Checked =
  | { ok: true; exit: NodeExit; envelope: TddEnvelope; commit?: string; testRun?: TestRun; summary: string }
  | { ok: false; feedback: string };

async function runNodeCall(
  input: TddNodeCallInput,
  deps: TddActivityDependencies,
  env: NodeJS.ProcessEnv,
  supervision: Supervision,
): Promise<TddNodeCallResult> {
  const repoProblem = checkRepo(input.repo, allowedRepoRoots(env));
  if (repoProblem) throw ApplicationFailure.nonRetryable(repoProblem, 'RepositoryNotAllowed');
  const testProblem = checkTestCommand(input.settings.testCommand, allowedTestCommands(env));
  if (testProblem) throw ApplicationFailure.nonRetryable(testProblem, 'TestCommandNotAllowed');

  const blobs = deps.blobs;
  const context = await readJson<NodeContext>(blobs, input.contextRef);
  const replies = input.repliesRef ? await readJson<Json>(blobs, input.repliesRef) : undefined;
  const workflowId = Context.current().info.workflowExecution?.workflowId ?? input.nodePath;
  const opKey = `${workflowId}/${input.node}/${input.callIndex}`;
  const providerName = input.settings.agent ?? defaultAgentName(env);
  const factory = deps.agents[providerName];
  if (!factory)
    throw ApplicationFailure.nonRetryable(
      `unknown agent provider "${providerName}" (available: ${Object.keys(deps.agents).join(', ')})`,
      'UnknownAgent',
    );
  const ctx: NodeRun = {
    input,
    context,
    blobs,
    opKey,
    supervision,
    env,
    worktreeMode: WORKTREE_MODES[providerName] ?? 'files',
    refused: new RefusalLog(),
  };
  if (ctx.worktreeMode === 'tools')
    ctx.tools = worktreeTools(
      worktreeAccess(input.worktree, {
        readOnly: await readOnlyFor(ctx),
        runTests: testRunnerFor(ctx),
        onRefused: (refusal) => ctx.refused.add(refusal),
      }),
    );

  const prompt = await renderPrompt(ctx);
  // Scripted replies are consumed in order across every agent call of this node in this workflow, re-prompts
  // included (`replyIndex` counts the earlier ones), so a test can script a malformed reply and its fix.
  const scriptedKey = `${input.specId}.${input.node}`;
  let agentCalls = 0;
  const conversations = new ConversationStore(blobs);
  const agentFor = (): ReturnType<typeof recordingAgent> =>
    recordingAgent(
      factory({
        itemId: input.treeId,
        stage: scriptedKey,
        attempt: (input.replyIndex ?? input.callIndex) + ++agentCalls,
        input: replies !== undefined ? { agent_replies: replies } : null,
        config: undefined,
      }),
      {
        calls: supervision.calls,
        conversations,
      },
    );
  const shared = input.node === 'tddWriteTests' || input.node === 'impl' || input.node === 'tddReviewImpl';
  const messages: AgentMessage[] = [{ role: 'user', content: prompt }];
  let nudged = false;
  let invalidReplies = 0;
  for (let turn = 0; ; turn++) {
    const reply = await askWithNudge(ctx, agentFor, messages, shared, turn, nudged);
    nudged ||= reply.nudged;
    messages.push(...reply.added);
    // claude-code edits the worktree with its own tools, which know nothing of read-only files: put them back.
    const restored =
      ctx.worktreeMode === 'workdir' ? await restoreFromHead(input.worktree, await readOnlyFor(ctx)) : [];
    if (restored.length > 0)
      log.warn('agent changed read-only files; they were put back', {
        nodePath: input.nodePath,
        node: input.node,
        files: restored.slice(0, MAX_ENVELOPE_ITEMS),
      });
    if (restored.length > 0) ctx.refused.add(`read-only files changed and put back: ${restored.join(', ')}`);
    const parsed =
      reply.problem !== undefined
        ? { ok: false as const, issues: [reply.problem] }
        : reply.text === undefined
          ? { ok: false as const, issues: ['no reply within the nudge timeout'] }
          : parseNodeReply(input.node, reply.text);
    if (!parsed.ok && 'refusedPaths' in parsed)
      for (const refused of parsed.refusedPaths ?? []) ctx.refused.add(`files: ${refused}`);
    let feedback: string;
    if (parsed.ok) {
      const writes =
        restored.length > 0
          ? {
              ok: false as const,
              feedback: `You changed files that are read-only for you (${restored.join(', ')}); they were put back as they were. Leave them alone, make your change elsewhere, and send the whole reply again.`,
            }
          : await applyWrites(ctx, parsed.files);
      // Each reply gets its own commit key: a reply sent again after feedback commits its new files.
      const checked = writes.ok ? await checkExit({ ...ctx, opKey: `${ctx.opKey}/${turn}` }, parsed.exit) : writes;
      if (checked.ok) return finish(ctx, checked, { nudged, invalidReplies, agentCalls });
      feedback = checked.feedback;
    } else if (!nudged && looksUndecided(parsed.issues)) {
      // The seed's nudge: no decision yet, so remind once before counting it as a malformed reply.
      nudged = true;
      messages.push({ role: 'user', content: nudgeMessage() });
      continue;
    } else {
      feedback = invalidReplyFeedback(input.node, parsed.issues);
    }
    invalidReplies++;
    if (invalidReplies > input.settings.maxInvalidReplies) {
      const exitRef = await storeJson(
        blobs,
        { exit: 'NoDecision', lastProblem: feedback },
        `${input.node} gave no valid decision`,
      );
      return {
        exit: 'NoDecision',
        exitRef,
        summary: truncateText(
          `${input.node} gave no valid decision after ${invalidReplies} replies: ${feedback.split('\n')[0]}`,
        ),
        envelope: { message: truncateText(feedback, 1_000) },
        ...(await callsOf(supervision)),
        nudged,
        invalidReplies,
        agentCalls,
        ...ctx.refused.report(),
      };
    }
    messages.push({ role: 'user', content: feedback });
  }
}

interface NodeRun {
  input: TddNodeCallInput;
  context: NodeContext;
  blobs: BlobStore;
  opKey: string;
  supervision: Supervision;
  env: NodeJS.ProcessEnv;
  /** How the agent changes files: the reply's `files` only, worktree tools too, or in the worktree itself. */
  worktreeMode: WorktreeMode;
  /** The worktree tools, when `worktreeMode` is `tools`. */
  tools?: AgentTool[];
  /** What was refused to the agent in this call, reported with its result. */
  refused: RefusalLog;
}

/**
 * The refusals of one node call, for the node's events and the audit: all counted, the first
 * {@link MAX_REFUSALS_PER_CALL} kept, each cut, so that an agent refused a thousand times adds little to history.
 */
class RefusalLog {
  private count = 0;
  private readonly texts: string[] = [];

  add(refusal: string): void {
    this.count++;
    if (this.texts.length < MAX_REFUSALS_PER_CALL) this.texts.push(truncateText(refusal, MAX_REFUSAL_CHARS));
  }

  /** `{ refusals }` for the call's result, or nothing when nothing was refused. */
  report(): { refusals?: TddRefusals } {
    return this.count > 0 ? { refusals: { count: this.count, texts: [...this.texts] } } : {};
  }
}

/** How one agent call ended: a reply, the nudge timeout, or a tool loop that used all its rounds. */
type Asked = { kind: 'reply'; text: string } | { kind: 'timeout' } | { kind: 'exhausted'; problem: string };

/** What stands in the conversation for a reply lost to the tool-round limit, so user and assistant still alternate. */
const EXHAUSTED_PLACEHOLDER = '(my tool calls used up the reply before I answered)';

/**
 * The agent's reply to the conversation so far, re-prompted once with the seed's reminder on a timeout. A
 * tool loop that ends without an answer is a `problem` (fed back like a malformed reply), not a failure: its
 * file changes stay in the worktree for the next reply.
 */
async function askWithNudge(
  ctx: NodeRun,
  agentFor: () => ReturnType<typeof recordingAgent>,
  messages: AgentMessage[],
  shared: boolean,
  turn: number,
  alreadyNudged: boolean,
): Promise<{ text: string | undefined; problem?: string; added: AgentMessage[]; nudged: boolean }> {
  const { input, supervision } = ctx;
  const nudgeMs = input.settings.nudgeTimeoutSeconds * 1000;
  const ask = async (conversation: AgentMessage[], suffix: string): Promise<Asked> => {
    const controller = new AbortController();
    const onAbort = (): void => controller.abort(supervision.signal.reason);
    supervision.signal.addEventListener('abort', onAbort, { once: true });
    const nudge = (): void => controller.abort(new Error('nudge timeout'));
    let timer = setTimeout(nudge, nudgeMs);
    // With tools the nudge timeout bounds each model call, not the tool runs between them (tests take time).
    const paused = (tool: AgentTool): AgentTool => ({
      ...tool,
      run: async (toolInput, toolContext) => {
        clearTimeout(timer);
        try {
          return await tool.run(toolInput, toolContext);
        } finally {
          timer = setTimeout(nudge, nudgeMs);
        }
      },
    });
    try {
      const result = await agentFor().run({
        messages: conversation,
        ...(input.settings.model ? { model: input.settings.model } : {}),
        // Only the first exchange joins the shared conversation: re-prompts are this call's own business.
        ...(shared && turn === 0 && suffix === '' ? { conversationId: input.conversationId } : {}),
        correlationId: `${input.treeId}/${input.nodePath}/${input.node}/${input.callIndex}${turn > 0 ? `/r${turn}` : ''}${suffix}`,
        signal: controller.signal,
        heartbeat: () => supervision.heartbeat(),
        ...(ctx.tools ? { tools: ctx.tools.map(paused) } : {}),
        ...(ctx.worktreeMode !== 'files' ? { workdir: input.worktree } : {}),
      });
      if (result.toolUses && result.toolUses.length > 0) logToolUses(ctx, result.toolUses);
      return { kind: 'reply', text: result.output !== undefined ? JSON.stringify(result.output) : result.text };
    } catch (error) {
      if (supervision.signal.aborted) throw error;
      if (controller.signal.aborted) return { kind: 'timeout' };
      if (error instanceof ApplicationFailure && error.type === TOOL_ROUNDS_EXHAUSTED) {
        return {
          kind: 'exhausted',
          problem: `you were still calling tools when your reply reached its limit of model calls (${error.message}); the files you changed are kept: finish in fewer tool calls, then answer`,
        };
      }
      throw error;
    } finally {
      clearTimeout(timer);
      supervision.signal.removeEventListener('abort', onAbort);
    }
  };
  const settled = (asked: Asked): { text: string | undefined; problem?: string; added: AgentMessage[] } => {
    if (asked.kind === 'reply') return { text: asked.text, added: [{ role: 'assistant', content: asked.text }] };
    if (asked.kind === 'exhausted')
      return {
        text: undefined,
        problem: asked.problem,
        added: [{ role: 'assistant', content: EXHAUSTED_PLACEHOLDER }],
      };
    return { text: undefined, added: [] };
  };
  const first = await ask(messages, '');
  if (first.kind !== 'timeout' || alreadyNudged) return { ...settled(first), nudged: false };
  const reminder: AgentMessage = { role: 'user', content: nudgeMessage() };
  const again = settled(await ask([...messages, reminder], '/nudge'));
  return { ...again, added: [reminder, ...again.added], nudged: true };
}

/** Which tools the agent ran, by name and path (never file contents), for the worker's log. */
function logToolUses(ctx: NodeRun, uses: ToolUse[]): void {
  const { input } = ctx;
  log.info('agent used worktree tools', {
    nodePath: input.nodePath,
    node: input.node,
    callIndex: input.callIndex,
    toolUses: uses.length,
    failed: uses.filter((u) => !u.ok).length,
    uses: uses.slice(0, MAX_ENVELOPE_ITEMS).map((u) => `${u.name}(${u.input})${u.ok ? '' : ' failed'}`),
  });
}

/** A reply that names no exit at all (prose, nothing) is "no decision"; a wrong one is malformed. */
function looksUndecided(issues: string[]): boolean {
  return issues.some((i) => /no JSON object|no decision|no reply/i.test(i));
}

async function applyWrites(
  ctx: NodeRun,
  files: Record<string, string | null>,
): Promise<{ ok: true } | { ok: false; feedback: string }> {
  if (Object.keys(files).length === 0) return { ok: true };
  try {
    await applyFileWrites(ctx.input.worktree, files, { readOnly: await readOnlyFor(ctx) });
    return { ok: true };
  } catch (error) {
    if (error instanceof PathEscapeError || error instanceof ReadOnlyPathError)
      ctx.refused.add(`files: ${error.message}`);
    return {
      ok: false,
      feedback: `Your file changes were refused and nothing was written: ${(error as Error).message}. Paths are relative to the worktree; test files and the parent's interface files are read-only for you. Send the whole reply again.`,
    };
  }
}

/** What this call may not write or delete, through `files` or the tools: the node's read-only files, and the tests for Impl. */
async function readOnlyFor(ctx: NodeRun): Promise<string[]> {
  return [...ctx.input.readOnly, ...(ctx.input.node === 'impl' ? await testFilesOf(ctx) : [])];
}

/**
 * The `run_tests` tool's runner: the spec's test command in the worktree, on the files the agent names,
 * admitted by the worker's allow-list like every test run (a refusal is the tool's error, which the model reads).
 */
function testRunnerFor(ctx: NodeRun): ((files: string[], signal?: AbortSignal) => Promise<TestRun>) | undefined {
  const allowed = allowedTestCommands(ctx.env);
  const { testCommand, testTimeoutSeconds } = ctx.input.settings;
  // The node refuses a command off the list before it starts; this keeps the tool from ever offering one.
  if (checkTestCommand(testCommand, allowed) !== null) return undefined;
  return async (files, signal) => {
    const command = [...testCommand, ...files];
    const problem = checkTestCommand(command, allowed);
    if (problem) throw new Error(problem);
    return runTestCommand({
      cwd: ctx.input.worktree,
      command,
      timeoutMs: testTimeoutSeconds * 1000,
      signal: signal ?? ctx.supervision.signal,
    });
  };
}

/** Impl must not touch the tests: the test files TDDWriteTests committed, and the spec's test path. */
async function testFilesOf(ctx: NodeRun): Promise<string[]> {
  const ready = ctx.input.refs.testsReady
    ? await readJson<TestsReadyPayload>(ctx.blobs, ctx.input.refs.testsReady)
    : undefined;
  return [ctx.context.spec.testPath, ...(ready?.testFiles ?? [])];
}

async function renderPrompt(ctx: NodeRun): Promise<string> {
  const { input, context, blobs } = ctx;
  const spec = context.spec;
  const get = async <T>(ref: string | undefined): Promise<T | undefined> => (ref ? readJson<T>(blobs, ref) : undefined);
  let body: string;
  switch (input.node) {
    case 'scaffold':
      body = renderNodeTemplate('scaffold', { spec, parentContext: context.parentContext });
      break;
    case 'tddWriteTests': {
      const scaffold = (await get<InitWorkPayload>(input.refs.scaffold))!;
      body = renderNodeTemplate('tddWriteTests', { spec, scaffold, coveredCriteria: input.coveredCriteria ?? [] });
      const critiques = await get<{ critiques: Critique[]; additionalTests: PlannedTest[] }>(input.refs.critiques);
      if (critiques) body += `\n\n## Reviewer's requests (MoreTests)\n${JSON.stringify(critiques, null, 2)}\n`;
      break;
    }
    case 'impl': {
      const critiques = await get<{ critiques: Critique[] }>(input.refs.critiques);
      const childMerges = await Promise.all(
        (input.refs.childMerges ?? []).map((ref) => readJson<MergeComplete>(blobs, ref)),
      );
      body = renderNodeTemplate('impl', {
        spec,
        scaffold: (await get<InitWorkPayload>(input.refs.scaffold))!,
        testsReady: (await get<TestsReadyPayload>(input.refs.testsReady))!,
        childMerges: childMerges.length > 0 ? childMerges : null,
        attemptCount: input.attemptCount ?? 1,
        critiqueList: critiques?.critiques ?? null,
      });
      break;
    }
    case 'tddReviewImpl': {
      // As the parent's judge: the child's diff since it branched off, against the spec (criteria) it was given.
      const judge = input.judge;
      const judged = judge ? await readJson<NodeContext>(blobs, judge.childContextRef) : undefined;
      const base = judge
        ? await git(input.worktree, ['merge-base', 'HEAD', judge.childBranch])
        : (input.baseCommit ?? 'HEAD~1');
      const diff = await diffText({
        worktree: input.worktree,
        base,
        ...(judge ? { head: judge.childBranch } : {}),
        maxBytes: MAX_PROMPT_DIFF_BYTES,
      });
      body = renderNodeTemplate('tddReviewImpl', {
        spec: judged?.spec ?? spec,
        scaffold: (await get<InitWorkPayload>(input.refs.scaffold))!,
        implResult: (await get<ImplResult>(input.refs.implResult))!,
        diff: diff.truncated
          ? `${diff.text}\n… (diff cut at ${MAX_PROMPT_DIFF_BYTES} bytes; files: ${diff.files.join(', ')})`
          : diff.text,
      });
      if (judge)
        body += `\n\n## You judge a child's merge\nYou are the parent. Child \`${judge.childNodePath}\` (branch \`${judge.childBranch}\`) asks to merge. Check its diff against the criteria you assigned to it (the spec above) and against its siblings' work: Approved lets it merge; MoreTests or Reject sends it back to write tests for what is missing.\n`;
      break;
    }
    case 'merger': {
      const approval = (await get<TDDApproval>(input.refs.approval))!;
      const scaffold = (await get<InitWorkPayload>(input.refs.scaffold))!;
      body = renderNodeTemplate('merger', {
        parentNode: { nodeId: input.merge?.parentNodeId ?? '', branch: input.merge?.parentBranch ?? '' },
        childNode: { nodeId: input.nodePath, branch: input.branch },
        tddApproval: approval,
        contractSuite: scaffold.contractSuite,
      });
      break;
    }
    case 'rebaser':
      body = renderNodeTemplate('rebaser', {
        node: { nodeId: input.nodePath, branch: input.branch },
        parentBranch: input.rebase?.parentBranch ?? '',
        newParentHead: input.rebase?.newParentHead ?? '',
        mergeEvent: (await get<MergeEvent>(input.refs.mergeEvent))!,
      });
      break;
  }
  const note = input.note ? `\n\n## Why you are called again\n${input.note}\n` : '';
  return `${body}${note}\n\n${replyInstructions(input.node, { worktree: ctx.worktreeMode })}`;
}

/** The exit made true: commits, test runs, merges, with the real hashes written into it. */
async function checkExit(ctx: NodeRun, exit: NodeExit): Promise<Checked> {
  const { input } = ctx;
  const commit = (message: string) => commitAll({ worktree: input.worktree, message, opKey: ctx.opKey });
  switch (exit.exit) {
    case 'InitWork': {
      for (const file of [exit.interfaceFile, exit.contractSuite]) {
        const missing = await readFileInside(input.worktree, file).then(
          () => null,
          (error: Error) => error.message,
        );
        if (missing)
          return {
            ok: false,
            feedback: `InitWork names ${file}, which is not in the worktree (${missing}). Write it in "files" and send the whole reply again.`,
          };
      }
      const children = exit.childSpecs ?? [];
      const problems = checkChildSpecs(children, {
        depth: depthOf(input.nodePath),
        maxDepth: input.settings.maxDepth,
        maxChildren: input.settings.maxChildren,
      });
      for (const problem of problems) ctx.refused.add(problem);
      if (problems.length > 0)
        return {
          ok: false,
          feedback: `Your childSpecs cannot be used: ${problems.join('; ')}. Send the whole reply again.`,
        };
      const made = await commit(`scaffold(${input.specId}): interface, contract suite, test plan`);
      const interfaceText = truncateText(
        await readFileInside(input.worktree, exit.interfaceFile),
        MAX_PARENT_INTERFACE_CHARS,
      );
      const stored = await Promise.all(children.map((child) => storeChild(ctx, child, interfaceText, exit)));
      const full: NodeExit = { ...exit, scaffoldCommit: made.commit };
      return {
        ok: true,
        exit: full,
        commit: made.commit,
        envelope: { children: stored, interfaceFile: exit.interfaceFile },
        summary: `InitWork at ${short(made.commit)}: ${exit.testPlan.length} planned tests, ${children.length} children`,
      };
    }
    case 'ClarificationNeeded':
      return {
        ok: true,
        exit,
        envelope: { message: truncateText(exit.question, 1_000) },
        summary: truncateText(`ClarificationNeeded: ${exit.question}`),
      };
    case 'TestsReady': {
      for (const file of exit.testFiles) {
        const missing = await readFileInside(input.worktree, file).then(
          () => null,
          (error: Error) => error.message,
        );
        if (missing)
          return {
            ok: false,
            feedback: `TestsReady lists ${file}, which is not in the worktree (${missing}). Send the whole reply again with the file in "files".`,
          };
      }
      const made = await commit(
        `test(${input.specId}): failing tests for ${exit.pendingCriteria.join(', ') || 'the criteria'}`,
      );
      // Red is judged on this node's own test files: a parent's or sibling's tests are not its business.
      const run = await runTests(ctx, input.worktree, exit.testFiles);
      if (!input.implementationExists && run.passed) {
        return {
          ok: false,
          feedback: `The tests pass on the skeleton (${run.summary}), but they MUST fail first (red). Make the tests exercise the behaviour the criteria ask for, and send the whole reply again.`,
        };
      }
      const full: NodeExit = { ...exit, testsCommit: made.commit };
      return {
        ok: true,
        exit: full,
        commit: made.commit,
        testRun: run,
        envelope: { testFiles: cap(exit.testFiles), pendingCriteria: cap(exit.pendingCriteria) },
        summary: `TestsReady at ${short(made.commit)}: ${exit.testFiles.length} test files, ${run.summary}`,
      };
    }
    case 'InvalidScaffold':
      return {
        ok: true,
        exit,
        envelope: { message: `${exit.missingType} missing at ${exit.expectedLocation}` },
        summary: truncateText(`InvalidScaffold: ${exit.missingType} missing at ${exit.expectedLocation}`),
      };
    case 'TestsPassed': {
      const made = await commit(`feat(${input.specId}): implementation, attempt ${input.attemptCount ?? 1}`);
      const run = await runTests(ctx, input.worktree, await ownTests(ctx));
      if (!run.passed) {
        const failing = run.tests.filter((t) => !t.ok).map((t) => t.name);
        const retry: NodeExit = {
          exit: 'RequestRetry',
          diagnosis: `claimed TestsPassed, but the test run says: ${run.summary}`,
          strategyFrom: 'claimed green',
          strategyTo: 'make the failing tests pass',
          failingTests: failing,
        };
        return {
          ok: true,
          exit: retry,
          commit: made.commit,
          testRun: run,
          envelope: { failingTests: cap(failing), message: `tests still fail: ${run.summary}` },
          summary: truncateText(`TestsPassed refused: ${run.summary}`),
        };
      }
      const passed = run.tests.filter((t) => t.ok).map((t) => t.name);
      const full: NodeExit = {
        ...exit,
        commitHash: made.commit,
        iterations: input.attemptCount ?? 1,
        passedTests: passed.length > 0 ? passed : exit.passedTests,
      };
      return {
        ok: true,
        exit: full,
        commit: made.commit,
        testRun: run,
        envelope: { passedTests: cap(passed) },
        summary: `TestsPassed at ${short(made.commit)}: ${run.summary}`,
      };
    }
    case 'RequestRetry': {
      const made = await commit(`wip(${input.specId}): impl attempt ${input.attemptCount ?? 1}`);
      return {
        ok: true,
        exit,
        commit: made.commit,
        envelope: { failingTests: cap(exit.failingTests), message: truncateText(exit.diagnosis, 1_000) },
        summary: truncateText(`RequestRetry: ${exit.diagnosis}`),
      };
    }
    case 'BlockedDependency':
      return {
        ok: true,
        exit,
        envelope: { message: `${exit.missingSymbol} expected at ${exit.expectedImportPath}` },
        summary: truncateText(`BlockedDependency: ${exit.missingSymbol}`),
      };
    case 'SpecAmbiguity':
      return {
        ok: true,
        exit,
        envelope: { message: truncateText(exit.question, 1_000) },
        summary: truncateText(`SpecAmbiguity: ${exit.question}`),
      };
    case 'Stuck':
      return {
        ok: true,
        exit,
        envelope: { message: truncateText(`${exit.diagnosis} (recommendation: ${exit.recommendation})`, 1_000) },
        summary: truncateText(`Stuck: ${exit.diagnosis}`),
      };
    case 'Approved':
      return { ok: true, exit, envelope: {}, summary: truncateText(`Approved: ${exit.signOff}`) };
    case 'MoreTests':
      return {
        ok: true,
        exit,
        envelope: { critiques: exit.critiques.length, additionalTests: exit.additionalTests.length },
        summary: `MoreTests: ${exit.critiques.length} critiques, ${exit.additionalTests.length} additional tests`,
      };
    case 'Reject':
      return {
        ok: true,
        exit,
        envelope: { message: truncateText(exit.reason, 1_000) },
        summary: truncateText(`Reject: ${exit.reason}`),
      };
    case 'MergeComplete':
    case 'MergeRejected':
      return merge(ctx, exit);
    case 'RebaseClean':
    case 'RebaseAdapted':
    case 'RebaseConflict':
      return rebase(ctx, exit);
  }
}

/** Merger: the squash merge and the test run are Treadle's; the agent describes the change (or refuses). */
async function merge(
  ctx: NodeRun,
  exit: Extract<NodeExit, { exit: 'MergeComplete' | 'MergeRejected' }>,
): Promise<Checked> {
  const { input } = ctx;
  const target = input.merge;
  if (!target) throw ApplicationFailure.nonRetryable('a merger call needs the branch to merge into', 'InvalidInput');
  if (exit.exit === 'MergeRejected') {
    return {
      ok: true,
      exit,
      envelope: { failingTests: cap(exit.failingTests), message: truncateText(exit.details, 1_000) },
      summary: truncateText(`MergeRejected (${exit.reason}): ${exit.details}`),
    };
  }
  const before = await headCommit(target.parentWorktree);
  let merged: { commit: string; created: boolean };
  try {
    merged = await squashMerge({
      worktree: target.parentWorktree,
      branch: input.branch,
      message: `feat(${input.specId}): implement`,
      opKey: ctx.opKey,
    });
  } catch (error) {
    if (!(error instanceof MergeConflictError)) throw error;
    const rejected: NodeExit = {
      exit: 'MergeRejected',
      reason: 'IntegrationFailure',
      details: `the squash merge into ${target.parentBranch} conflicts in ${error.files.join(', ')}`,
      failingTests: [],
    };
    return {
      ok: true,
      exit: rejected,
      envelope: { message: rejected.details },
      summary: truncateText(`MergeRejected: ${rejected.details}`),
    };
  }
  // A child's merge is verified by its own tests and contract suite in the parent's tree (the parent's own
  // tests are red until the parent's Impl); the root's merge runs the whole suite.
  const isRoot = depthOf(input.nodePath) === 0;
  const run = await runTests(ctx, target.parentWorktree, isRoot ? [] : await ownTests(ctx));
  if (!run.passed) {
    // Undo the merge commit (made by this call or by a crashed earlier try of it): the parent branch stays green.
    if ((await headCommit(target.parentWorktree)) === merged.commit)
      await git(target.parentWorktree, ['reset', '--hard', merged.created ? before : `${merged.commit}^`]);
    const failing = run.tests.filter((t) => !t.ok).map((t) => t.name);
    const rejected: NodeExit = {
      exit: 'MergeRejected',
      reason: 'IntegrationFailure',
      details: `after the squash merge into ${target.parentBranch}: ${run.summary}`,
      failingTests: failing,
    };
    return {
      ok: true,
      exit: rejected,
      testRun: run,
      envelope: { failingTests: cap(failing), message: rejected.details },
      summary: truncateText(`MergeRejected: ${rejected.details}`),
    };
  }
  const full: NodeExit = { ...exit, mergeCommit: merged.commit, author: input.nodePath };
  const changesRef = await storeJson(
    ctx.blobs,
    { author: input.nodePath, impactLevel: exit.impactLevel, changes: exit.changes },
    `MergeEvent of ${input.nodePath}`,
  );
  return {
    ok: true,
    exit: full,
    commit: merged.commit,
    testRun: run,
    envelope: { mergeCommit: merged.commit, impactLevel: exit.impactLevel, changesRef },
    summary: `MergeComplete: ${short(merged.commit)} on ${target.parentBranch} (${exit.impactLevel}, ${exit.changes.length} changes)`,
  };
}

/** Rebaser: the rebase is git's; a conflict is reported as git saw it, whatever the agent said. */
async function rebase(
  ctx: NodeRun,
  exit: Extract<NodeExit, { exit: 'RebaseClean' | 'RebaseAdapted' | 'RebaseConflict' }>,
): Promise<Checked> {
  const { input } = ctx;
  const onto = input.rebase?.newParentHead ?? input.rebase?.parentBranch;
  if (!onto)
    throw ApplicationFailure.nonRetryable('a rebaser call needs the parent head to rebase onto', 'InvalidInput');
  if (exit.exit === 'RebaseConflict')
    return {
      ok: true,
      exit,
      envelope: { message: truncateText(exit.whyUnresolvable, 1_000) },
      summary: truncateText(`RebaseConflict in ${exit.conflictFile}`),
    };
  // The agent's mechanical adaptations (if any) are committed before the rebase, then replayed by it (a
  // rebase needs a clean worktree; with nothing to commit this makes no commit).
  await commitAll({
    worktree: input.worktree,
    message: `chore(${input.specId}): adapt to a sibling's merge`,
    opKey: ctx.opKey,
  });
  const result = await rebaseOnto({ worktree: input.worktree, onto });
  if (!result.clean) {
    const conflict: NodeExit = {
      exit: 'RebaseConflict',
      conflictFile: result.conflictFiles[0] ?? '(unknown)',
      ourChange: 'this node’s commits',
      theirChange: `the parent head ${short(onto)}`,
      whyUnresolvable: truncateText(result.details, 1_000),
    };
    return {
      ok: true,
      exit: conflict,
      envelope: { message: `rebase conflicts in ${result.conflictFiles.join(', ')}` },
      summary: truncateText(`RebaseConflict: ${result.conflictFiles.join(', ')}`),
    };
  }
  const full: NodeExit = { ...exit, newBase: result.newBase };
  return {
    ok: true,
    exit: full,
    commit: await headCommit(input.worktree),
    envelope: {},
    summary: `${exit.exit} onto ${short(result.newBase)}`,
  };
}

/** A child's context (spec + what the parent gives it), stored for the child workflow to read. */
async function storeChild(
  ctx: NodeRun,
  child: ChildSpec,
  interfaceText: string,
  exit: Extract<NodeExit, { exit: 'InitWork' }>,
): Promise<{ id: string; contextRef: string; readOnly: string[] }> {
  const context: NodeContext = {
    spec: child,
    parentContext: {
      interface: interfaceText,
      assignedCriteria: child.acceptanceCriteria.map((c) => `${c.id}: ${c.text}`).join('\n'),
    },
  };
  const ref = await storeJson(ctx.blobs, context, `spec of ${ctx.input.nodePath}.${child.id}`);
  // The parent's interface file is read-only for the child (and for its children in turn), and so are the
  // siblings' target files: each child implements its own.
  const siblings = (exit.childSpecs ?? []).filter((c) => c.id !== child.id).map((c) => c.targetPath);
  const readOnly = [...new Set([...ctx.input.readOnly, exit.interfaceFile, ...siblings])];
  return { id: child.id, contextRef: ref, readOnly };
}

/** Runs the spec's test command, on `files` when given (the allow-list admits relative file arguments). */
async function runTests(ctx: NodeRun, cwd: string, files: string[] = []): Promise<TestRun> {
  return runTestCommand({
    cwd,
    command: [...ctx.input.settings.testCommand, ...files],
    timeoutMs: ctx.input.settings.testTimeoutSeconds * 1000,
    signal: ctx.supervision.signal,
  });
}

/** This node's tests: the test files TDDWriteTests committed and the scaffold's contract suite. */
async function ownTests(ctx: NodeRun): Promise<string[]> {
  const ready = ctx.input.refs.testsReady
    ? await readJson<TestsReadyPayload>(ctx.blobs, ctx.input.refs.testsReady)
    : undefined;
  const scaffold = ctx.input.refs.scaffold
    ? await readJson<InitWorkPayload>(ctx.blobs, ctx.input.refs.scaffold)
    : undefined;
  return [...new Set([...(ready?.testFiles ?? []), ...(scaffold ? [scaffold.contractSuite] : [])])];
}

async function finish(
  ctx: NodeRun,
  checked: Extract<Checked, { ok: true }>,
  counts: { nudged: boolean; invalidReplies: number; agentCalls: number },
): Promise<TddNodeCallResult> {
  const exitText = JSON.stringify(checked.exit);
  const exitRef = await storeJson(
    ctx.blobs,
    checked.exit,
    `${ctx.input.node} exit ${checked.exit.exit} of ${ctx.input.nodePath}`,
  );
  const testRun = checked.testRun
    ? {
        passed: checked.testRun.passed,
        summary: checked.testRun.summary,
        outputRef: (
          await ctx.blobs.put(
            Buffer.from(checked.testRun.output),
            'text/plain',
            `test output: ${checked.testRun.summary}`,
          )
        ).ref,
      }
    : undefined;
  return {
    exit: checked.exit.exit,
    exitRef,
    exitBytes: Buffer.byteLength(exitText),
    summary: truncateText(checked.summary),
    ...(checked.commit ? { commit: checked.commit } : {}),
    envelope: checked.envelope,
    ...(testRun ? { testRun } : {}),
    ...(await callsOf(ctx.supervision)),
    nudged: counts.nudged,
    invalidReplies: counts.invalidReplies,
    agentCalls: counts.agentCalls,
    ...ctx.refused.report(),
  };
}

function depthOf(nodePath: string): number {
  return nodePath.split('.').length - 1;
}

function cap<T>(items: T[]): T[] {
  return items.slice(0, MAX_ENVELOPE_ITEMS);
}

function short(commit: string): string {
  return commit.slice(0, 10);
}
