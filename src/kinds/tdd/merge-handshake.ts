/**
 * A TDD node's children (started from its Scaffold, watched for their results) and its merge handshake with
 * its parent and its children. Children merge into their parent's branch, in the parent's worktree, which
 * only the parent may touch while it works: a child asks (`tddMergeRequest`), the parent judges the child's
 * diff at a moment its worktree is idle, grants (`tddMergeGrant`), waits until the child's Merger is done
 * (`tddMergeDone`), and tells the other running children (`tddSiblingMerged`), which rebase before their
 * next step.
 */
import {
  condition,
  startChild,
  getExternalWorkflowHandle,
  isCancellation,
  setHandler,
  type ApplicationFailure,
  type ChildWorkflowHandle,
} from '@temporalio/workflow';
import { describeFailure, failureCarrying, resultOfFailure, usageReported } from '../../workflow-kit/common';
import {
  mergeDoneSignal,
  mergeGrantSignal,
  mergeRequestSignal,
  siblingMergedSignal,
  type MergeDone,
  type MergeGrant,
  type MergeRequest,
  type SiblingMerged,
} from './messages';
import type { EventType, TreadleEvent, UsageTotals } from '../../model/shapes';
import {
  TDD_TREE_FAILED,
  type TddChildState,
  type TddNodeCallInput,
  type TddNodeCallResult,
  type TddNodeInput,
  type TddNodeName,
  type TddNodeResult,
  type TddNodeState,
  type TddWorktreeResult,
} from './shapes';

/** How a flagged node that did not merge fails its workflow; its parent's {@link MergeHandshake.watchChild} reads it back. */
export function treeFailure(result: TddNodeResult): ApplicationFailure {
  return failureCarrying(TDD_TREE_FAILED, `${result.nodePath} failed: ${result.error ?? 'no merge'}`, result);
}

/** The workflow type of `tddNode`, by name: this file must not import the workflow that imports it. */
const TDD_NODE_WORKFLOW = 'tddNode';

/** The signature of the `tddNode` workflow (`workflow.ts`), which starts its children through this file. */
type TddNodeWorkflow = (input: TddNodeInput) => Promise<TddNodeResult>;

/**
 * What the handshake needs of its node (`TddNodeRun` is one): declared here so that this file does not
 * import the run that imports it.
 */
export interface MergingNode {
  readonly info: { workflowId: string };
  readonly input: TddNodeInput;
  readonly state: TddNodeState;
  readonly settings: TddNodeInput['settings'];
  readonly branch: string;
  readonly worktree: TddWorktreeResult;
  readonly refs: TddNodeCallInput['refs'];
  emit(type: EventType, message: string, fields?: Partial<TreadleEvent>): void;
  publish(): void;
  call(node: TddNodeName, extra?: Partial<TddNodeCallInput>): Promise<TddNodeCallResult>;
  usageOfTree(): { usage?: UsageTotals };
}

/** One node's side of the handshake, both as a parent (serving its children) and as a child (asking its parent). */
export class MergeHandshake {
  /** Children waiting to merge, one request each, in the order they asked. */
  readonly requests: MergeRequest[] = [];
  /** Siblings' merges not rebased onto yet. */
  readonly siblingMerges: SiblingMerged[] = [];
  private grant: MergeGrant | undefined;
  private mergeDone: MergeDone | undefined;

  constructor(private readonly node: MergingNode) {}

  /** The handshake's signals; a signal since each side only informs the other and waits in its own time. */
  registerHandlers(): void {
    const { requests, siblingMerges, node } = this;
    setHandler(mergeRequestSignal, (request) => {
      if (!requests.some((r) => r.nodePath === request.nodePath)) requests.push(request);
    });
    setHandler(mergeGrantSignal, (answer) => {
      this.grant = answer;
    });
    setHandler(mergeDoneSignal, (done) => {
      this.mergeDone = done;
    });
    setHandler(siblingMergedSignal, (event) => {
      if (node.state.status === 'running' || node.state.status === 'waiting_review') siblingMerges.push(event);
    });
  }

