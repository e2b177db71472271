/** A TDD node's state as it starts, and the counters its routes (`routes.ts`) decide by. */
import type { TddCounters } from './routes';
import { MAX_IMPL_ATTEMPTS, type TddNodeInput, type TddNodeState } from './shapes';
import { now } from '../../workflow-kit/common';

/** The state of a node that starts on `branch`: running, no calls yet, both memories in `conversationId`. */
export function startingState(input: TddNodeInput, branch: string, conversationId: string): TddNodeState {
  return {
    kind: 'tdd',
    nodePath: input.nodePath,
    specId: input.specId,
    treeId: input.treeId,
    status: 'running',
    phase: 'starting',
    branch,
    depth: input.depth,
    counters: { implAttempt: 1, reviewRounds: 0, scaffoldRuns: 0, calls: {}, agentCalls: {} },
    memory: {
      tdd: { conversationId, coveredCriteria: [], pendingTests: [] },
      impl: { conversationId, passedTests: [], attemptHistory: [] },
    },
    children: [],
    exits: {},
    pendingReviews: [],
    events: [],
    eventCount: 0,
    startedAt: now(),
  };
}

/** The node's counts so far against the limits its settings (and `MAX_IMPL_ATTEMPTS`) put on them. */
export function routeCounters(state: TddNodeState, settings: TddNodeInput['settings']): TddCounters {
  return {
    implAttempt: state.counters.implAttempt,
    maxImplAttempts: MAX_IMPL_ATTEMPTS,
    reviewRounds: state.counters.reviewRounds,
    maxReviewRounds: settings.maxReviewRounds,
    scaffoldRuns: state.counters.scaffoldRuns,
    maxScaffoldRuns: settings.maxScaffoldRuns,
  };
}
