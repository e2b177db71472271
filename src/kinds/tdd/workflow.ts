/**
 * The `tddNode` workflow: one execution per Spec of a V3 TDD tree (seed 001). It walks the seed's graph —
 * Scaffold → Fork (TDDWriteTests ∥ ImplBarrier, children as child workflows) → Impl (self-loop, at most 5
 * attempts) → TDDReviewImpl → Merger, with Rebaser on a sibling's merge — performing what the pure routing
 * functions in `kinds/tdd/routes.ts` decide. Each graph node is one activity call (`kinds/tdd/activities.ts`);
 * what the agents read travels by reference (the seed's envelope pattern).
 *
 * Children merge into their parent's branch, in the parent's worktree, which only the parent may touch
 * while it works: a child asks (`tddMergeRequest`), the parent judges the child's diff against the criteria
 * it assigned (parent-as-judge, its TDDReviewImpl) at a moment its worktree is idle, then grants
 * (`tddMergeGrant`) and waits until the child's Merger is done (`tddMergeDone`), and tells the other running
 * children (`tddSiblingMerged`), which rebase before their next step.
 *
 * Humans: `ClarificationNeeded`, `Stuck` (also a `RequestRetry` at the last attempt, and the bounds on review
 * rounds and scaffold reruns) and a reviewer's `Reject` wait in the same review queue as stage reviews
 * (`treadle reviews`, the `resolveReview` update or the `review` signal): an approval with a note or an edit
 * is the answer (clarification → Scaffold again; guidance → Impl again), a rejection aborts.
 */
import {
  ApplicationFailure,
  CancellationScope,
  condition,
  isCancellation,
  getExternalWorkflowHandle,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  startChild,
  TemporalFailure,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
  type ChildWorkflowHandle,
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
  type ExitSignal,
  type HumanAnswer,
  type TddCounters,
  type TddRoute,
} from './routes';
import { checkReview } from '../../engine/review';
import { addTotals, callBatchOf } from '../../engine/usage';
import { TDD_NODE_ACTIVITY, TDD_WORKTREE_ACTIVITY } from '../../model/activity-types';
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
  MAX_IMPL_ATTEMPTS,
  type HumanReason,
  type TddChildState,
  type TddNodeCallInput,
  type TddNodeCallResult,
  type TddNodeInput,
  type TddNodeResult,
  type TddNodeState,
  type TddWorktreeInput,
  type TddWorktreeResult,
} from './shapes';
import { REVIEWS_MEMO_KEY, TreadlePendingReviews, TreadlePipeline, TreadleStatus } from '../../model/search-attributes';
import { STEP_HEARTBEAT_TIMEOUT, truncateText } from '../../model/limits';
import type { EventType, TreadleEvent, UsageTotals } from '../../model/shapes';
import type { StateQueryArgs } from '../../model/state';
import { describeFailure, eventPage, failureWithUsage, now, usageReported } from '../../workflows/common';
import { EventStream, Publications } from '../../workflows/publishing';
import {
  eventsQuery,
  mergeDoneSignal,
  mergeGrantSignal,
  mergeRequestSignal,
  resolveReviewUpdate,
  reviewSignal,
  siblingMergedSignal,
  tddStateQuery,
  type MergeDone,
  type MergeGrant,
  type MergeRequest,
  type SiblingMerged,
} from '../../workflows/messages';

