/**
 * The `claude-code` provider: runs the Claude Code CLI headless (`claude -p <prompt> --output-format json`)
 * as a child process, one process per call. Conversations continue through the CLI's own sessions
 * (`--resume <session_id>`) when the stored conversation's latest turn carries one that the CLI has here (made
 * by this process in this directory; the conversation store keeps session ids with the turns), and through a
 * transcript preamble otherwise, so a retry on another worker still carries the whole conversation.
 *
 * The CLI acts on its working directory with its tools, so it never runs in the worker's: a request's
 * `workdir` (a TDD node's worktree) is used as it is, else each attempt gets its own directory under a work
 * root ({@link attemptWorkDir}), removed after each call unless kept. Nor does
 * it inherit the worker's environment (which may hold any secret): it gets only the variables on an
 * allow-list ({@link CLAUDE_CODE_ENV_ALLOW_LIST} plus `TREADLE_CLAUDE_ENV`) and the agent's own `env`.
 */
import { existsSync, mkdtempSync } from 'node:fs';
import path from 'node:path';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import type { z } from 'zod';
import { compileOutputSchema, validateReply } from './output-schema';
import { NO_USAGE, startCallRecord } from './call-record';
import type { AgentContext, AgentProviderFactory } from './providers';
import type { Agent, AgentRequest, AgentResult, AgentUsage, CallRecord } from './types';
import {
  attemptWorkDir,
  claudeCodeEnvAllowList,
  claudeCodeKeepWorkDirs,
  claudeCodeWorkRoot,
  cliEnvironment,
  ensurePrivateRoot,
  leaseWorkDir,
  removeQuietly,
  type WorkDirLease,
} from './claude-code-workspace';
import { buildInvocation, rememberSessionHere, resumableHere, splitConversation } from './claude-code-invocation';
import {
  type CliOutcome,
  type CliResult,
  lastLine,
  parseCliOutput,
  sessionNotResumed,
  usageOf,
} from './claude-code-result';
import { type CliRunOptions, runCli } from './claude-code-process';

export {
  attemptWorkDir,
  CLAUDE_CODE_ENV_ALLOW_LIST,
  CLAUDE_ENV_ENV,
  claudeCodeEnvAllowList,
  claudeCodeKeepWorkDirs,
  claudeCodeWorkRoot,
  cliEnvironment,
  KEEP_WORK_DIRS_ENV,
  WORK_DIR_ENV,
} from './claude-code-workspace';
export { CLAUDE_CODE_KILL_GRACE_MS } from './claude-code-process';

/** The provider name in the call log and in pipeline specs. */
export const CLAUDE_CODE_PROVIDER = 'claude-code';
/** The model logged when the request names none (the CLI then uses its own configured default). */
export const CLAUDE_CODE_DEFAULT_MODEL = 'claude-code-default';
/** How often a running call heartbeats; well under any sensible activity heartbeat timeout. */
export const CLAUDE_CODE_HEARTBEAT_INTERVAL_MS = 5_000;
/** Error messages stay one line and short enough to read in the Web UI. */
const MAX_MESSAGE_CHARS = 300;

const NOT_INSTALLED_MESSAGE =
  'the Claude Code CLI ("claude") is not installed or not on PATH; install it (npm i -g @anthropic-ai/claude-code) or choose another agent (TREADLE_AGENT=anthropic|scripted)';

/**
 * Where session ids are kept between calls, by conversation id. A plain `Map` fits. `delete`, when present,
 * is used to forget a session whose resumed call failed, so the retry falls back to the transcript.
 */
export interface ClaudeCodeSessions {
  get(conversationId: string): string | undefined;
  set(conversationId: string, sessionId: string): void;
  delete?(conversationId: string): unknown;
}

