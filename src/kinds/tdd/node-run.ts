/**
 * One TDD node's run (`tddNode` is a short shell over it): its state, its message handlers and the walk of
 * the seed's graph, one method per graph node, each doing what the pure routes (`routes.ts`) decide. The
 * merge handshake with the parent and the children is `merge-handshake.ts`.
 */
import {
  CancellationScope,
  condition,
  isCancellation,
  getExternalWorkflowHandle,
  patched,
  setCurrentDetails,
  setHandler,
  TemporalFailure,
  workflowInfo,
} from '@temporalio/workflow';
import {
  afterHuman,
  afterImpl,
  afterMerger,
  afterRebaser,
  afterReview,
  afterScaffold,
  afterWriteTests,
  barrierReady,
  type TddRoute,
} from './routes';
import { addTotals } from '../../engine/usage';
import { TDD_NODE_ACTIVITY, TDD_WORKTREE_ACTIVITY } from '../../model/activity-types';
import { noDecision, recordCall, tddActivities } from './node-activities';
import { routeCounters, startingState } from './node-state';
import type {
  ImplExit,
  MergerExit,
  RebaserExit,
  ScaffoldExit,
  TDDReviewImplExit,
  TDDWriteTestsExit,
  TddNodeName,
} from './spec';
import {
  type TddNodeCallInput,
  type TddNodeCallResult,
  type TddNodeInput,
  type TddNodeResult,
  type TddNodeState,
  type TddWorktreeResult,
} from './shapes';
import { truncateText } from '../../model/limits';
import type { EventType, TreadleEvent, UsageTotals } from '../../model/shapes';
import type { StateQueryArgs } from '../../model/state';
import { describeFailure, eventPage, failureWithUsage, now, usageReported } from '../../workflow-kit/common';
import { EventStream } from '../../workflow-kit/publishing';
import { NodePublications } from './node-publishing';
import { eventsQuery } from '../../workflow-kit/messages';
import { tddStateQuery } from './messages';
import { HumanReviews, type ReviewingNode } from './human-review';
import { MergeHandshake, treeFailure, type MergingNode } from './merge-handshake';
import { describeRoute, renderDetails, signalOf } from './node-view';

/**
 * The patch after which a cancelled node ends `cancelled` (not `failed`, error `cancelled`) and only once its
 * running children have closed, so that none is left to the parent-close policy, which terminates it
 * (docs/versioning.md: `patched()` for tddNode; older histories in test/replay/histories/before-cancelled-status/).
 */
export const TDD_CANCELLED_PATCH = 'tdd-cancelled-status';

/** One run of a TDD node: its state, its handlers and its walk of the graph. */
export class TddNodeRun implements ReviewingNode, MergingNode {
  readonly info = workflowInfo();
  readonly branch: string;
  readonly conversationId: string;
  readonly settings: TddNodeInput['settings'];
  readonly state: TddNodeState;
  readonly handshake = new MergeHandshake(this);
  private readonly reviews = new HumanReviews(this);
  private readonly events: EventStream;
  private readonly published = new NodePublications();

  /** The node's worktree (set once it is prepared, before any call). */
  worktree!: TddWorktreeResult;
  private baseCommit = '';
  /** The root merges into the tree's target branch, in a worktree of its own; children into their parent's. */
  rootTarget: TddWorktreeResult | undefined;
  /** What earlier nodes produced, by reference. */
  readonly refs: TddNodeCallInput['refs'] = {};
  /**
   * Notes (a human's answer, a route's reason, children's failures) are addressed to the graph node they are
   * for and reach that node's next call only, whatever runs first: rebases, merges judged, other nodes' calls.
   */
  private readonly notes: Partial<Record<TddNodeName, string>> = {};
  private scaffolded = false;
  private implementationExists = false;

  constructor(readonly input: TddNodeInput) {
    this.branch = `tdd/${input.nodePath}`;
    this.conversationId = `tdd:${input.treeId}:${input.nodePath}`;
    this.settings = input.settings;
    this.state = startingState(input, this.branch, this.conversationId);
    // Messages carry agents' text, so they are cut to the usual length.
    this.events = new EventStream(this.state, this.info.workflowId, undefined, true);
  }

  /** Appends an event to the node's stream. */
  emit(type: EventType, message: string, fields?: Partial<TreadleEvent>): void {
    this.events.emit(type, message, fields);
  }