const tdd = proxyActivities<{
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

/** The name under which the search attributes' last published value is kept. */
const ATTRIBUTES = 'attributes';

/** Refusals the Web UI's details show, the latest. */
const LATEST_REFUSALS_SHOWN = 3;

/** The listing's pipeline name for TDD nodes (`treadle reviews --pipeline tdd`). */
export const TDD_PIPELINE_NAME = 'tdd';

/** Runs one node of a TDD tree; see the module comment. */
export async function tddNode(input: TddNodeInput): Promise<TddNodeResult> {
  const info = workflowInfo();
  const branch = `tdd/${input.nodePath}`;
  const conversationId = `tdd:${input.treeId}:${input.nodePath}`;
  const settings = input.settings;
  const state: TddNodeState = {
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
  // Messages carry agents' text, so they are cut to the usual length.
  const events = new EventStream(state, info.workflowId, undefined, true);
  const emit = (type: EventType, message: string, fields?: Partial<TreadleEvent>): void =>
    events.emit(type, message, fields);

  // Messages. Registered before the first await so that none is dropped.
  let humanAnswer: HumanAnswer | undefined;
  const answerReview = (
    payload: unknown,
  ): { ok: true; stage: string; outcome: string; reviewer: string } | { ok: false; error: string } => {
    const checked = checkReview(asReviewState(state, info.workflowId), payload);
    if (!checked.ok) return checked;
    const outcome = checked.review.outcome;
    humanAnswer =
      outcome.kind === 'reject'
        ? { kind: 'abort', reason: outcome.reason }
        : {
            kind: 'answer',
            text:
              outcome.kind === 'approve_with_edits'
                ? typeof outcome.artefact === 'string'
                  ? outcome.artefact
                  : JSON.stringify(outcome.artefact)
                : (outcome.note ?? 'approved'),
          };
    state.pendingReviews = [];
    return { ok: true, stage: checked.review.stage, outcome: outcome.kind, reviewer: checked.review.reviewer };
  };
  setHandler(reviewSignal, (payload) => {
    const answered = answerReview(payload);
    if (!answered.ok) emit('ReviewInputRejected', answered.error);
  });
  setHandler(
    resolveReviewUpdate,
    (payload) => {
      const answered = answerReview(payload);
      if (!answered.ok) throw ApplicationFailure.nonRetryable(answered.error, 'InvalidReview');
      return {
        itemId: info.workflowId,
        stage: answered.stage,
        outcome: answered.outcome as 'approve' | 'reject' | 'approve_with_edits',
        reviewer: answered.reviewer,
      };
    },
    {
      validator: (payload) => {
        const checked = checkReview(asReviewState(state, info.workflowId), payload);
        if (!checked.ok) throw new Error(checked.error);
      },
    },
  );
  setHandler(tddStateQuery, (args?: StateQueryArgs) => ({ ...state, events: eventPage(state.events, args) }));
  setHandler(eventsQuery, (args?: StateQueryArgs) => ({
    status: state.status === 'merged' ? 'completed' : state.status,
    eventCount: state.eventCount,
    events: eventPage(state.events, args),
    pendingReviews: state.pendingReviews,
    ...(state.error ? { error: state.error } : {}),
  }));
  const mergeRequests: MergeRequest[] = [];
  setHandler(mergeRequestSignal, (request) => {
    if (!mergeRequests.some((r) => r.nodePath === request.nodePath)) mergeRequests.push(request);
  });
  let grant: MergeGrant | undefined;
  setHandler(mergeGrantSignal, (answer) => {
    grant = answer;
  });
  let mergeDone: MergeDone | undefined;
  setHandler(mergeDoneSignal, (done) => {
    mergeDone = done;
  });
  const siblingMerges: SiblingMerged[] = [];
  setHandler(siblingMergedSignal, (event) => {
    if (state.status === 'running' || state.status === 'waiting_review') siblingMerges.push(event);
  });

  // Each upsert is a command and a history event, so only changes are upserted.
  const published = new Publications();
  const publish = (): void => {
    const current = JSON.stringify([state.status, state.pendingReviews.map((r) => r.stage)]);
    const first = !published.has(ATTRIBUTES);
    if (published.changed(ATTRIBUTES, current)) {
      upsertSearchAttributes([
        ...(first ? [{ key: TreadlePipeline, value: TDD_PIPELINE_NAME }] : []),
        { key: TreadleStatus, value: state.status },
        {
          key: TreadlePendingReviews,
          value: state.pendingReviews.length > 0 ? state.pendingReviews.map((r) => r.stage) : null,
        },
      ]);
      upsertMemo({
        [REVIEWS_MEMO_KEY]:
          state.pendingReviews.length > 0
            ? { pipeline: TDD_PIPELINE_NAME, reviews: state.pendingReviews, omitted: 0 }
            : null,
      });
    }
    setCurrentDetails(renderDetails(state));
  };

  const counters = (): TddCounters => ({
    implAttempt: state.counters.implAttempt,
    maxImplAttempts: MAX_IMPL_ATTEMPTS,
    reviewRounds: state.counters.reviewRounds,
    maxReviewRounds: settings.maxReviewRounds,
    scaffoldRuns: state.counters.scaffoldRuns,
    maxScaffoldRuns: settings.maxScaffoldRuns,
  });

  /** `{ usage }`: the totals of this node's calls and its children's, or nothing when there were none. */
  const usageOfTree = (): { usage?: UsageTotals } => {
    const usage = addTotals(state.usage, ...state.children.map((c) => c.usage));
    return usage.calls > 0 ? { usage } : {};
  };

  try {
    emit('ItemStarted', `TDD node ${input.nodePath} started on ${branch} (depth ${input.depth})`);
    publish();
    const worktree = await tdd[TDD_WORKTREE_ACTIVITY]({ repo: input.repo, branch, base: input.base });
    state.worktree = worktree.worktree;
    const baseCommit = worktree.head;
    // The root merges into the tree's target branch, in a worktree of its own; children into their parent's.
    const rootTarget =
      input.parentWorkflowId === undefined
        ? await tdd[TDD_WORKTREE_ACTIVITY]({ repo: input.repo, branch: input.mergeInto, base: input.base })
        : undefined;

    // What earlier nodes produced, by reference.
    const refs: TddNodeCallInput['refs'] = {};
    // Notes (a human's answer, a route's reason, children's failures) are addressed to the graph node they are
    // for and reach that node's next call only, whatever runs first: rebases, merges judged, other nodes' calls.
    const notes: Partial<Record<TddNodeName, string>> = {};
    const addressNote = (node: TddNodeName, text: string): void => {
      notes[node] = notes[node] === undefined ? text : `${notes[node]}\n\n${text}`;
    };
    let scaffolded = false;
    let implementationExists = false;
    const childHandles = new Map<string, ChildWorkflowHandle<typeof tddNode>>();

    const call = async (node: TddNodeName, extra: Partial<TddNodeCallInput> = {}): Promise<TddNodeCallResult> => {
      // Judging a child's merge is not this node's own tddReviewImpl step: its notes wait for that.
      const note = extra.judge === undefined ? notes[node] : undefined;
      state.phase = node;
      const callIndex = state.counters.calls[node] ?? 0;
      state.counters.calls[node] = callIndex + 1;
      publish();
      const result = await tdd[TDD_NODE_ACTIVITY]({
        node,
        treeId: input.treeId,
        nodePath: input.nodePath,
        specId: input.specId,
        contextRef: input.contextRef,
        repo: input.repo,
        worktree: worktree.worktree,
        branch,
        settings,
        readOnly: input.readOnly,
        ...(input.repliesRef ? { repliesRef: input.repliesRef } : {}),
        callIndex,
        replyIndex: state.counters.agentCalls[node] ?? 0,
        conversationId,
        refs: { ...refs },
        baseCommit,
        implementationExists,
        ...(note !== undefined ? { note } : {}),
        ...extra,
      });
      if (note !== undefined) notes[node] = undefined;
      state.counters.agentCalls[node] = (state.counters.agentCalls[node] ?? 0) + result.agentCalls;
      const used = callBatchOf(result.calls)?.usage;
      if (used) state.usage = addTotals(state.usage, used);
      state.exits[node] = { exit: result.exit, ref: result.exitRef, summary: result.summary };
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
      return result;
    };

    /** A node that gave no valid decision is stuck: a human decides. */
    const noDecision = (node: TddNodeName, result: TddNodeCallResult): TddRoute => ({
      to: 'human',
      reason: 'stuck',
      message: `${node} gave no valid decision: ${result.envelope.message ?? result.summary}`,
    });

    const waitForHuman = async (reason: HumanReason, message: string, stage: string): Promise<HumanAnswer> => {
      state.phase = 'human';
      state.status = 'waiting_review';
      state.human = { reason, message: truncateText(message, 1_000) };
      const expiresAt = settings.humanTtlSeconds
        ? new Date(Date.now() + settings.humanTtlSeconds * 1000).toISOString()
        : undefined;
      state.pendingReviews = [
        {
          stage,
          reason: 'escalated',
          message: truncateText(`${reason}: ${message}`, 500),
          requestedAt: now(),
          attempt: state.counters.implAttempt,
          ...(expiresAt ? { expiresAt } : {}),
        },
      ];
      humanAnswer = undefined;
      emit('ReviewRequested', `${stage} waits for a human (${reason}): ${message}`, { stage });
      publish();
      const answered = settings.humanTtlSeconds
        ? await condition(() => humanAnswer !== undefined, settings.humanTtlSeconds * 1000)
        : await condition(() => humanAnswer !== undefined).then(() => true);
      const given = humanAnswer as HumanAnswer | undefined; // set by the handlers while we waited
      const answer: HumanAnswer = answered && given ? given : { kind: 'expired' };
      state.pendingReviews = [];
      state.human = undefined;
      state.status = 'running';
      emit(
        answer.kind === 'expired' ? 'ReviewExpired' : 'ReviewResolved',
        answer.kind === 'expired'
          ? `${stage}: nobody answered in time`
          : answer.kind === 'abort'
            ? `${stage}: aborted: ${answer.reason}`
            : `${stage}: answered`,
        { stage },
      );
      return answer;
    };

    /**
     * The parent's side of the merge handshake, run only while this node's own worktree is idle: judge the
     * first waiting child's diff, then let it merge and wait until it is done.
     */
    const serveMergeRequests = async (): Promise<void> => {
      while (mergeRequests.length > 0) {
        const request = mergeRequests.shift()!;
        const child = state.children.find((c) => c.id === request.specId);
        if (!child || child.status !== 'running') continue;
        emit('MergeRequested', `child ${request.nodePath} asks to merge`, {
          stage: 'merger',
          details: { child: request.nodePath },
        });
        const judged = await call('tddReviewImpl', {
          judge: { childNodePath: request.nodePath, childBranch: request.branch, childContextRef: request.contextRef },
          refs: { ...refs, implResult: request.implResultRef },
        });
        const handle = getExternalWorkflowHandle(request.workflowId);
        if (judged.exit !== 'Approved') {
          // Parent-as-judge: a contract failure sends the child back to its TDDWriteTests.
          await handle.signal(mergeGrantSignal, {
            granted: false,
            reason: judged.summary,
            critiquesRef: judged.exitRef,
          });
          continue;
        }
        mergeDone = undefined;
        await handle.signal(mergeGrantSignal, {
          granted: true,
          parentNodeId: input.nodePath,
          parentBranch: branch,
          parentWorktree: worktree.worktree,
        });
        emit('MergeGranted', `child ${request.nodePath} merges into ${branch}`, { stage: 'merger' });
        publish();
        await condition(
          () => (mergeDone !== undefined && mergeDone.nodePath === request.nodePath) || child.status !== 'running',
        );
        const done: MergeDone = mergeDone ?? {
          nodePath: request.nodePath,
          merged: false,
          summary: `child ${request.nodePath} ended while merging`,
        };
        mergeDone = undefined;
        if (done.usage) child.usage = done.usage;
        if (done.merged) {
          child.status = 'merged';
          child.mergeCommit = done.mergeCommit;
          child.mergeRef = done.mergeRef;
          emit('ChildSettled', `child ${request.nodePath} merged: ${done.summary}`, { stage: 'merger' });
          for (const other of state.children) {
            if (other.status !== 'running' || other.id === child.id) continue;
            await getExternalWorkflowHandle(other.workflowId).signal(siblingMergedSignal, {
              author: request.nodePath,
              impactLevel: done.impactLevel ?? 'Additive',
              mergeEventRef: done.changesRef ?? '',
              parentBranch: branch,
              newParentHead: done.mergeCommit ?? branch,
            });
          }
          // The others rebase onto this merge first and then ask again.
          mergeRequests.splice(0);
        }
      }
    };

    /** Children reported by their results too (a child that fails never asks to merge). */
    const watchChild = (child: TddChildState, handle: ChildWorkflowHandle<typeof tddNode>): void => {
      void handle.result().then(
        (result) => {
          if (result.usage) child.usage = result.usage;
          if (result.status === 'merged') {
            child.status = 'merged';
            child.mergeCommit ??= result.mergeCommit;
            child.mergeRef ??= result.mergeRef;
          } else {
            child.status = 'failed';
            child.error = result.error ?? 'failed';
            emit('ChildSettled', `child ${child.id} failed: ${child.error}`, { stage: 'impl' });
          }
        },
        (error: unknown) => {
          // A child that failed by an error reports its tree's calls with the failure (cancelled, it reports none).
          const used = usageReported(error);
          if (used) child.usage = used;
          child.status = 'failed';
          child.error = describeFailure(error);
          emit('ChildSettled', `child ${child.id} failed: ${child.error}`, { stage: 'impl' });
        },
      );
    };

    let route: TddRoute = { to: 'scaffold', because: 'start' };
    let lastRoute = '';
    let result: TddNodeResult | undefined;
    while (result === undefined) {
      await serveMergeRequests();
      // A sibling merged: rebase before the next step (the seed pauses Impl/TDD while rebasing).
      if (siblingMerges.length > 0 && route.to !== 'exit') {
        // Several merges since the last step: one rebase onto the newest head covers them all.
        const events = siblingMerges.splice(0);
        const event = events[events.length - 1]!;
        for (const e of events)
          emit('SiblingMerged', `sibling ${e.author} merged (${e.impactLevel}) at ${e.newParentHead.slice(0, 10)}`, {
            stage: 'rebaser',
          });
        const several =
          events.length > 1
            ? {
                note: `Siblings merged since your last step: ${events.map((e) => `${e.author} (${e.impactLevel})`).join(', ')}; the MergeEvent below is the latest.`,
              }
            : {};
        const rebased = await call('rebaser', {
          rebase: { parentBranch: event.parentBranch, newParentHead: event.newParentHead },
          refs: { ...refs, ...(event.mergeEventRef ? { mergeEvent: event.mergeEventRef } : {}) },
          ...several,
        });
        if (rebased.exit === 'NoDecision') route = noDecision('rebaser', rebased);
        else {
          const next = afterRebaser(signalOf<RebaserExit>(rebased), counters(), scaffolded);
          if (
            next.to !== 'tddWriteTests' ||
            route.to === 'tddWriteTests' ||
            route.to === 'barrier' ||
            route.to === 'impl' ||
            route.to === 'tddReviewImpl' ||
            route.to === 'merger'
          )
            route = next;
        }
        emit('NodeRouted', `rebaser → ${describeRoute(route)}`, { stage: 'rebaser' });
        continue;
      }
      switch (route.to) {
        case 'scaffold': {
          state.counters.scaffoldRuns++;
          if (route.because !== 'start') notes.scaffold ??= `Scaffold runs again: ${route.because}`;
          const r = await call('scaffold');
          if (r.exit === 'NoDecision') {
            route = noDecision('scaffold', r);
            break;
          }
          if (r.exit === 'InitWork') {
            refs.scaffold = r.exitRef;
            scaffolded = true;
            for (const spec of r.envelope.children ?? []) {
              if (state.children.some((c) => c.id === spec.id)) continue;
              const workflowId = `${info.workflowId}.${spec.id}`;
              const handle = await startChild(tddNode, {
                workflowId,
                args: [
                  {
                    treeId: input.treeId,
                    nodePath: `${input.nodePath}.${spec.id}`,
                    specId: spec.id,
                    contextRef: spec.contextRef,
                    repo: input.repo,
                    // From the scaffold commit, not the moving branch: the parent's own (red) tests are not the child's.
                    base: r.commit ?? branch,
                    mergeInto: branch,
                    depth: input.depth + 1,
                    settings,
                    readOnly: spec.readOnly,
                    ...(input.repliesRef ? { repliesRef: input.repliesRef } : {}),
                    parentWorkflowId: info.workflowId,
                  },
                ],
              });
              const child: TddChildState = { id: spec.id, workflowId, status: 'running' };
              state.children.push(child);
              childHandles.set(spec.id, handle);
              watchChild(child, handle);
              emit('ChildStarted', `child ${input.nodePath}.${spec.id} started (${workflowId})`, { stage: 'scaffold' });
            }
          }
          route = afterScaffold(signalOf<ScaffoldExit>(r));
          break;
        }
        case 'fork':
          // Fork: TDDWriteTests now; ImplBarrier is the wait below, children already run as child workflows.
          route = { to: 'tddWriteTests', because: 'fork' };
          break;
        case 'tddWriteTests': {
          if (route.because !== 'fork') notes.tddWriteTests ??= route.because;
          const r = await call('tddWriteTests', { coveredCriteria: state.memory.tdd.coveredCriteria });
          if (r.exit === 'NoDecision') {
            route = noDecision('tddWriteTests', r);
            break;
          }
          if (r.exit === 'TestsReady') {
            refs.testsReady = r.exitRef;
            state.memory.tdd.pendingTests = r.envelope.testFiles ?? [];
            state.memory.tdd.coveredCriteria = unique([
              ...state.memory.tdd.coveredCriteria,
              ...(r.envelope.pendingCriteria ?? []),
            ]);
          }
          route = afterWriteTests(signalOf<TDDWriteTestsExit>(r), counters());
          break;
        }
        case 'barrier': {
          state.phase = 'barrier';
          publish();
          await condition(
            () => barrierReady(true, state.children).ready || mergeRequests.length > 0 || siblingMerges.length > 0,
          );
          if (!barrierReady(true, state.children).ready) break; // serve the request or rebase, then wait again
          refs.childMerges = state.children.filter((c) => c.status === 'merged' && c.mergeRef).map((c) => c.mergeRef!);
          const failed = state.children.filter((c) => c.status === 'failed');
          if (failed.length > 0)
            addressNote(
              'impl',
              `Child failures: ${failed.map((c) => `${c.id} (${c.error ?? 'failed'})`).join('; ')}. Their subsystems are not available.`,
            );
          // The seed's ImplBarrier hands Impl `attemptCount = 1` each time it opens.
          route = { to: 'impl', attempt: 1, because: 'barrier' };
          break;
        }
        case 'impl': {
          state.counters.implAttempt = route.attempt;
          if (route.because !== 'barrier') notes.impl ??= route.because;
          const r = await call('impl', { attemptCount: route.attempt });
          if (r.exit === 'NoDecision') {
            route = noDecision('impl', r);
            break;
          }
          state.memory.impl.attemptHistory.push({
            strategy: `attempt ${route.attempt}`,
            outcome: truncateText(r.exit === 'TestsPassed' ? 'passed' : `failed: ${r.envelope.message ?? r.exit}`, 200),
          });
          if (r.exit === 'TestsPassed') {
            refs.implResult = r.exitRef;
            implementationExists = true;
            state.memory.impl.passedTests = r.envelope.passedTests ?? [];
          }
          route = afterImpl(signalOf<ImplExit>(r), counters());
          break;
        }
        case 'tddReviewImpl': {
          const r = await call('tddReviewImpl');
          if (r.exit === 'NoDecision') {
            route = noDecision('tddReviewImpl', r);
            break;
          }
          route = afterReview(signalOf<TDDReviewImplExit>(r), counters());
          if (r.exit === 'Approved') refs.approval = r.exitRef;
          if (r.exit === 'MoreTests') {
            state.counters.reviewRounds++;
            refs.critiques = r.exitRef;
          }
          break;
        }
        case 'merger': {
          let target: TddNodeCallInput['merge'];
          if (rootTarget) {
            target = {
              parentNodeId: input.mergeInto,
              parentBranch: input.mergeInto,
              parentWorktree: rootTarget.worktree,
            };
          } else {
            // Ask the parent; meanwhile a sibling's merge may arrive and is rebased onto first.
            grant = undefined;
            await getExternalWorkflowHandle(input.parentWorkflowId!).signal(mergeRequestSignal, {
              nodePath: input.nodePath,
              workflowId: info.workflowId,
              specId: input.specId,
              branch,
              implResultRef: refs.implResult!,
              contextRef: input.contextRef,
            });
            state.phase = 'merger';
            publish();
            // A sibling that merges first makes this node rebase (and ask again) instead: its parent drops the request.
            await condition(() => grant !== undefined || siblingMerges.length > 0);
            const answer = grant as MergeGrant | undefined; // set by the handler while we waited
            if (answer === undefined) break;
            grant = undefined;
            if (!answer.granted) {
              state.counters.reviewRounds++;
              if (answer.critiquesRef) refs.critiques = answer.critiquesRef;
              route =
                state.counters.reviewRounds > settings.maxReviewRounds
                  ? {
                      to: 'human',
                      reason: 'stuck',
                      message: `the parent's judge refused the merge ${state.counters.reviewRounds} times: ${answer.reason}`,
                    }
                  : { to: 'tddWriteTests', because: `the parent's judge refused the merge: ${answer.reason}` };
              break;
            }
            target = {
              parentNodeId: answer.parentNodeId,
              parentBranch: answer.parentBranch,
              parentWorktree: answer.parentWorktree,
            };
          }
          const r = await call('merger', { merge: target });
          if (!rootTarget) {
            await getExternalWorkflowHandle(input.parentWorkflowId!).signal(mergeDoneSignal, {
              nodePath: input.nodePath,
              merged: r.exit === 'MergeComplete',
              ...(r.envelope.mergeCommit ? { mergeCommit: r.envelope.mergeCommit, mergeRef: r.exitRef } : {}),
              ...(r.envelope.impactLevel ? { impactLevel: r.envelope.impactLevel } : {}),
              ...(r.envelope.changesRef ? { changesRef: r.envelope.changesRef } : {}),
              summary: r.summary,
              ...usageOfTree(),
            });
          }
          if (r.exit === 'NoDecision') {
            route = noDecision('merger', r);
            break;
          }
          if (r.exit === 'MergeComplete')
            state.merge = {
              mergeCommit: r.envelope.mergeCommit!,
              ref: r.exitRef,
              ...(r.exitBytes !== undefined ? { bytes: r.exitBytes } : {}),
            };
          route = afterMerger(signalOf<MergerExit>(r), counters());
          break;
        }
        case 'human': {
          const stage =
            route.reason === 'clarification'
              ? 'scaffold'
              : route.reason === 'review_rejected'
                ? 'tddReviewImpl'
                : 'impl';
          const answer = await waitForHuman(route.reason, route.message, stage);
          const next = afterHuman(route.reason, answer, { testsReady: refs.testsReady !== undefined });
          if (answer.kind === 'answer') state.counters.scaffoldRuns = 0;
          // The answer is for the step it resumes (Scaffold or Impl), however late that step runs.
          if (answer.kind === 'answer' && (next.to === 'scaffold' || next.to === 'impl'))
            addressNote(
              next.to,
              `${route.reason === 'clarification' ? 'Answer to your question' : 'Guidance from a human'}: ${answer.text}`,
            );
          route = next;
          break;
        }
        case 'exit':
          result =
            route.status === 'merged' && state.merge
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
          break;
      }
      // One event per change of route (a barrier that only served a child's merge request is no news).
      const described = describeRoute(route);
      if (result === undefined && described !== lastRoute) emit('NodeRouted', `→ ${described}`, { stage: state.phase });
      lastRoute = described;
    }

    // A parent that failed stops its running children (they could only wait for a merge it will never take);
    // either way it ends only once every child has settled, so none is left asking it to merge.
    if (result.status === 'failed') {
      for (const child of state.children)
        if (child.status === 'running') await getExternalWorkflowHandle(child.workflowId).cancel();
    }
    while (state.children.some((c) => c.status === 'running')) {
      await condition(() => mergeRequests.length > 0 || !state.children.some((c) => c.status === 'running'));
      for (const request of mergeRequests.splice(0)) {
        // A child cancelled above may have asked just before its cancellation and ended since: the signal then
        // finds no workflow, and there is nobody left to answer (the parent must not fail for it).
        await getExternalWorkflowHandle(request.workflowId)
          .signal(mergeGrantSignal, {
            granted: false,
            reason: `the parent ${input.nodePath} has finished (${result.status})`,
          })
          .catch((error: unknown) => {
            if (isCancellation(error)) throw error;
          });
      }
    }
    // Every child has settled: the tree's calls are all counted (a child cancelled by a failed parent reports none).
    Object.assign(result, usageOfTree());
    state.status = result.status;
    state.phase = 'done';
    if (result.error) state.error = result.error;
    state.completedAt = now();
    emit(
      result.status === 'merged' ? 'ItemCompleted' : 'ItemFailed',
      result.status === 'merged'
        ? `${input.nodePath} merged as ${result.mergeCommit?.slice(0, 10)}`
        : `${input.nodePath} failed: ${result.error}`,
    );
    publish();
    return result;
  } catch (error) {
    // A node that cannot go on (its worker refuses the repository or the test command, an activity failed for
    // good, the node was cancelled) still ends where users look: failed, with the event and its status
    // published; its running children are stopped, as when it fails by the graph.
    state.status = 'failed';
    state.phase = 'done';
    state.pendingReviews = [];
    state.error = isCancellation(error) ? 'cancelled' : describeFailure(error);
    // The calls of the step that failed (in its failure, or on its last heartbeat when its worker died).
    const used = isCancellation(error) ? undefined : usageReported(error);
    if (used) state.usage = addTotals(state.usage, used);
    state.completedAt = now();
    emit('ItemFailed', `${input.nodePath} failed: ${state.error}`);
    await CancellationScope.nonCancellable(async () => {
      publish();
      for (const child of state.children) {
        // A child that ended meanwhile cannot be cancelled: nothing left to stop.
        if (child.status === 'running')
          await getExternalWorkflowHandle(child.workflowId)
            .cancel()
            .catch(() => undefined);
      }
    });
    // A cancellation stays one (Temporal keeps no details with it, so its calls go uncounted), and an error
    // that is no Temporal failure (a bug in workflow code) fails the workflow task, which Temporal retries
    // until a fixed worker runs it. Any other error fails the node with the tree's calls so far in its
    // details, which the parent node and the work item count (usage, token budget); the message is the
    // error's own, as before.
    if (isCancellation(error) || !(error instanceof TemporalFailure)) throw error;
    throw failureWithUsage(state.error, 'TddNodeFailed', usageOfTree().usage, error);
  }
}

/** A call's result as routing reads it: the exit's name and the call's one-line summary. */
function signalOf<E extends { exit: string }>(result: TddNodeCallResult): ExitSignal<E> {
  return { exit: result.exit as E['exit'], detail: result.envelope.message ?? result.summary };
}

function describeRoute(route: TddRoute): string {
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
 * What `checkReview` reads, as a work item has it: the node's workflow id, and every stage a human may
 * answer for, waiting or not, so that a review of a node that is not waiting says what the node is doing.
 */
function asReviewState(state: TddNodeState, workflowId: string): Parameters<typeof checkReview>[0] {
  const stages = Object.create(null) as Record<string, { status: string; attempts: unknown[] }>;
  const doing =
    state.status === 'running' ? `running ${state.phase}` : state.status === 'waiting_review' ? 'idle' : state.status;
  for (const stage of HUMAN_STAGES) stages[stage] = { status: doing, attempts: [] };
  for (const review of state.pendingReviews) stages[review.stage] = { status: 'waiting_review', attempts: [] };
  return {
    ...state,
    id: `${workflowId} (TDD node ${state.nodePath})`,
    stages,
    pendingReviews: state.pendingReviews,
  } as unknown as Parameters<typeof checkReview>[0];
}

function renderDetails(state: TddNodeState): string {
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

function unique(items: string[]): string[] {
  return [...new Set(items)];
}
