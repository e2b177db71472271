/**
 * Inputs, results and state of the `tddNode` workflow and its activities: the seed's envelope pattern. What
 * the workflow routes on is small and travels inline; what agents read (the spec, the scaffold, test
 * output, diffs, each exit in full) lives in the blob store and travels as `sha256:` references.
 */
import type { TreadleEvent, UsageTotals } from '../../model/shapes';
import type { CallBatch, PendingReview } from '../../model/state';

// ---------------------------------------------------------------------------------------------------------
// The seed's shared types the workflow routes on, zod-free (spec.ts's schemas parse to exactly these)

/** The graph's agent nodes (Fork and ImplBarrier are workflow code, not calls). */
export const TDD_NODES = ['scaffold', 'tddWriteTests', 'impl', 'tddReviewImpl', 'merger', 'rebaser'] as const;
export type TddNodeName = (typeof TDD_NODES)[number];

/** The seed's `ImpactLevel` of a merge. */
export const IMPACT_LEVELS = ['Trivial', 'Additive', 'Breaking'] as const;
export type ImpactLevel = (typeof IMPACT_LEVELS)[number];

/** Every node's exits by name (spec.ts checks at compile time that its schemas parse exactly these). */
export type ExitName =
  | 'InitWork'
  | 'ClarificationNeeded'
  | 'TestsReady'
  | 'InvalidScaffold'
  | 'Approved'
  | 'MoreTests'
  | 'Reject'
  | 'TestsPassed'
  | 'RequestRetry'
  | 'BlockedDependency'
  | 'SpecAmbiguity'
  | 'Stuck'
  | 'MergeComplete'
  | 'MergeRejected'
  | 'RebaseClean'
  | 'RebaseAdapted'
  | 'RebaseConflict';

/** The seed's `Spec` (`Maybe X` is an optional field that may also be null). */
export interface Spec {
  id: string;
  description: string;
  acceptanceCriteria: { id: string; text: string }[];
  targetPath: string;
  testPath: string;
  complexityConstraints?: { time?: string | null; space?: string | null } | null;
}

/** What a parent gives a child besides its spec. */
export interface ParentContext {
  interface: string;
  assignedCriteria: string;
}

/** Treadle's settings for a tree (`tdd:` in a spec file), defaults applied; `TddSettingsSchema` documents each. */
export interface TddSettings {
  testCommand: string[];
  testTimeoutSeconds: number;
  agent?: string;
  model?: string;
  nudgeTimeoutSeconds: number;
  humanTtlSeconds?: number;
  maxDepth: number;
  maxChildren: number;
  maxReviewRounds: number;
  maxScaffoldRuns: number;
  maxInvalidReplies: number;
  baseBranch?: string;
  targetBranch?: string;
}

/** The seed's retry protocol: attempts per Impl invocation (here, not in spec.ts, which loads zod: workflows import it). */
export const MAX_IMPL_ATTEMPTS = 5;

/** Refusals one node call reports at most (the rest are counted), each cut to {@link MAX_REFUSAL_CHARS}. */
export const MAX_REFUSALS_PER_CALL = 5;
export const MAX_REFUSAL_CHARS = 300;

/**
 * What Treadle refused the agent during one node call — a path outside the worktree or in .git, a read-only
 * file, children past the tree's limits — for the node's events and the audit: how many, and the first few.
 */
export interface TddRefusals {
  count: number;
  /** At most {@link MAX_REFUSALS_PER_CALL}, each at most {@link MAX_REFUSAL_CHARS} characters. */
  texts: string[];
}

/** The stage implementation name of a TDD tree inside an ordinary pipeline (`run: tdd`). */
export const TDD_STAGE = 'tdd';

/** Why a node waits for a human. */
export type HumanReason = 'clarification' | 'stuck' | 'review_rejected';

