/**
 * One call of a TDD graph node (seed 001): Scaffold, TDDWriteTests, Impl, TDDReviewImpl, Merger or Rebaser.
 *
 * The call renders the seed's template for the node, asks the agent, parses the reply into the node's typed
 * exit (a malformed reply is fed back to the agent, up to `maxInvalidReplies` times; no decision, or no reply
 * within the nudge timeout, gets the seed's reminder once), applies the reply's file changes inside the
 * worktree (paths checked: nothing outside it, nothing read-only), and then does what the exit claims for
 * real (`exit-checks.ts`), so no agent can lie about it. The `anthropic` agent also acts in the worktree
 * during its reply, with the worktree tools (`agents/worktree-tools.ts`: the same path checks and read-only
 * files), and `claude-code` runs in the worktree.
 */
import { ApplicationFailure } from '@temporalio/common';
import { Context, log } from '@temporalio/activity';
import type { BlobStore } from '../../../storage/blob-store';
import { ConversationStore } from '../../../storage/conversation';
import { recordingAgent } from '../../../agents';
import { defaultAgentName, type AgentProviderFactory, type AgentProviders } from '../../../agents/providers';
import type { AgentMessage, AgentTool, ToolUse } from '../../../agents/types';
import { TOOL_ROUNDS_EXHAUSTED } from '../../../agents/types';
import { worktreeAccess, worktreeTools } from '../../../agents/worktree-tools';
import { applyFileWrites, PathEscapeError, ReadOnlyPathError } from '../../../agents/worktree-files';
import { callsOf, type Supervision } from '../../../activities/supervision';
import { allowedTestCommands, checkTestCommand } from '../../../activities/test-command';
import { readJson, storeJson } from '../../../storage/blob-store';
import { truncateText } from '../../../model/limits';
import type { Json } from '../../../model/shapes';
import { checkExit } from './exit-checks';
import { renderPrompt } from './node-prompt';
import { MAX_ENVELOPE_ITEMS, RefusalLog, readOnlyFor, testRunnerFor, type Checked, type NodeRun } from './call-state';
import { invalidReplyFeedback, nudgeMessage, parseNodeReply, type NodeReply, type WorktreeMode } from './prompts';
import { allowedRepoRoots, checkRepo } from './repo-roots';
import type { NodeContext, TddNodeCallInput, TddNodeCallResult } from '../shapes';
import { restoreFromHead, reviewDiff } from './worktree-changes';

/**
 * How each provider reaches the worktree: `anthropic` through the worktree tools (its tool loop), `claude-code`
 * by running in it with its own tools; any other (`scripted`) only through the reply's `files`.
 */
const WORKTREE_MODES: Readonly<Record<string, WorktreeMode>> = { anthropic: 'tools', 'claude-code': 'workdir' };

/** What a node call needs from the worker: the blob store and the agent providers. */
export interface NodeCallDependencies {
  blobs: BlobStore;
  agents: AgentProviders;
}

/** How a node call ended its conversation, reported with its result. */
interface ConversationCounts {
  nudged: boolean;
  invalidReplies: number;
  agentCalls: number;
}

/**
 * One call of a graph node: admitted (repository and test command on the worker's lists), prompted, and
 * asked until a reply's exit holds up or the agent has sent more malformed replies than allowed.
 */
export async function runNodeCall(
  input: TddNodeCallInput,
  deps: NodeCallDependencies,
  env: NodeJS.ProcessEnv,
  supervision: Supervision,
): Promise<TddNodeCallResult> {
  const repoProblem = checkRepo(input.repo, allowedRepoRoots(env));
  if (repoProblem) throw ApplicationFailure.nonRetryable(repoProblem, 'RepositoryNotAllowed');
  const testProblem = checkTestCommand(input.settings.testCommand, allowedTestCommands(env));
  if (testProblem) throw ApplicationFailure.nonRetryable(testProblem, 'TestCommandNotAllowed');
  const { ctx, agents } = await openNodeRun(input, deps, env, supervision);
  const prompt = await renderPrompt(ctx);
  return converse(ctx, agents, prompt);
}

/** The call's state and its agents: the node's context read, the provider found, the worktree tools made. */
async function openNodeRun(
  input: TddNodeCallInput,
  deps: NodeCallDependencies,
  env: NodeJS.ProcessEnv,
  supervision: Supervision,
): Promise<{ ctx: NodeRun; agents: NodeAgents }> {
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
  return { ctx, agents: nodeAgents(ctx, factory, replies) };
}

/** Makes the agent for each agent call of a node call, and counts them. */
interface NodeAgents {
  next: () => ReturnType<typeof recordingAgent>;
  /** Agent calls made so far. */
  calls: number;
}

function nodeAgents(ctx: NodeRun, factory: AgentProviderFactory, replies: Json | undefined): NodeAgents {
  const { input, supervision } = ctx;
  // Scripted replies are consumed in order across every agent call of this node in this workflow, re-prompts
  // included (`replyIndex` counts the earlier ones), so a test can script a malformed reply and its fix.
  const scriptedKey = `${input.specId}.${input.node}`;
  const conversations = new ConversationStore(ctx.blobs);
  const agents: NodeAgents = {
    calls: 0,
    next: () =>
      recordingAgent(
        factory({
          itemId: input.treeId,
          stage: scriptedKey,
          attempt: (input.replyIndex ?? input.callIndex) + ++agents.calls,
          input: replies !== undefined ? { agent_replies: replies } : null,
          config: undefined,
        }),
        {
          calls: supervision.calls,
          conversations,
        },
      ),
  };
  return agents;
}