/** How a {@link ClaudeCodeAgent} runs the CLI. Every field is optional. */
export interface ClaudeCodeAgentOptions {
  /** The executable; default `CLAUDE_CODE_BIN`, else `claude` looked up on PATH. */
  command?: string;
  /**
   * An existing working directory for the CLI, used as it is (never created or removed). Without it, calls
   * run in directories created under `workRoot`: the attempt's ({@link attemptWorkDir}) when `attempt` is
   * given, else a fresh one per call; removed after each call unless `keepWorkDirs`.
   */
  cwd?: string;
  /** Root of the working directories; default {@link claudeCodeWorkRoot}(). Must be private to this user. */
  workRoot?: string;
  /** The attempt this agent serves (the factory's agents): its calls share the attempt's directory. */
  attempt?: Pick<AgentContext, 'itemId' | 'stage' | 'attempt'>;
  /** Keep working directories after their calls; default `TREADLE_KEEP_WORK_DIRS` (`1` or `true`). */
  keepWorkDirs?: boolean;
  /**
   * Names of the worker's environment variables the CLI may see (`NAME`, or `PREFIX_*`); default
   * {@link CLAUDE_CODE_ENV_ALLOW_LIST} plus the names in `TREADLE_CLAUDE_ENV`.
   */
  envAllowList?: readonly string[];
  /** Kills the CLI after this long and fails the call retryably (`ClaudeCodeTimeout`); none by default. */
  timeoutMs?: number;
  /** Appended to every invocation, e.g. `['--allowedTools', 'Read']`. */
  extraArgs?: string[];
  /** Environment variables for the CLI, over the allowed ones from this process's environment. */
  env?: NodeJS.ProcessEnv;
  /** A session to resume when neither the request nor `sessions` names one. */
  resumeSessionId?: string;
  /**
   * Session ids by conversation id, for callers that keep their own. None by default: the session comes with
   * the request (`resumeSessionId`), from the stored conversation, which every worker shares.
   */
  sessions?: ClaudeCodeSessions;
  /** Default {@link CLAUDE_CODE_HEARTBEAT_INTERVAL_MS}; shorter in tests. */
  heartbeatIntervalMs?: number;
}

/**
 * An {@link Agent} backed by the Claude Code CLI. Mechanical failures throw Temporal failures carrying the
 * call record as `details[0]`: CLI missing → non-retryable `AgentUnavailable`; non-zero exit, `is_error`
 * → retryable `ClaudeCodeError`; unreadable stdout → retryable `ClaudeCodeOutputError`; timeout →
 * retryable `ClaudeCodeTimeout`; `request.signal` aborted → `CancelledFailure`. A reply that does not
 * match `outputSchema` is not a failure: it comes back as `invalidOutput`.
 * `maxTokens` and `temperature` are not supported by the CLI and are ignored.
 */
export class ClaudeCodeAgent implements Agent {
  readonly provider = CLAUDE_CODE_PROVIDER;
  private readonly command: string;
  private readonly sessions: ClaudeCodeSessions | undefined;

  constructor(private readonly options: ClaudeCodeAgentOptions = {}) {
    this.command = options.command ?? process.env.CLAUDE_CODE_BIN ?? 'claude';
    this.sessions = options.sessions;
  }

  /** Runs one call; see the class comment for how failures are thrown. */
  async run(request: ClaudeCodeRequest): Promise<AgentResult> {
    const callRecord = startCallRecord(request, CLAUDE_CODE_PROVIDER, request.model ?? CLAUDE_CODE_DEFAULT_MODEL);
    const failedCall = (message: string): CallRecord => callRecord('error', NO_USAGE, message);
    const { schema, split } = checkRequest(request, failedCall);
    if (request.signal?.aborted) throw cancelled(failedCall('cancelled'));
    const workDir = this.acquireWorkDir(request.workdir, failedCall);
    const cliOptions = this.cliOptions(request, workDir.path);
    const { outcome, resumed } = await this.runResumingIfHere(request, split, cliOptions);
    // The reply is the call's only product: nothing the CLI left in its directory is needed any more.
    workDir.release();

    const fail = this.failureOfRun(request, resumed, callRecord);
    switch (outcome.kind) {
      case 'aborted':
        throw cancelled(failedCall('cancelled'));
      case 'timed-out':
        throw fail('ClaudeCodeTimeout', `claude did not finish within ${this.options.timeoutMs} ms and was killed`);
      case 'spawn-failed':
        throw this.spawnFailure(outcome, workDir, failedCall);
      case 'exited':
        break;
    }
    const { result, text, usage } = readResult(outcome, fail);
    if (request.conversationId !== undefined && result.session_id !== undefined)
      this.sessions?.set(request.conversationId, result.session_id);
    if (result.session_id !== undefined) rememberSessionHere(result.session_id, cliOptions.cwd);
    const call = callRecord('success', usage);
    const reply: AgentResult = { text, usage, call, calls: [call] };
    if (result.session_id !== undefined) reply.sessionId = result.session_id;
    if (schema) {
      const validated = validateReply(text, schema);
      if (validated.ok) reply.output = validated.value;
      else reply.invalidOutput = { issues: validated.issues, raw: text };
    }
    return reply;
  }