/** Input of one `tddNode` workflow: one Spec of the tree. */
export interface TddNodeInput {
  /** The root node's workflow id; every node of the tree shares it. */
  treeId: string;
  /** The spec ids from the root to this node, joined with `.` (e.g. `textkit.tokenizer`). */
  nodePath: string;
  specId: string;
  /** `{ spec, parentContext }` in the blob store ({@link NodeContext}). */
  contextRef: string;
  /** The repository, as a path on the workers that serve this tree's task queue. */
  repo: string;
  /** Branch or commit this node's branch starts from: the parent's branch, or the tree's base branch. */
  base: string;
  /** Where this node's work is merged: the parent's branch, or the tree's target branch for the root. */
  mergeInto: string;
  /** 0 for the root. */
  depth: number;
  settings: TddSettings;
  /** Paths this node must not write (the parent's interface files). */
  readOnly: string[];
  /** Scripted agent replies (`{ "<spec id>.<node>": [reply, ...] }`) in the blob store, if any. */
  repliesRef?: string;
  /** The parent node's workflow id; absent for the root. */
  parentWorkflowId?: string;
  /**
   * Set by starters that expect a failed node to fail its workflow ({@link TDD_TREE_FAILED}, details: its
   * result): the client, engine-6 work items, and flagged parents for their children. Absent: it returns.
   */
  failAsWorkflow?: boolean;
  /** The work item whose `tdd` stage started the tree (engine 7), for listings; absent for `treadle tdd` trees. */
  itemId?: string;
  /**
   * Set when that work item announces (engine 8 with a notifications file): the tree's human steps are announced
   * to webhooks under the item's pipeline (`decision_owed`, then `decided`). Passed to children.
   */
  announce?: { pipeline: string };
}

/** The failure type a flagged TDD node that did not merge ends with; its first detail is its TddNodeResult. */
export const TDD_TREE_FAILED = 'TddTreeFailed';

/** What the blob store holds for a node: its spec and what its parent gave it. */
export interface NodeContext {
  spec: Spec;
  parentContext: ParentContext | null;
}

/** The work of one graph node: what a node call gets besides the node's own inputs. */
export interface TddNodeCallInput {
  node: TddNodeName;
  treeId: string;
  nodePath: string;
  specId: string;
  contextRef: string;
  repo: string;
  worktree: string;
  branch: string;
  settings: TddSettings;
  readOnly: string[];
  repliesRef?: string;
  /** How many times this node was called before in this workflow (picks the scripted reply, names commits). */
  callIndex: number;
  /** Agent calls this node made before in this workflow, re-prompts included (scripted replies are taken in order). */
  replyIndex?: number;
  /** Impl's attempt (1..5), kept by the workflow. */
  attemptCount?: number;
  /** Shared by TDDWriteTests, Impl and TDDReviewImpl (the seed's threaded memory). */
  conversationId: string;
  /** Refs to earlier exits this node reads (`InitWork`, `TestsReady`, `TestsPassed`, `Approved`, MoreTests). */
  refs: {
    scaffold?: string;
    testsReady?: string;
    implResult?: string;
    approval?: string;
    critiques?: string;
    childMerges?: string[];
    mergeEvent?: string;
  };
  /** TDDMem's covered criteria, for the TDDWriteTests template. */
  coveredCriteria?: string[];
  /** Why this node runs again (the route's reason), or a human's answer; shown to the agent. */
  note?: string;
  /** The commit the node's work started from (scaffold diffs are taken against it). */
  baseCommit?: string;
  /** Merger: the parent's node info and where to merge. */
  merge?: { parentNodeId: string; parentBranch: string; parentWorktree: string };
  /** Rebaser: the parent branch and its new head. */
  rebase?: { parentBranch: string; newParentHead: string };
  /** TDDReviewImpl as the parent's judge of a child's merge: the child's branch and spec (its assigned criteria). */
  judge?: { childNodePath: string; childBranch: string; childContextRef: string };
  /** True after the first MoreTests round: tests may pass already, so "red" is not required. */
  implementationExists?: boolean;
}

/** What a node call returns: the exit's name, its full JSON by reference, and what routing needs inline. */
export interface TddNodeCallResult {
  /** The exit, or `NoDecision` when the agent gave no valid decision after the re-prompts allowed. */
  exit: ExitName | 'NoDecision';
  /** The whole exit (with the real commit hashes) in the blob store, and its size. */
  exitRef: string;
  exitBytes?: number;
  /** One line for events and the Web UI. */
  summary: string;
  /** The commit the call made or found, if any. */
  commit?: string;
  /** Small routing fields (see each node in kinds/tdd/worker/exit-checks.ts). */
  envelope: TddEnvelope;
  /** The test run this call made, summarised; the output is in the blob store. */
  testRun?: { passed: boolean; summary: string; outputRef: string };
  /**
   * After a call with a commit: `git diff <baseCommit>..HEAD` of the node's branch in the blob store (text/x-diff,
   * cut at 2 MB), for the person judging the node. Absent in results recorded before it was stored.
   */
  diffRef?: string;
  /** The model calls this call made: totals, and the records inline or by reference (absent: none). */
  calls?: CallBatch;
  /** Re-prompts: the seed's reminder after no decision, feedback after a malformed reply. */
  nudged: boolean;
  invalidReplies: number;
  /** Agent calls this call made (the first, re-prompts and the reminder). */
  agentCalls: number;
  /** What was refused to the agent in this call, when anything was. */
  refusals?: TddRefusals;
}