  /** Reviews (signal and update), the `state` and `events` queries, and the merge handshake's signals. */
  registerHandlers(): void {
    const { state } = this;
    // The review queue's answers first, as the work item has them.
    this.reviews.registerHandlers();
    setHandler(tddStateQuery, (args?: StateQueryArgs) => ({ ...state, events: eventPage(state.events, args) }));
    setHandler(eventsQuery, (args?: StateQueryArgs) => ({
      status: state.status === 'merged' ? 'completed' : state.status,
      eventCount: state.eventCount,
      events: eventPage(state.events, args),
      pendingReviews: state.pendingReviews,
      ...(state.error ? { error: state.error } : {}),
    }));
    this.handshake.registerHandlers();
  }

  /** Search attributes and memo when status or waiting reviews changed (node-publishing.ts); details. */
  publish(): void {
    this.published.publish(this.state);
    setCurrentDetails(renderDetails(this.state));
  }

  /** `{ usage }`: the totals of this node's calls and its children's, or nothing when there were none. */
  usageOfTree(): { usage?: UsageTotals } {
    const usage = addTotals(this.state.usage, ...this.state.children.map((c) => c.usage));
    return usage.calls > 0 ? { usage } : {};
  }

  private addressNote(node: TddNodeName, text: string): void {
    const { notes } = this;
    notes[node] = notes[node] === undefined ? text : `${notes[node]}\n\n${text}`;
  }

  /** Runs the node to its result; a flagged node that did not merge fails its workflow (the result its details). */
  async run(): Promise<TddNodeResult> {
    const result = await this.settle();
    if (result.status === 'merged' || !this.input.failAsWorkflow) return result;
    throw treeFailure(result);
  }

  /** Walks the graph to its exit, waits for the children to settle, and reports how the node ended. */
  private async settle(): Promise<TddNodeResult> {
    const { input, state, branch } = this;
    try {
      this.emit('ItemStarted', `TDD node ${input.nodePath} started on ${branch} (depth ${input.depth})`);
      this.publish();
      this.worktree = await tddActivities[TDD_WORKTREE_ACTIVITY]({ repo: input.repo, branch, base: input.base });
      state.worktree = this.worktree.worktree;
      this.baseCommit = this.worktree.head;
      this.rootTarget =
        input.parentWorkflowId === undefined
          ? await tddActivities[TDD_WORKTREE_ACTIVITY]({ repo: input.repo, branch: input.mergeInto, base: input.base })
          : undefined;
      const result = await this.walk();
      await this.handshake.settleChildren(result);
      // Every child has settled: the tree's calls are all counted (a child cancelled by a failed parent reports none).
      Object.assign(result, this.usageOfTree());
      state.status = result.status;
      state.phase = 'done';
      if (result.error) state.error = result.error;
      state.completedAt = now();
      this.emit(
        result.status === 'merged' ? 'ItemCompleted' : 'ItemFailed',
        result.status === 'merged'
          ? `${input.nodePath} merged as ${result.mergeCommit?.slice(0, 10)}`
          : `${input.nodePath} failed: ${result.error}`,
      );
      this.publish();
      return result;
    } catch (error) {
      return this.failed(error);
    }
  }

  /**
   * A node that cannot go on (its worker refuses the repository or the test command, an activity failed for
   * good, the node was cancelled) still ends where users look: failed (cancelled, from the patch on), with the
   * event and its status published; its running children are stopped, as when it fails by the graph.
   */
  private async failed(error: unknown): Promise<never> {
    const { input, state } = this;
    const cancelled = isCancellation(error) && patched(TDD_CANCELLED_PATCH);
    state.status = cancelled ? 'cancelled' : 'failed';
    state.phase = 'done';
    state.pendingReviews = [];
    state.error = isCancellation(error) ? 'cancelled' : describeFailure(error);
    // The calls of the step that failed (in its failure, or on its last heartbeat when its worker died).
    const used = isCancellation(error) ? undefined : usageReported(error);
    if (used) state.usage = addTotals(state.usage, used);
    state.completedAt = now();
    this.emit('ItemFailed', cancelled ? `${input.nodePath} cancelled` : `${input.nodePath} failed: ${state.error}`);
    await CancellationScope.nonCancellable(async () => {
      this.publish();
      for (const child of state.children) {
        // A child that ended meanwhile cannot be cancelled: nothing left to stop.
        if (child.status === 'running')
          await getExternalWorkflowHandle(child.workflowId)
            .cancel()
            .catch(() => undefined);
      }
      // Cancelled, the node closes after its children (each watched till its end): none is left to be terminated.
      if (cancelled) await condition(() => !state.children.some((c) => c.status === 'running'));
    });
    // A cancellation stays one (Temporal keeps no details with it, so its calls go uncounted), and an error
    // that is no Temporal failure (a bug in workflow code) fails the workflow task, which Temporal retries
    // until a fixed worker runs it. Any other error fails the node with the tree's calls so far in its
    // details, which the parent node and the work item count (usage, token budget); the message is the
    // error's own, as before.
    if (isCancellation(error) || !(error instanceof TemporalFailure)) throw error;
    throw failureWithUsage(state.error, 'TddNodeFailed', this.usageOfTree().usage, error);
  }

