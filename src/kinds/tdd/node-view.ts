/**
 * How a TDD node looks from outside, pure and workflow-safe: its Web UI details, its routes as events name
 * them, what routing reads of a call's result, and the node as reviews are checked against it.
 */
import type { ReviewTarget } from '../../engine/review';
import type { ExitSignal, TddRoute } from './routes';
import { MAX_IMPL_ATTEMPTS, type TddNodeCallResult, type TddNodeState } from './shapes';

/** A call's result as routing reads it: the exit's name and the call's one-line summary. */
export function signalOf<E extends { exit: string }>(result: TddNodeCallResult): ExitSignal<E> {
  return { exit: result.exit as E['exit'], detail: result.envelope.message ?? result.summary };
}

/** A route as the `NodeRouted` events say it (one event per change of this text). */
export function describeRoute(route: TddRoute): string {
  switch (route.to) {
    case 'impl':
      return `impl (attempt ${route.attempt}): ${route.because}`;
    case 'scaffold':
    case 'tddWriteTests':
      return `${route.to}: ${route.because}`;
    case 'human':
      return `human (${route.reason}): ${route.message}`;
    case 'exit':
      return `exit (${route.status}): ${route.because}`;
    default:
      return route.to;
  }
}

/** The graph nodes a human may be asked about (clarification, review rejected, stuck). */
const HUMAN_STAGES = ['scaffold', 'tddReviewImpl', 'impl'] as const;

/**
 * The node as `checkReview` reads a work item: the node's workflow id, and every stage a human may answer
 * for, waiting or not, so that a review of a node that is not waiting says what the node is doing.
 */
export function reviewTarget(state: TddNodeState, workflowId: string): ReviewTarget {
  const stages = Object.create(null) as Record<string, { status: string; attempts: [] }>;
  const doing =
    state.status === 'running' ? `running ${state.phase}` : state.status === 'waiting_review' ? 'idle' : state.status;
  for (const stage of HUMAN_STAGES) stages[stage] = { status: doing, attempts: [] };
  for (const review of state.pendingReviews) stages[review.stage] = { status: 'waiting_review', attempts: [] };
  return { id: `${workflowId} (TDD node ${state.nodePath})`, stages, pendingReviews: state.pendingReviews };
}

/** The Web UI's details of a node (markdown): phase, counters, memories, children, a human's wait. */
export function renderDetails(state: TddNodeState): string {
  const lines = [
    `**TDD node** \`${state.nodePath}\` · ${state.status} · phase **${state.phase}** · branch \`${state.branch}\``,
    '',
    `Impl attempt ${state.counters.implAttempt}/${MAX_IMPL_ATTEMPTS} · review rounds ${state.counters.reviewRounds} · scaffold runs ${state.counters.scaffoldRuns}`,
    `TDDMem: covered ${state.memory.tdd.coveredCriteria.join(', ') || '—'} · ImplMem: ${state.memory.impl.passedTests.length} tests passing`,
  ];
  if (state.children.length > 0)
    lines.push(
      '',
      '| child | status | merge |',
      '|---|---|---|',
      ...state.children.map((c) => `| ${c.id} | ${c.status} | ${c.mergeCommit?.slice(0, 10) ?? ''} |`),
    );
  if (state.human) lines.push('', `Waiting for a human (${state.human.reason}): ${state.human.message}`);
  if (state.refusals)
    lines.push('', `Refused to the agent: ${state.refusals.count} (latest: ${state.refusals.texts.join('; ')})`);
  return lines.join('\n');
}