  /**
   * The parent's side, run only while this node's own worktree is idle: judge the first waiting child's
   * diff (parent-as-judge, its TDDReviewImpl), then let it merge and wait until it is done.
   */
  async serveRequests(): Promise<void> {
    const { node, requests } = this;
    const { state } = node;
    while (requests.length > 0) {
      const request = requests.shift()!;
      const child = state.children.find((c) => c.id === request.specId);
      if (!child || child.status !== 'running') continue;
      node.emit('MergeRequested', `child ${request.nodePath} asks to merge`, {
        stage: 'merger',
        details: { child: request.nodePath },
      });
      const judged = await node.call('tddReviewImpl', {
        judge: { childNodePath: request.nodePath, childBranch: request.branch, childContextRef: request.contextRef },
        refs: { ...node.refs, implResult: request.implResultRef },
      });
      const handle = getExternalWorkflowHandle(request.workflowId);
      if (judged.exit !== 'Approved') {
        // Parent-as-judge: a contract failure sends the child back to its TDDWriteTests.
        await handle.signal(mergeGrantSignal, { granted: false, reason: judged.summary, critiquesRef: judged.exitRef });
        continue;
      }
      this.mergeDone = undefined;
      await handle.signal(mergeGrantSignal, {
        granted: true,
        parentNodeId: node.input.nodePath,
        parentBranch: node.branch,
        parentWorktree: node.worktree.worktree,
      });
      node.emit('MergeGranted', `child ${request.nodePath} merges into ${node.branch}`, { stage: 'merger' });
      node.publish();
      await condition(
        () =>
          (this.mergeDone !== undefined && this.mergeDone.nodePath === request.nodePath) || child.status !== 'running',
      );
      const done: MergeDone = this.mergeDone ?? {
        nodePath: request.nodePath,
        merged: false,
        summary: `child ${request.nodePath} ended while merging`,
      };
      this.mergeDone = undefined;
      if (done.usage) child.usage = done.usage;
      if (done.merged) await this.childMerged(child, request, done);
    }
  }

  /** A child merged: the others rebase onto this merge first and then ask again. */
  private async childMerged(child: TddChildState, request: MergeRequest, done: MergeDone): Promise<void> {
    const { node } = this;
    child.status = 'merged';
    child.mergeCommit = done.mergeCommit;
    child.mergeRef = done.mergeRef;
    node.emit('ChildSettled', `child ${request.nodePath} merged: ${done.summary}`, { stage: 'merger' });
    for (const other of node.state.children) {
      if (other.status !== 'running' || other.id === child.id) continue;
      await getExternalWorkflowHandle(other.workflowId).signal(siblingMergedSignal, {
        author: request.nodePath,
        impactLevel: done.impactLevel ?? 'Additive',
        mergeEventRef: done.changesRef ?? '',
        parentBranch: node.branch,
        newParentHead: done.mergeCommit ?? node.branch,
      });
    }
    this.requests.splice(0);
  }