  /** The graph from Scaffold to its exit; between steps, children's merges are served and siblings' rebased onto. */
  private async walk(): Promise<TddNodeResult> {
    const { handshake } = this;
    let route: TddRoute = { to: 'scaffold', because: 'start' };
    let lastRoute = '';
    let result: TddNodeResult | undefined;
    while (result === undefined) {
      await handshake.serveRequests();
      // A sibling merged: rebase before the next step (the seed pauses Impl/TDD while rebasing).
      if (handshake.siblingMerges.length > 0 && route.to !== 'exit') {
        route = await this.rebase(route);
        this.emit('NodeRouted', `rebaser → ${describeRoute(route)}`, { stage: 'rebaser' });
        continue;
      }
      if (route.to === 'exit') result = this.exit(route);
      else route = await this.step(route);
      // One event per change of route (a barrier that only served a child's merge request is no news).
      const described = describeRoute(route);
      if (result === undefined && described !== lastRoute)
        this.emit('NodeRouted', `→ ${described}`, { stage: this.state.phase });
      lastRoute = described;
    }
    return result;
  }

  /** Runs the graph node `route` leads to; the route it decides next (the same one to wait again). */
  private step(route: Exclude<TddRoute, { to: 'exit' }>): Promise<TddRoute> {
    switch (route.to) {
      case 'scaffold':
        return this.scaffold(route);
      case 'fork':
        // Fork: TDDWriteTests now; ImplBarrier is the wait below, children already run as child workflows.
        return Promise.resolve({ to: 'tddWriteTests', because: 'fork' });
      case 'tddWriteTests':
        return this.writeTests(route);
      case 'barrier':
        return this.barrier(route);
      case 'impl':
        return this.impl(route);
      case 'tddReviewImpl':
        return this.review();
      case 'merger':
        return this.merger(route);
      case 'human':
        return this.human(route);
    }
  }

  /** Rebases onto the newest sibling merge; the route to go on with (the rebaser's, unless it goes back). */
  private async rebase(route: TddRoute): Promise<TddRoute> {
    // Several merges since the last step: one rebase onto the newest head covers them all.
    const events = this.handshake.siblingMerges.splice(0);
    const event = events[events.length - 1]!;
    for (const e of events)
      this.emit('SiblingMerged', `sibling ${e.author} merged (${e.impactLevel}) at ${e.newParentHead.slice(0, 10)}`, {
        stage: 'rebaser',
      });
    const several =
      events.length > 1
        ? {
            note: `Siblings merged since your last step: ${events.map((e) => `${e.author} (${e.impactLevel})`).join(', ')}; the MergeEvent below is the latest.`,
          }
        : {};
    const rebased = await this.call('rebaser', {
      rebase: { parentBranch: event.parentBranch, newParentHead: event.newParentHead },
      refs: { ...this.refs, ...(event.mergeEventRef ? { mergeEvent: event.mergeEventRef } : {}) },
      ...several,
    });
    if (rebased.exit === 'NoDecision') return noDecision('rebaser', rebased);
    const next = afterRebaser(
      signalOf<RebaserExit>(rebased),
      routeCounters(this.state, this.settings),
      this.scaffolded,
    );
    if (
      next.to !== 'tddWriteTests' ||
      route.to === 'tddWriteTests' ||
      route.to === 'barrier' ||
      route.to === 'impl' ||
      route.to === 'tddReviewImpl' ||
      route.to === 'merger'
    )
      return next;
    return route;
  }

