/**
 * A TDD node's activities as its workflow calls them: the proxy with its timeouts and retries, what a graph
 * node's call records in the node's state and tells in its events, and the route of a call that decided nothing.
 */
import { proxyActivities } from '@temporalio/workflow';
import type { TddRoute } from './routes';
import { addTotals, callBatchOf } from '../../engine/usage';
import type { TDD_NODE_ACTIVITY, TDD_WORKTREE_ACTIVITY } from '../../model/activity-types';
import type { TddNodeName } from './spec';
import type { TddNodeCallInput, TddNodeCallResult, TddNodeState, TddWorktreeInput, TddWorktreeResult } from './shapes';
import { STEP_HEARTBEAT_TIMEOUT } from '../../model/limits';
import type { EventType, TreadleEvent } from '../../model/shapes';

/** The node's two activities: one graph node's call, and preparing a worktree. */
export const tddActivities = proxyActivities<{
  [TDD_NODE_ACTIVITY]: (input: TddNodeCallInput) => Promise<TddNodeCallResult>;
  [TDD_WORKTREE_ACTIVITY]: (input: TddWorktreeInput) => Promise<TddWorktreeResult>;
}>({
  // Agent calls with tool use and test runs: long, heartbeating; a lost worker is noticed within the timeout.
  startToCloseTimeout: '2h',
  heartbeatTimeout: STEP_HEARTBEAT_TIMEOUT,
  retry: {
    maximumAttempts: 3,
    nonRetryableErrorTypes: [
      'RepositoryNotAllowed',
      'TestCommandNotAllowed',
      'UnknownAgent',
      'InvalidInput',
      'AgentUnavailableError',
    ],
  },
});

/** Refusals the Web UI's details show, the latest. */
const LATEST_REFUSALS_SHOWN = 3;

/** How a node appends an event to its stream. */
export type EmitEvent = (type: EventType, message: string, fields?: Partial<TreadleEvent>) => void;

/**
 * Records a graph node's call result in the node's state (agent calls, usage, exit, the newest diff and test
 * output, refusals) and tells it: `WorkRefused` when the agent's work was refused, then `NodeExit`.
 */
export function recordCall(state: TddNodeState, node: TddNodeName, result: TddNodeCallResult, emit: EmitEvent): void {
  state.counters.agentCalls[node] = (state.counters.agentCalls[node] ?? 0) + result.agentCalls;
  const used = callBatchOf(result.calls)?.usage;
  if (used) state.usage = addTotals(state.usage, used);
  state.exits[node] = { exit: result.exit, ref: result.exitRef, summary: result.summary };
  // What a reviewer judges: the newest diff and test output, each kept until a later call brings its own.
  // Results recorded before diffs were stored carry `testRun` but no `diffRef`: such a node shows its test
  // output, and a diff only from its next call with a commit.
  if (result.diffRef !== undefined || result.testRun !== undefined)
    state.latest = {
      ...state.latest,
      ...(result.diffRef !== undefined ? { diffRef: result.diffRef } : {}),
      ...(result.testRun ? { testOutputRef: result.testRun.outputRef } : {}),
    };
  const refused = result.refusals;
  if (refused) {
    // Why the agent's work was refused is the user's business too; the activity capped the count and text.
    const more = refused.count > refused.texts.length ? ` (and ${refused.count - refused.texts.length} more)` : '';
    emit('WorkRefused', `${node}: refused ${refused.count}×: ${refused.texts.join('; ')}${more}`, {
      stage: node,
      details: { refused: refused.count, refusals: refused.texts },
    });
    const latest = [...(state.refusals?.texts ?? []), ...refused.texts].slice(-LATEST_REFUSALS_SHOWN);
    state.refusals = { count: (state.refusals?.count ?? 0) + refused.count, texts: latest };
  }
  emit('NodeExit', `${node}: ${result.summary}`, {
    stage: node,
    details: {
      exit: result.exit,
      ref: result.exitRef,
      ...(result.commit ? { commit: result.commit } : {}),
      ...(result.testRun ? { tests: result.testRun.summary } : {}),
      calls: callBatchOf(result.calls)?.usage.calls ?? 0,
      nudged: result.nudged,
      invalidReplies: result.invalidReplies,
      ...(refused ? { refused: refused.count, refusals: refused.texts } : {}),
    },
  });
}

/** A node that gave no valid decision is stuck: a human decides. */
export function noDecision(node: TddNodeName, result: TddNodeCallResult): TddRoute {
  return {
    to: 'human',
    reason: 'stuck',
    message: `${node} gave no valid decision: ${result.envelope.message ?? result.summary}`,
  };
}