  /** Starts the children an `InitWork` names that are not running yet, each watched for its result. */
  async startChildren(r: TddNodeCallResult): Promise<void> {
    const { node } = this;
    const { input, state, info, branch, settings } = node;
    for (const spec of r.envelope.children ?? []) {
      if (state.children.some((c) => c.id === spec.id)) continue;
      const workflowId = `${info.workflowId}.${spec.id}`;
      const handle = await startChild<TddNodeWorkflow>(TDD_NODE_WORKFLOW, {
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
            ...(input.failAsWorkflow ? { failAsWorkflow: true } : {}),
            ...(input.itemId !== undefined ? { itemId: input.itemId } : {}),
            ...(input.announce !== undefined ? { announce: input.announce } : {}),
          },
        ],
      });
      const child: TddChildState = { id: spec.id, workflowId, status: 'running' };
      state.children.push(child);
      this.watchChild(child, handle);
      node.emit('ChildStarted', `child ${input.nodePath}.${spec.id} started (${workflowId})`, { stage: 'scaffold' });
    }
  }

  /** Children reported by their results too (a child that fails never asks to merge). */
  watchChild(child: TddChildState, handle: ChildWorkflowHandle<TddNodeWorkflow>): void {
    const { node } = this;
    const settled = (result: TddNodeResult): void => {
      if (result.usage) child.usage = result.usage;
      if (result.status === 'merged') {
        child.status = 'merged';
        child.mergeCommit ??= result.mergeCommit;
        child.mergeRef ??= result.mergeRef;
      } else {
        child.status = 'failed';
        child.error = result.error ?? 'failed';
        node.emit('ChildSettled', `child ${child.id} failed: ${child.error}`, { stage: 'impl' });
      }
    };
    void handle.result().then(settled, (error: unknown) => {
      // A flagged child that did not merge fails with its result (engine 6's trees): settled as a returned one.
      const failed = resultOfFailure<TddNodeResult>(error, TDD_TREE_FAILED);
      if (failed !== undefined) return settled(failed);
      // A child that failed by an error reports its tree's calls with the failure (cancelled, it reports none).
      const used = usageReported(error);
      if (used) child.usage = used;
      child.status = 'failed';
      child.error = describeFailure(error);
      node.emit('ChildSettled', `child ${child.id} failed: ${child.error}`, { stage: 'impl' });
    });
  }

  /**
   * The child's side: asks the parent to merge and waits for its answer; undefined when a sibling merged
   * first, which makes this node rebase (and ask again) instead: its parent drops the request.
   */
  async askParent(): Promise<MergeGrant | undefined> {
    const { node } = this;
    this.grant = undefined;
    await getExternalWorkflowHandle(node.input.parentWorkflowId!).signal(mergeRequestSignal, {
      nodePath: node.input.nodePath,
      workflowId: node.info.workflowId,
      specId: node.input.specId,
      branch: node.branch,
      implResultRef: node.refs.implResult!,
      contextRef: node.input.contextRef,
    });
    node.state.phase = 'merger';
    node.publish();
    await condition(() => this.grant !== undefined || this.siblingMerges.length > 0);
    const answer = this.grant as MergeGrant | undefined; // set by the handler while we waited
    if (answer === undefined) return undefined;
    this.grant = undefined;
    return answer;
  }

  /** The child's side: tells the parent how its Merger went, with the calls of this node's tree. */
  async reportMerge(r: TddNodeCallResult): Promise<void> {
    const { node } = this;
    await getExternalWorkflowHandle(node.input.parentWorkflowId!).signal(mergeDoneSignal, {
      nodePath: node.input.nodePath,
      merged: r.exit === 'MergeComplete',
      ...(r.envelope.mergeCommit ? { mergeCommit: r.envelope.mergeCommit, mergeRef: r.exitRef } : {}),
      ...(r.envelope.impactLevel ? { impactLevel: r.envelope.impactLevel } : {}),
      ...(r.envelope.changesRef ? { changesRef: r.envelope.changesRef } : {}),
      summary: r.summary,
      ...node.usageOfTree(),
    });
  }

  /**
   * At the node's end: a parent that failed stops its running children (they could only wait for a merge it
   * will never take); either way it ends only once every child has settled, so none is left asking it to merge.
   */
  async settleChildren(result: TddNodeResult): Promise<void> {
    const { node, requests } = this;
    const { children } = node.state;
    if (result.status === 'failed') {
      for (const child of children)
        if (child.status === 'running') await getExternalWorkflowHandle(child.workflowId).cancel();
    }
    while (children.some((c) => c.status === 'running')) {
      await condition(() => requests.length > 0 || !children.some((c) => c.status === 'running'));
      for (const request of requests.splice(0)) {
        // A child cancelled above may have asked just before its cancellation and ended since: the signal then
        // finds no workflow, and there is nobody left to answer (the parent must not fail for it).
        await getExternalWorkflowHandle(request.workflowId)
          .signal(mergeGrantSignal, {
            granted: false,
            reason: `the parent ${node.input.nodePath} has finished (${result.status})`,
          })
          .catch((error: unknown) => {
            if (isCancellation(error)) throw error;
          });
      }
    }
  }
}