  /** Scaffold: the node's plan, red tests and children (started here as child workflows). */
  private async scaffold(route: Extract<TddRoute, { to: 'scaffold' }>): Promise<TddRoute> {
    this.state.counters.scaffoldRuns++;
    if (route.because !== 'start') this.notes.scaffold ??= `Scaffold runs again: ${route.because}`;
    const r = await this.call('scaffold');
    if (r.exit === 'NoDecision') return noDecision('scaffold', r);
    if (r.exit === 'InitWork') {
      this.refs.scaffold = r.exitRef;
      this.scaffolded = true;
      await this.handshake.startChildren(r);
    }
    return afterScaffold(signalOf<ScaffoldExit>(r));
  }

  /** TDDWriteTests: tests for the criteria not covered yet. */
  private async writeTests(route: Extract<TddRoute, { to: 'tddWriteTests' }>): Promise<TddRoute> {
    const { state } = this;
    if (route.because !== 'fork') this.notes.tddWriteTests ??= route.because;
    const r = await this.call('tddWriteTests', { coveredCriteria: state.memory.tdd.coveredCriteria });
    if (r.exit === 'NoDecision') return noDecision('tddWriteTests', r);
    if (r.exit === 'TestsReady') {
      this.refs.testsReady = r.exitRef;
      state.memory.tdd.pendingTests = r.envelope.testFiles ?? [];
      state.memory.tdd.coveredCriteria = [
        ...new Set([...state.memory.tdd.coveredCriteria, ...(r.envelope.pendingCriteria ?? [])]),
      ];
    }
    return afterWriteTests(signalOf<TDDWriteTestsExit>(r), routeCounters(this.state, this.settings));
  }

  /** ImplBarrier: waits until every child settled, or a child's request or a sibling's merge needs serving. */
  private async barrier(route: TddRoute): Promise<TddRoute> {
    const { state, handshake } = this;
    state.phase = 'barrier';
    this.publish();
    await condition(
      () =>
        barrierReady(true, state.children).ready || handshake.requests.length > 0 || handshake.siblingMerges.length > 0,
    );
    if (!barrierReady(true, state.children).ready) return route; // serve the request or rebase, then wait again
    this.refs.childMerges = state.children.filter((c) => c.status === 'merged' && c.mergeRef).map((c) => c.mergeRef!);
    const failed = state.children.filter((c) => c.status === 'failed');
    if (failed.length > 0)
      this.addressNote(
        'impl',
        `Child failures: ${failed.map((c) => `${c.id} (${c.error ?? 'failed'})`).join('; ')}. Their subsystems are not available.`,
      );
    // The seed's ImplBarrier hands Impl `attemptCount = 1` each time it opens.
    return { to: 'impl', attempt: 1, because: 'barrier' };
  }

  /** Impl: one attempt at making the tests pass. */
  private async impl(route: Extract<TddRoute, { to: 'impl' }>): Promise<TddRoute> {
    const { state } = this;
    state.counters.implAttempt = route.attempt;
    if (route.because !== 'barrier') this.notes.impl ??= route.because;
    const r = await this.call('impl', { attemptCount: route.attempt });
    if (r.exit === 'NoDecision') return noDecision('impl', r);
    state.memory.impl.attemptHistory.push({
      strategy: `attempt ${route.attempt}`,
      outcome: truncateText(r.exit === 'TestsPassed' ? 'passed' : `failed: ${r.envelope.message ?? r.exit}`, 200),
    });
    if (r.exit === 'TestsPassed') {
      this.refs.implResult = r.exitRef;
      this.implementationExists = true;
      state.memory.impl.passedTests = r.envelope.passedTests ?? [];
    }
    return afterImpl(signalOf<ImplExit>(r), routeCounters(this.state, this.settings));
  }

  /** TDDReviewImpl: the node's own review of its implementation. */
  private async review(): Promise<TddRoute> {
    const r = await this.call('tddReviewImpl');
    if (r.exit === 'NoDecision') return noDecision('tddReviewImpl', r);
    const route = afterReview(signalOf<TDDReviewImplExit>(r), routeCounters(this.state, this.settings));
    if (r.exit === 'Approved') this.refs.approval = r.exitRef;
    if (r.exit === 'MoreTests') {
      this.state.counters.reviewRounds++;
      this.refs.critiques = r.exitRef;
    }
    return route;
  }