/** The inline part of an exit: only what the workflow routes on or shows. */
export interface TddEnvelope {
  /** InitWork: children to start, their context already stored. */
  children?: { id: string; contextRef: string; readOnly: string[] }[];
  /** InitWork's problems with child specs (depth, count) are fed back before a result is returned. */
  interfaceFile?: string;
  testFiles?: string[];
  pendingCriteria?: string[];
  passedTests?: string[];
  failingTests?: string[];
  /** MergeComplete: what the parent broadcasts. */
  mergeCommit?: string;
  impactLevel?: ImpactLevel;
  changesRef?: string;
  /** Counts that make the exit readable without fetching it. */
  critiques?: number;
  additionalTests?: number;
  /** Human-facing text (clarification question, Stuck diagnosis, review rejection). */
  message?: string;
}

/** A child as its parent tracks it. */
export interface TddChildState {
  id: string;
  workflowId: string;
  status: 'running' | 'merged' | 'failed';
  mergeCommit?: string;
  /** MergeComplete in the blob store (what Impl reads as childMerges). */
  mergeRef?: string;
  error?: string;
  /** The totals of the model calls of the child's tree, as its merge or its result reported them. */
  usage?: UsageTotals;
}

/** Phases the Web UI and `status` show: the graph node the workflow is in. */
export type TddPhase =
  | 'starting'
  | 'scaffold'
  | 'tddWriteTests'
  | 'barrier'
  | 'impl'
  | 'tddReviewImpl'
  | 'merger'
  | 'rebaser'
  | 'human'
  | 'done';

/** The `state` query of a TDD node. */
export interface TddNodeState {
  kind: 'tdd';
  nodePath: string;
  specId: string;
  treeId: string;
  status: 'running' | 'waiting_review' | 'merged' | 'failed' | 'cancelled';
  phase: TddPhase;
  branch: string;
  worktree?: string;
  depth: number;
  counters: {
    implAttempt: number;
    reviewRounds: number;
    scaffoldRuns: number;
    calls: Record<string, number>;
    agentCalls: Record<string, number>;
  };
  /** The seed's node memories. */
  memory: {
    tdd: { conversationId: string; coveredCriteria: string[]; pendingTests: string[] };
    impl: { conversationId: string; passedTests: string[]; attemptHistory: { strategy: string; outcome: string }[] };
  };
  children: TddChildState[];
  /** The latest exit of each node, with its reference. */
  exits: Record<string, { exit: string; ref: string; summary: string }>;
  pendingReviews: PendingReview[];
  human?: { reason: HumanReason; message: string };
  /**
   * What a person judging the node reads (the review inbox): `git diff <base>..HEAD` of its branch after its
   * latest call with a commit (text/x-diff, capped) and the newest test output, both `sha256:` blob refs (their
   * sizes are the blobs'). Absent on nodes started before they were recorded.
   */
  latest?: { diffRef?: string; testOutputRef?: string };
  events: TreadleEvent[];
  eventCount: number;
  merge?: { mergeCommit: string; ref: string; bytes?: number };
  error?: string;
  /** The totals of this node's own model calls (its children's are on `children`). */
  usage?: UsageTotals;
  /** Refusals of all calls so far: their number, and the latest few (the Web UI's details show them). */
  refusals?: TddRefusals;
  startedAt: string;
  completedAt?: string;
}

/** What a TDD node workflow returns: its `MergeComplete` (by reference) or why it failed. */
export interface TddNodeResult {
  nodePath: string;
  specId: string;
  status: 'merged' | 'failed';
  mergeCommit?: string;
  /** The whole MergeComplete in the blob store, and its size. */
  mergeRef?: string;
  mergeBytes?: number;
  branch: string;
  error?: string;
  /** The totals of the model calls of this node and every child it heard from (absent before totals). */
  usage?: UsageTotals;
}

/** Input and result of the activity that prepares a node's worktree. */
export interface TddWorktreeInput {
  repo: string;
  branch: string;
  base: string;
}
export interface TddWorktreeResult {
  worktree: string;
  head: string;
}

/** Input of the activity that prepares a `tdd` stage's tree. */
export interface TddPrepareInput {
  /** The stage's `with:` (possibly a blob reference, when large). */
  config: unknown;
  /** The child workflow's id, which is the tree's id. */
  treeId: string;
}