  /** How the CLI runs for this request: in the call's directory, with the allowed environment only. */
  private cliOptions(request: ClaudeCodeRequest, cwd: string): CliRunOptions {
    return {
      cwd,
      env: cliEnvironment(process.env, this.options.envAllowList ?? claudeCodeEnvAllowList(), this.options.env),
      signal: request.signal,
      timeoutMs: this.options.timeoutMs,
      heartbeat: request.heartbeat,
      heartbeatIntervalMs: this.options.heartbeatIntervalMs ?? CLAUDE_CODE_HEARTBEAT_INTERVAL_MS,
    };
  }

  /**
   * Runs the CLI, resuming the conversation's session when the CLI has it here; when the resumed run shows the
   * session is gone, runs again with the whole transcript. `resumed`: whether the final run resumed a session.
   */
  private async runResumingIfHere(
    request: ClaudeCodeRequest,
    split: Conversation,
    cliOptions: CliRunOptions,
  ): Promise<{ outcome: CliOutcome; resumed: boolean }> {
    const extraArgs = this.options.extraArgs ?? [];
    const resumeSessionId =
      resumableHere(request.resumeSessionId, cliOptions.cwd) ??
      (request.conversationId === undefined ? undefined : this.sessions?.get(request.conversationId)) ??
      this.options.resumeSessionId;
    const outcome = await runCli(this.command, buildInvocation(request, split, resumeSessionId, extraArgs), cliOptions);
    if (resumeSessionId === undefined || !sessionNotResumed(outcome)) {
      return { outcome, resumed: resumeSessionId !== undefined };
    }
    // The CLI no longer has the session (its files were removed, or it was never made here): send the whole
    // transcript instead.
    if (request.conversationId !== undefined) this.sessions?.delete?.(request.conversationId);
    const retried = await runCli(this.command, buildInvocation(request, split, undefined, extraArgs), cliOptions);
    return { outcome: retried, resumed: false };
  }

  /** Builds the retryable failures of a call whose CLI ran, each carrying the call record. */
  private failureOfRun(
    request: ClaudeCodeRequest,
    resumed: boolean,
    callRecord: ReturnType<typeof startCallRecord>,
  ): FailRun {
    return (type, message, usage = NO_USAGE) => {
      // A resumed session that keeps failing (e.g. deleted, or stored under another cwd) must not fail every
      // retry: forget it so the next attempt sends the whole transcript instead.
      if (resumed && request.conversationId !== undefined) this.sessions?.delete?.(request.conversationId);
      return ApplicationFailure.create({
        message,
        type,
        nonRetryable: false,
        details: [callRecord(type === 'ClaudeCodeTimeout' ? 'timeout' : 'error', usage, message)],
      });
    };
  }

  /**
   * The working directory of one call: the request's `workdir`, else `cwd`, as given (the caller owns them:
   * never created or removed); else the attempt's directory, created (and removed on
   * release unless kept, once no other call of this process runs in it); else a fresh one under the root.
   * A directory that cannot be created is a worker configuration error: non-retryable `InvalidAgentConfig`.
   */
  private acquireWorkDir(workdir: string | undefined, call: (message: string) => CallRecord): WorkDirLease {
    const given = workdir ?? this.options.cwd;
    if (given !== undefined) return { path: given, given: true, release: () => undefined };
    const keep = this.options.keepWorkDirs ?? claudeCodeKeepWorkDirs();
    const root = this.options.workRoot ?? claudeCodeWorkRoot();
    try {
      ensurePrivateRoot(root);
      if (this.options.attempt !== undefined) return leaseWorkDir(attemptWorkDir(root, this.options.attempt), keep);
      const fresh = mkdtempSync(path.join(root, 'call-'));
      return { path: fresh, given: false, release: () => (keep ? undefined : removeQuietly(fresh)) };
    } catch (error) {
      const message = oneLine(`cannot create a working directory for claude: ${(error as Error).message}`);
      throw ApplicationFailure.nonRetryable(message, 'InvalidAgentConfig', call(message));
    }
  }

