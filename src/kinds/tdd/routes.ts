/**
 * Seed 001's "Node Edges" table as pure functions: given a node's exit and the counters the workflow keeps,
 * where the TDD node goes next. The `tddNode` workflow performs what these decide and nothing else, so every
 * edge is unit-tested here (test/unit/tdd-routes.test.ts) without Temporal.
 *
 * Where the seed leaves a case open, the choice is made here and documented on the function:
 * - `ClarificationNeeded`, `Stuck` and `Reject` wait for a human (the same review queue as stage reviews)
 *   before the seed's `Exit`: an answer reruns Scaffold (clarification) or Impl (guidance); a rejection or an
 *   expired wait exits.
 * - Returning to Scaffold is bounded (`maxScaffoldRuns`), and so are review rounds (`maxReviewRounds`):
 *   past either bound the node escalates as `Stuck` instead of looping.
 * - `MergeRejected` counts against Impl's attempts (the issue: "counted against the Impl attempts").
 */
import type { ImplExit, MergerExit, RebaserExit, ScaffoldExit, TDDReviewImplExit, TDDWriteTestsExit } from './spec';

/**
 * What routing reads of an exit: its name and one line about it. The workflow holds exits only as this
 * envelope (the whole exit is in the blob store), and a whole exit is one too.
 */
export interface ExitSignal<E extends { exit: string }> {
  exit: E['exit'];
  /** One readable line (the activity's summary), quoted in the route's reason. */
  detail?: string;
}

function said(e: { exit: string; detail?: string }): string {
  if (!e.detail) return e.exit;
  return e.detail.startsWith(e.exit) ? e.detail : `${e.exit}: ${e.detail}`;
}
import type { HumanReason } from './shapes';

export type { HumanReason } from './shapes';

/** Where a TDD node goes next. */
export type TddRoute =
  | { to: 'fork' }
  | { to: 'scaffold'; because: string }
  | { to: 'tddWriteTests'; because: string }
  | { to: 'barrier' }
  | { to: 'impl'; attempt: number; because: string }
  | { to: 'tddReviewImpl' }
  | { to: 'merger' }
  | { to: 'human'; reason: HumanReason; message: string }
  | { to: 'exit'; status: 'merged' | 'failed'; because: string };

/** Counters the workflow keeps (the orchestrator's, never the node's). */
export interface TddCounters {
  /** Impl attempt of the current invocation, 1-based. */
  implAttempt: number;
  maxImplAttempts: number;
  /** MoreTests rounds so far. */
  reviewRounds: number;
  maxReviewRounds: number;
  /** Scaffold runs so far (the first included). */
  scaffoldRuns: number;
  maxScaffoldRuns: number;
}

/** Back to Scaffold, unless it already ran `maxScaffoldRuns` times: then the node is stuck. */
function toScaffold(c: TddCounters, because: string): TddRoute {
  if (c.scaffoldRuns >= c.maxScaffoldRuns) {
    return {
      to: 'human',
      reason: 'stuck',
      message: `Scaffold already ran ${c.scaffoldRuns} times (maxScaffoldRuns); last reason: ${because}`,
    };
  }
  return { to: 'scaffold', because };
}

/** Scaffold: `InitWork` → Fork (children, if any, start with it); `ClarificationNeeded` → a human, then Exit. */
export function afterScaffold(exit: ExitSignal<ScaffoldExit>): TddRoute {
  switch (exit.exit) {
    case 'InitWork':
      return { to: 'fork' };
    case 'ClarificationNeeded':
      return { to: 'human', reason: 'clarification', message: said(exit) };
  }
}

/** TDDWriteTests: `TestsReady` arrives at ImplBarrier; `InvalidScaffold` → Scaffold. */
export function afterWriteTests(exit: ExitSignal<TDDWriteTestsExit>, c: TddCounters): TddRoute {
  switch (exit.exit) {
    case 'TestsReady':
      return { to: 'barrier' };
    case 'InvalidScaffold':
      return toScaffold(c, said(exit));
  }
}

/** A child as the barrier sees it. */
export interface ChildStatus {
  id: string;
  status: 'running' | 'merged' | 'failed';
}

/**
 * ImplBarrier: Impl may start once TestsReady has arrived **and** every child has settled, in whatever order
 * and however long before the barrier began to wait. A failed child settles it too: Impl hears of it as a
 * child failure rather than waiting forever.
 */
export function barrierReady(
  testsReady: boolean,
  children: readonly ChildStatus[],
): { ready: boolean; waitingFor: string[] } {
  const waitingFor = [
    ...(testsReady ? [] : ['TestsReady']),
    ...children.filter((c) => c.status === 'running').map((c) => `child ${c.id}`),
  ];
  return { ready: waitingFor.length === 0, waitingFor };
}

/**
 * Impl: `TestsPassed` → TDDReviewImpl; `RequestRetry` → Impl again with the next attempt, and at the last
 * attempt it becomes `Stuck` (the seed's auto-conversion); `BlockedDependency` / `SpecAmbiguity` →
 * Scaffold; `Stuck` → a human.
 */
