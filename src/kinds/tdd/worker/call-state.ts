/**
 * One call of a TDD graph node as its parts see it (seed 001): the call's state ({@link NodeRun}), what the
 * agent was refused, what a node's handler gives back, and what the node may not touch and which tests it runs.
 */
import { readJson, type BlobStore } from '../../../storage/blob-store';
import type { AgentTool } from '../../../agents/types';
import type { Supervision } from '../../../activities/supervision';
import { allowedTestCommands, checkTestCommand, runTestCommand, type TestRun } from '../../../activities/test-command';
import { truncateText } from '../../../model/limits';
import type { WorktreeMode } from './prompts';
import type { InitWorkPayload, NodeExit, TestsReadyPayload } from '../spec';
import {
  MAX_REFUSAL_CHARS,
  MAX_REFUSALS_PER_CALL,
  type NodeContext,
  type TddEnvelope,
  type TddNodeCallInput,
  type TddRefusals,
} from '../shapes';

/** Inline lists in envelopes are cut to this many entries. */
export const MAX_ENVELOPE_ITEMS = 50;

/** What a node's handler gives back after its mechanical checks. */
export type Checked =
  | { ok: true; exit: NodeExit; envelope: TddEnvelope; commit?: string; testRun?: TestRun; summary: string }
  | { ok: false; feedback: string };

/** The state of one node call, shared by the prompt, the conversation and the exit checks. */
export interface NodeRun {
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
export class RefusalLog {
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

/** What this call may not write or delete, through `files` or the tools: the node's read-only files, and the tests for Impl. */
export async function readOnlyFor(ctx: NodeRun): Promise<string[]> {
  return [...ctx.input.readOnly, ...(ctx.input.node === 'impl' ? await testFilesOf(ctx) : [])];
}

/**
 * The `run_tests` tool's runner: the spec's test command in the worktree, on the files the agent names,
 * admitted by the worker's allow-list like every test run (a refusal is the tool's error, which the model reads).
 */
export function testRunnerFor(ctx: NodeRun): ((files: string[], signal?: AbortSignal) => Promise<TestRun>) | undefined {
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

/** Runs the spec's test command, on `files` when given (the allow-list admits relative file arguments). */
export async function runTests(ctx: NodeRun, cwd: string, files: string[] = []): Promise<TestRun> {
  return runTestCommand({
    cwd,
    command: [...ctx.input.settings.testCommand, ...files],
    timeoutMs: ctx.input.settings.testTimeoutSeconds * 1000,
    signal: ctx.supervision.signal,
  });
}

/** This node's tests: the test files TDDWriteTests committed and the scaffold's contract suite. */
export async function ownTests(ctx: NodeRun): Promise<string[]> {
  const ready = ctx.input.refs.testsReady
    ? await readJson<TestsReadyPayload>(ctx.blobs, ctx.input.refs.testsReady)
    : undefined;
  const scaffold = ctx.input.refs.scaffold
    ? await readJson<InitWorkPayload>(ctx.blobs, ctx.input.refs.scaffold)
    : undefined;
  return [...new Set([...(ready?.testFiles ?? []), ...(scaffold ? [scaffold.contractSuite] : [])])];
}