  /** Merger: the root merges into the tree's target; a child asks its parent first, then tells it the outcome. */
  private async merger(route: TddRoute): Promise<TddRoute> {
    const { input, state, settings, rootTarget } = this;
    let target: TddNodeCallInput['merge'];
    if (rootTarget) {
      target = { parentNodeId: input.mergeInto, parentBranch: input.mergeInto, parentWorktree: rootTarget.worktree };
    } else {
      const answer = await this.handshake.askParent();
      if (answer === undefined) return route;
      if (!answer.granted) {
        state.counters.reviewRounds++;
        if (answer.critiquesRef) this.refs.critiques = answer.critiquesRef;
        return state.counters.reviewRounds > settings.maxReviewRounds
          ? {
              to: 'human',
              reason: 'stuck',
              message: `the parent's judge refused the merge ${state.counters.reviewRounds} times: ${answer.reason}`,
            }
          : { to: 'tddWriteTests', because: `the parent's judge refused the merge: ${answer.reason}` };
      }
      target = {
        parentNodeId: answer.parentNodeId,
        parentBranch: answer.parentBranch,
        parentWorktree: answer.parentWorktree,
      };
    }
    const r = await this.call('merger', { merge: target });
    if (!rootTarget) await this.handshake.reportMerge(r);
    if (r.exit === 'NoDecision') return noDecision('merger', r);
    if (r.exit === 'MergeComplete')
      state.merge = {
        mergeCommit: r.envelope.mergeCommit!,
        ref: r.exitRef,
        ...(r.exitBytes !== undefined ? { bytes: r.exitBytes } : {}),
      };
    return afterMerger(signalOf<MergerExit>(r), routeCounters(this.state, this.settings));
  }

  /** A human's turn: the answer is addressed to the step it resumes (Scaffold or Impl), however late that runs. */
  private async human(route: Extract<TddRoute, { to: 'human' }>): Promise<TddRoute> {
    const stage =
      route.reason === 'clarification' ? 'scaffold' : route.reason === 'review_rejected' ? 'tddReviewImpl' : 'impl';
    const answer = await this.reviews.wait(route.reason, route.message, stage);
    const next = afterHuman(route.reason, answer, { testsReady: this.refs.testsReady !== undefined });
    if (answer.kind === 'answer') this.state.counters.scaffoldRuns = 0;
    if (answer.kind === 'answer' && (next.to === 'scaffold' || next.to === 'impl'))
      this.addressNote(
        next.to,
        `${route.reason === 'clarification' ? 'Answer to your question' : 'Guidance from a human'}: ${answer.text}`,
      );
    return next;
  }

  /** The node's result at the graph's exit. */
  private exit(route: Extract<TddRoute, { to: 'exit' }>): TddNodeResult {
    const { input, state, branch } = this;
    return route.status === 'merged' && state.merge
      ? {
          nodePath: input.nodePath,
          specId: input.specId,
          status: 'merged',
          mergeCommit: state.merge.mergeCommit,
          mergeRef: state.merge.ref,
          ...(state.merge.bytes !== undefined ? { mergeBytes: state.merge.bytes } : {}),
          branch,
        }
      : { nodePath: input.nodePath, specId: input.specId, status: 'failed', branch, error: route.because };
  }

  /** One graph node's activity call, with the node's notes; its exit, usage and refusals recorded and told. */
  async call(node: TddNodeName, extra: Partial<TddNodeCallInput> = {}): Promise<TddNodeCallResult> {
    const { input, state, notes } = this;
    // Judging a child's merge is not this node's own tddReviewImpl step: its notes wait for that.
    const note = extra.judge === undefined ? notes[node] : undefined;
    state.phase = node;
    const callIndex = state.counters.calls[node] ?? 0;
    state.counters.calls[node] = callIndex + 1;
    this.publish();
    const result = await tddActivities[TDD_NODE_ACTIVITY]({
      node,
      treeId: input.treeId,
      nodePath: input.nodePath,
      specId: input.specId,
      contextRef: input.contextRef,
      repo: input.repo,
      worktree: this.worktree.worktree,
      branch: this.branch,
      settings: this.settings,
      readOnly: input.readOnly,
      ...(input.repliesRef ? { repliesRef: input.repliesRef } : {}),
      callIndex,
      replyIndex: state.counters.agentCalls[node] ?? 0,
      conversationId: this.conversationId,
      refs: { ...this.refs },
      baseCommit: this.baseCommit,
      implementationExists: this.implementationExists,
      ...(note !== undefined ? { note } : {}),
      ...extra,
    });
    if (note !== undefined) notes[node] = undefined;
    recordCall(state, node, result, (type, message, fields) => this.emit(type, message, fields));
    return result;
  }
}