  /** Maps a failure to start the CLI: missing or unusable CLI and bad arguments are not worth retrying. */
  private spawnFailure(
    outcome: Extract<CliOutcome, { kind: 'spawn-failed' }>,
    workDir: WorkDirLease,
    call: (message: string) => CallRecord,
  ): ApplicationFailure {
    const { error } = outcome;
    const nonRetryable = (type: string, message: string): ApplicationFailure =>
      ApplicationFailure.nonRetryable(message, type, call(message));
    // spawn reports a missing cwd as ENOENT too; say which one is missing.
    if (error.code === 'ENOENT' && workDir.given && !existsSync(workDir.path)) {
      return nonRetryable('InvalidAgentConfig', `the working directory for claude does not exist: ${workDir.path}`);
    }
    if (error.code === 'ENOENT') return nonRetryable('AgentUnavailable', NOT_INSTALLED_MESSAGE);
    if (error.code === 'EACCES')
      return nonRetryable(
        'AgentUnavailable',
        oneLine(`the Claude Code CLI (${this.command}) is not executable: ${error.message}`),
      );
    const message = oneLine(`claude could not be started: ${error.message}`);
    // A synchronous throw is a bad argument (e.g. a NUL byte in the prompt): retrying cannot help.
    if (outcome.synchronous) return nonRetryable('InvalidAgentRequest', message);
    return ApplicationFailure.create({
      message,
      type: 'ClaudeCodeError',
      nonRetryable: false,
      details: [call(message)],
    });
  }
}

/**
 * Builds a {@link ClaudeCodeAgent} with default options. It keeps no sessions of its own: they are stored with
 * the conversation and arrive as `request.resumeSessionId` (only while the latest turn is theirs).
 */
export const claudeCodeAgentFactory: AgentProviderFactory = (ctx) => new ClaudeCodeAgent({ attempt: ctx });

/**
 * A request as the conversation store hands it on: `resumeSessionId` is the claude-code session of the stored
 * conversation's latest turn, which has seen exactly the earlier messages. (Belongs on `AgentRequest`.)
 */
export type ClaudeCodeRequest = AgentRequest;

/** The last user message, and the messages before it. */
type Conversation = NonNullable<ReturnType<typeof splitConversation>>;

/** Makes a retryable failure of a call whose CLI ran. */
type FailRun = (type: string, message: string, usage?: AgentUsage) => ApplicationFailure;

/** The request's output schema, compiled, and its conversation; a request that cannot be sent fails non-retryably. */
function checkRequest(
  request: ClaudeCodeRequest,
  failedCall: (message: string) => CallRecord,
): { schema: z.ZodType | undefined; split: Conversation } {
  const invalidRequest = (message: string): ApplicationFailure =>
    ApplicationFailure.nonRetryable(message, 'InvalidAgentRequest', failedCall(message));
  let schema: z.ZodType | undefined;
  try {
    schema = request.outputSchema === undefined ? undefined : compileOutputSchema(request.outputSchema);
  } catch (error) {
    throw invalidRequest((error as Error).message);
  }
  const split = splitConversation(request.messages);
  if (!split) throw invalidRequest('a claude-code request must end with a user message');
  return { schema, split };
}

/** The result the CLI printed on exit, with its text and usage; an error exit or unreadable output is thrown. */
function readResult(
  outcome: Extract<CliOutcome, { kind: 'exited' }>,
  fail: FailRun,
): { result: CliResult; text: string; usage: AgentUsage } {
  const parsed = parseCliOutput(outcome.stdout);
  const usage = parsed.ok ? usageOf(parsed.value) : NO_USAGE;
  const stderrLine = lastLine(outcome.stderr);
  if (outcome.code !== 0) {
    const how =
      outcome.code === null ? `was killed by ${outcome.signal ?? 'a signal'}` : `exited with code ${outcome.code}`;
    const why = stderrLine ?? (parsed.ok ? parsed.value.result : undefined) ?? 'no output on stderr';
    throw fail('ClaudeCodeError', oneLine(`claude ${how}: ${why}`), usage);
  }
  if (!parsed.ok) {
    throw fail(
      'ClaudeCodeOutputError',
      oneLine(`claude printed output that is not its JSON result (${parsed.reason}): ${excerpt(outcome.stdout)}`),
    );
  }
  const result = parsed.value;
  if (result.is_error === true || (result.subtype !== undefined && result.subtype !== 'success')) {
    const why = result.result || stderrLine || 'no details';
    throw fail(
      'ClaudeCodeError',
      oneLine(`claude reported an error (${result.subtype ?? 'is_error'}, exit code 0): ${why}`),
      usage,
    );
  }
  if (result.result === undefined)
    throw fail('ClaudeCodeOutputError', 'claude printed a result without its `result` text', usage);
  return { result, text: result.result, usage };
}

function cancelled(call: CallRecord): CancelledFailure {
  return new CancelledFailure('the claude-code call was cancelled', [call]);
}

function oneLine(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > MAX_MESSAGE_CHARS ? `${flat.slice(0, MAX_MESSAGE_CHARS - 1)}…` : flat;
}

function excerpt(text: string): string {
  return JSON.stringify(text.trim().slice(0, 120));
}