/** Asks until a reply's exit holds up (its result) or too many replies were malformed (`NoDecision`). */
async function converse(ctx: NodeRun, agents: NodeAgents, prompt: string): Promise<TddNodeCallResult> {
  const { input } = ctx;
  const shared = input.node === 'tddWriteTests' || input.node === 'impl' || input.node === 'tddReviewImpl';
  const messages: AgentMessage[] = [{ role: 'user', content: prompt }];
  let nudged = false;
  let invalidReplies = 0;
  for (let turn = 0; ; turn++) {
    const reply = await askWithNudge(ctx, agents.next, messages, shared, turn, nudged);
    nudged ||= reply.nudged;
    messages.push(...reply.added);
    const restored = await putBackReadOnly(ctx);
    const parsed = parseAsked(input.node, reply);
    if (!parsed.ok && 'refusedPaths' in parsed)
      for (const refused of parsed.refusedPaths ?? []) ctx.refused.add(`files: ${refused}`);
    let feedback: string;
    if (parsed.ok) {
      const checked = await checkReply(ctx, parsed, restored, turn);
      if (checked.ok) return finish(ctx, checked, { nudged, invalidReplies, agentCalls: agents.calls });
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
    if (invalidReplies > input.settings.maxInvalidReplies)
      return noDecision(ctx, feedback, { nudged, invalidReplies, agentCalls: agents.calls });
    messages.push({ role: 'user', content: feedback });
  }
}

/** claude-code edits the worktree with its own tools, which know nothing of read-only files: put them back. */
async function putBackReadOnly(ctx: NodeRun): Promise<string[]> {
  const { input } = ctx;
  const restored = ctx.worktreeMode === 'workdir' ? await restoreFromHead(input.worktree, await readOnlyFor(ctx)) : [];
  if (restored.length > 0)
    log.warn('agent changed read-only files; they were put back', {
      nodePath: input.nodePath,
      node: input.node,
      files: restored.slice(0, MAX_ENVELOPE_ITEMS),
    });
  if (restored.length > 0) ctx.refused.add(`read-only files changed and put back: ${restored.join(', ')}`);
  return restored;
}

/** The reply parsed, or why there is none to parse (a tool loop's problem, or no reply in time). */
function parseAsked(node: TddNodeCallInput['node'], reply: { text: string | undefined; problem?: string }): NodeReply {
  return reply.problem !== undefined
    ? { ok: false as const, issues: [reply.problem] }
    : reply.text === undefined
      ? { ok: false as const, issues: ['no reply within the nudge timeout'] }
      : parseNodeReply(node, reply.text);
}

/** A well-formed reply's files written (unless read-only files had to be put back) and its exit checked. */
async function checkReply(
  ctx: NodeRun,
  parsed: Extract<NodeReply, { ok: true }>,
  restored: string[],
  turn: number,
): Promise<Checked> {
  const writes =
    restored.length > 0
      ? {
          ok: false as const,
          feedback: `You changed files that are read-only for you (${restored.join(', ')}); they were put back as they were. Leave them alone, make your change elsewhere, and send the whole reply again.`,
        }
      : await applyWrites(ctx, parsed.files);
  // Each reply gets its own commit key: a reply sent again after feedback commits its new files.
  return writes.ok ? await checkExit({ ...ctx, opKey: `${ctx.opKey}/${turn}` }, parsed.exit) : writes;
}

/** The result of a call whose agent never sent a reply that held up. */
async function noDecision(ctx: NodeRun, feedback: string, counts: ConversationCounts): Promise<TddNodeCallResult> {
  const { input } = ctx;
  const exitRef = await storeJson(
    ctx.blobs,
    { exit: 'NoDecision', lastProblem: feedback },
    `${input.node} gave no valid decision`,
  );
  return {
    exit: 'NoDecision',
    exitRef,
    summary: truncateText(
      `${input.node} gave no valid decision after ${counts.invalidReplies} replies: ${feedback.split('\n')[0]}`,
    ),
    envelope: { message: truncateText(feedback, 1_000) },
    ...(await callsOf(ctx.supervision)),
    nudged: counts.nudged,
    invalidReplies: counts.invalidReplies,
    agentCalls: counts.agentCalls,
    ...ctx.refused.report(),
  };
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

/** Writes the reply's `files` into the worktree, or says why nothing was written. */
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

/** The result of a call whose exit held up: the exit and the test output stored, the counts reported. */
async function finish(
  ctx: NodeRun,
  checked: Extract<Checked, { ok: true }>,
  counts: ConversationCounts,
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
    ...(checked.commit ? await storeBranchDiff(ctx) : {}),
    ...(await callsOf(ctx.supervision)),
    nudged: counts.nudged,
    invalidReplies: counts.invalidReplies,
    agentCalls: counts.agentCalls,
    ...ctx.refused.report(),
  };
}

/**
 * The node's branch as a reviewer judges it: `git diff <baseCommit>..HEAD` stored (only its ref travels in the
 * result, so the history does not grow with the diff; the blob has its size).
 */
async function storeBranchDiff(ctx: NodeRun): Promise<{ diffRef?: string }> {
  const { input } = ctx;
  if (!input.baseCommit) return {};
  const bytes = Buffer.from(await reviewDiff(input.worktree, input.baseCommit));
  const stored = await ctx.blobs.put(bytes, 'text/x-diff', `diff of ${input.branch} after ${input.node}`);
  return { diffRef: stored.ref };
}