export function afterImpl(exit: ExitSignal<ImplExit>, c: TddCounters): TddRoute {
  switch (exit.exit) {
    case 'TestsPassed':
      return { to: 'tddReviewImpl' };
    case 'RequestRetry':
      if (c.implAttempt >= c.maxImplAttempts) {
        return {
          to: 'human',
          reason: 'stuck',
          message: `RequestRetry at attempt ${c.implAttempt} of ${c.maxImplAttempts} becomes Stuck (${said(exit)})`,
        };
      }
      return { to: 'impl', attempt: c.implAttempt + 1, because: said(exit) };
    case 'BlockedDependency':
      return toScaffold(c, said(exit));
    case 'SpecAmbiguity':
      return toScaffold(c, said(exit));
    case 'Stuck':
      return { to: 'human', reason: 'stuck', message: said(exit) };
  }
}

/**
 * TDDReviewImpl: `Approved` → Merger; `MoreTests` → TDDWriteTests with the critiques (at most
 * `maxReviewRounds` times, then Stuck); `Reject` → a human, then Exit.
 */
export function afterReview(exit: ExitSignal<TDDReviewImplExit>, c: TddCounters): TddRoute {
  switch (exit.exit) {
    case 'Approved':
      return { to: 'merger' };
    case 'MoreTests':
      if (c.reviewRounds >= c.maxReviewRounds) {
        return {
          to: 'human',
          reason: 'stuck',
          message: `the reviewer asked for more tests ${c.reviewRounds + 1} times (maxReviewRounds ${c.maxReviewRounds})`,
        };
      }
      return { to: 'tddWriteTests', because: said(exit) };
    case 'Reject':
      return {
        to: 'human',
        reason: 'review_rejected',
        message: `the reviewer rejected the implementation (${said(exit)})`,
      };
  }
}

/**
 * Merger: `MergeComplete` → the node is done (its parent gets the result; siblings are told); `MergeRejected`
 * → Impl, counted against its attempts (past the last attempt: Stuck).
 */
export function afterMerger(exit: ExitSignal<MergerExit>, c: TddCounters): TddRoute {
  switch (exit.exit) {
    case 'MergeComplete':
      return { to: 'exit', status: 'merged', because: said(exit) };
    case 'MergeRejected':
      if (c.implAttempt >= c.maxImplAttempts) {
        return {
          to: 'human',
          reason: 'stuck',
          message: `merge rejected after Impl attempt ${c.implAttempt} of ${c.maxImplAttempts} (${said(exit)})`,
        };
      }
      return { to: 'impl', attempt: c.implAttempt + 1, because: said(exit) };
  }
}

/**
 * Rebaser: `RebaseClean` / `RebaseAdapted` → TDDWriteTests; `RebaseConflict` → Scaffold. A node that has not
 * finished its scaffold yet (no InitWork) goes back to Scaffold either way: there are no tests to write yet.
 */
export function afterRebaser(exit: ExitSignal<RebaserExit>, c: TddCounters, scaffolded: boolean): TddRoute {
  switch (exit.exit) {
    case 'RebaseClean':
    case 'RebaseAdapted':
      return scaffolded
        ? { to: 'tddWriteTests', because: said(exit) }
        : { to: 'scaffold', because: `${said(exit)}, before the scaffold was done` };
    case 'RebaseConflict':
      return toScaffold(c, said(exit));
  }
}

/** What a human answered to a node waiting on them. */
export type HumanAnswer = { kind: 'answer'; text: string } | { kind: 'abort'; reason: string } | { kind: 'expired' };

/**
 * After a human: a clarification's answer reruns Scaffold with it; guidance on `Stuck` or a rejected review
 * reruns Impl from attempt 1 with the guidance (Scaffold when the node has no tests yet); an abort or an
 * expired wait exits (the seed's `Exit`). The workflow resets the scaffold-rerun count after guidance.
 */
export function afterHuman(
  reason: HumanReason,
  answer: HumanAnswer,
  progress: { testsReady: boolean } = { testsReady: true },
): TddRoute {
  if (answer.kind === 'expired')
    return {
      to: 'exit',
      status: 'failed',
      because: `${describeReason(reason)}: nobody answered before the wait expired`,
    };
  if (answer.kind === 'abort')
    return { to: 'exit', status: 'failed', because: `${describeReason(reason)}: aborted by a human: ${answer.reason}` };
  if (reason === 'clarification') return { to: 'scaffold', because: 'clarification answered' };
  // A node stuck before it had tests (Scaffold ran out of reruns) resumes at Scaffold: Impl has nothing to pass.
  if (!progress.testsReady) return { to: 'scaffold', because: 'guidance from a human' };
  return { to: 'impl', attempt: 1, because: 'guidance from a human' };
}

function describeReason(reason: HumanReason): string {
  return reason === 'clarification' ? 'clarification needed' : reason === 'stuck' ? 'stuck' : 'review rejected';
}

/** The impact level's rule for the Rebaser (seed: Trivial auto-resolves, Additive may use, Breaking mechanical only). */
export function rebaseRule(impact: 'Trivial' | 'Additive' | 'Breaking'): string {
  switch (impact) {
    case 'Trivial':
      return 'auto-resolve expected; no semantic changes';
    case 'Additive':
      return 'the sibling added exports; you may use them';
    case 'Breaking':
      return 'mechanical changes only (imports, renames, signature adjustments); logic changes → RebaseConflict';
  }
}
