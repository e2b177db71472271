/**
 * The TDD node's exits made true (seed 001): what a reply's exit claims is done for real, so no agent can
 * lie about it.
 *
 * - Scaffold `InitWork`: commits the scaffold; the interface file and contract suite must exist; child specs
 *   are checked against the tree's depth and child-count limits and their contexts stored.
 * - TDDWriteTests `TestsReady`: commits the tests and runs the test command: on a first round the tests
 *   must fail (red), or the agent hears so.
 * - Impl: commits; `TestsPassed` runs the tests, and a red run becomes `RequestRetry` with the real failures.
 *   Test files are read-only for Impl.
 * - TDDReviewImpl: reads the diff since the scaffold (by reference).
 * - Merger: squash-merges the node's branch into the branch it merges into (`feat(<id>): implement`) and
 *   runs the tests there; a red run or a conflict is `MergeRejected` whatever the agent says.
 * - Rebaser: rebases onto the parent's new head; a conflict is `RebaseConflict`, built from git's report.
 *
 * Commit hashes in exits are the real ones. Each commit carries a `Treadle-Op` trailer naming the workflow,
 * node and call, so a retried activity finds its commit instead of making a second one.
 */
import { ApplicationFailure } from '@temporalio/common';
import { readFileInside } from '../../../agents/worktree-files';
import { storeJson } from '../../../storage/blob-store';
import { truncateText } from '../../../model/limits';
import { commitAll } from './commits';
import { git, headCommit } from './git';
import { MergeConflictError, rebaseOnto, squashMerge } from './merge-rebase';
import { MAX_ENVELOPE_ITEMS, ownTests, runTests, type Checked, type NodeRun } from './call-state';
import type { NodeContext } from '../shapes';
import { checkChildSpecs, type ChildSpec, type NodeExit } from '../spec';

/** Interface text a child receives from its parent, at most. */
const MAX_PARENT_INTERFACE_CHARS = 20_000;

/** An exit of the given kind. */
type ExitOf<K extends NodeExit['exit']> = Extract<NodeExit, { exit: K }>;

/** Exits that claim nothing Treadle can check: they are reported as the agent gave them. */
type ReportedExit = ExitOf<
  | 'ClarificationNeeded'
  | 'InvalidScaffold'
  | 'BlockedDependency'
  | 'SpecAmbiguity'
  | 'Stuck'
  | 'Approved'
  | 'MoreTests'
  | 'Reject'
>;

/** The exit made true: commits, test runs, merges, with the real hashes written into it. */
export async function checkExit(ctx: NodeRun, exit: NodeExit): Promise<Checked> {
  switch (exit.exit) {
    case 'InitWork':
      return checkInitWork(ctx, exit);
    case 'TestsReady':
      return checkTestsReady(ctx, exit);
    case 'TestsPassed':
      return checkTestsPassed(ctx, exit);
    case 'RequestRetry':
      return checkRequestRetry(ctx, exit);
    case 'MergeComplete':
    case 'MergeRejected':
      return merge(ctx, exit);
    case 'RebaseClean':
    case 'RebaseAdapted':
    case 'RebaseConflict':
      return rebase(ctx, exit);
    default:
      return reportedExit(exit);
  }
}

/** Commits everything in the node's worktree under this call's op key. */
function commitWork(ctx: NodeRun, message: string): Promise<{ commit: string; created: boolean }> {
  return commitAll({ worktree: ctx.input.worktree, message, opKey: ctx.opKey });
}

/** Why `file` cannot be read in the worktree, or null when it can. */
async function missingFrom(worktree: string, file: string): Promise<string | null> {
  return readFileInside(worktree, file).then(
    () => null,
    (error: Error) => error.message,
  );
}

/** Scaffold: the interface file and contract suite exist, the child specs fit the tree; then commit and store. */
async function checkInitWork(ctx: NodeRun, exit: ExitOf<'InitWork'>): Promise<Checked> {
  const { input } = ctx;
  for (const file of [exit.interfaceFile, exit.contractSuite]) {
    const missing = await missingFrom(input.worktree, file);
    if (missing)
      return {
        ok: false,
        feedback: `InitWork names ${file}, which is not in the worktree (${missing}). Write it in "files" and send the whole reply again.`,
      };
  }
  const children = exit.childSpecs ?? [];
  const problems = checkChildSpecs(children, {
    depth: depthOf(input.nodePath),
    maxDepth: input.settings.maxDepth,
    maxChildren: input.settings.maxChildren,
  });
  for (const problem of problems) ctx.refused.add(problem);
  if (problems.length > 0)
    return {
      ok: false,
      feedback: `Your childSpecs cannot be used: ${problems.join('; ')}. Send the whole reply again.`,
    };
  const made = await commitWork(ctx, `scaffold(${input.specId}): interface, contract suite, test plan`);
  const interfaceText = truncateText(
    await readFileInside(input.worktree, exit.interfaceFile),
    MAX_PARENT_INTERFACE_CHARS,
  );
  const stored = await Promise.all(children.map((child) => storeChild(ctx, child, interfaceText, exit)));
  const full: NodeExit = { ...exit, scaffoldCommit: made.commit };
  return {
    ok: true,
    exit: full,
    commit: made.commit,
    envelope: { children: stored, interfaceFile: exit.interfaceFile },
    summary: `InitWork at ${short(made.commit)}: ${exit.testPlan.length} planned tests, ${children.length} children`,
  };
}

/** TDDWriteTests: the test files exist and are committed, and on a first round they fail (red). */
async function checkTestsReady(ctx: NodeRun, exit: ExitOf<'TestsReady'>): Promise<Checked> {
  const { input } = ctx;
  for (const file of exit.testFiles) {
    const missing = await missingFrom(input.worktree, file);
    if (missing)
      return {
        ok: false,
        feedback: `TestsReady lists ${file}, which is not in the worktree (${missing}). Send the whole reply again with the file in "files".`,
      };
  }
  const made = await commitWork(
    ctx,
    `test(${input.specId}): failing tests for ${exit.pendingCriteria.join(', ') || 'the criteria'}`,
  );
  // Red is judged on this node's own test files: a parent's or sibling's tests are not its business.
  const run = await runTests(ctx, input.worktree, exit.testFiles);
  if (!input.implementationExists && run.passed) {
    return {
      ok: false,
      feedback: `The tests pass on the skeleton (${run.summary}), but they MUST fail first (red). Make the tests exercise the behaviour the criteria ask for, and send the whole reply again.`,
    };
  }
  const full: NodeExit = { ...exit, testsCommit: made.commit };
  return {
    ok: true,
    exit: full,
    commit: made.commit,
    testRun: run,
    envelope: { testFiles: cap(exit.testFiles), pendingCriteria: cap(exit.pendingCriteria) },
    summary: `TestsReady at ${short(made.commit)}: ${exit.testFiles.length} test files, ${run.summary}`,
  };
}

/** Impl's green claim: committed and the node's tests run; a red run becomes `RequestRetry` with the failures. */
async function checkTestsPassed(ctx: NodeRun, exit: ExitOf<'TestsPassed'>): Promise<Checked> {
  const { input } = ctx;
  const made = await commitWork(ctx, `feat(${input.specId}): implementation, attempt ${input.attemptCount ?? 1}`);
  const run = await runTests(ctx, input.worktree, await ownTests(ctx));
  if (!run.passed) {
    const failing = run.tests.filter((t) => !t.ok).map((t) => t.name);
    const retry: NodeExit = {
      exit: 'RequestRetry',
      diagnosis: `claimed TestsPassed, but the test run says: ${run.summary}`,
      strategyFrom: 'claimed green',
      strategyTo: 'make the failing tests pass',
      failingTests: failing,
    };
    return {
      ok: true,
      exit: retry,
      commit: made.commit,
      testRun: run,
      envelope: { failingTests: cap(failing), message: `tests still fail: ${run.summary}` },
      summary: truncateText(`TestsPassed refused: ${run.summary}`),
    };
  }
  const passed = run.tests.filter((t) => t.ok).map((t) => t.name);
  const full: NodeExit = {
    ...exit,
    commitHash: made.commit,
    iterations: input.attemptCount ?? 1,
    passedTests: passed.length > 0 ? passed : exit.passedTests,
  };
  return {
    ok: true,
    exit: full,
    commit: made.commit,
    testRun: run,
    envelope: { passedTests: cap(passed) },
    summary: `TestsPassed at ${short(made.commit)}: ${run.summary}`,
  };
}

/** Impl asks for another attempt: its work so far is committed. */
async function checkRequestRetry(ctx: NodeRun, exit: ExitOf<'RequestRetry'>): Promise<Checked> {
  const made = await commitWork(ctx, `wip(${ctx.input.specId}): impl attempt ${ctx.input.attemptCount ?? 1}`);
  return {
    ok: true,
    exit,
    commit: made.commit,
    envelope: { failingTests: cap(exit.failingTests), message: truncateText(exit.diagnosis, 1_000) },
    summary: truncateText(`RequestRetry: ${exit.diagnosis}`),
  };
}

/** An exit that claims nothing to check, with its envelope and summary. */
function reportedExit(exit: ReportedExit): Checked {
  switch (exit.exit) {
    case 'ClarificationNeeded':
      return {
        ok: true,
        exit,
        envelope: { message: truncateText(exit.question, 1_000) },
        summary: truncateText(`ClarificationNeeded: ${exit.question}`),
      };
    case 'InvalidScaffold':
      return {
        ok: true,
        exit,
        envelope: { message: `${exit.missingType} missing at ${exit.expectedLocation}` },
        summary: truncateText(`InvalidScaffold: ${exit.missingType} missing at ${exit.expectedLocation}`),
      };
    case 'BlockedDependency':
      return {
        ok: true,
        exit,
        envelope: { message: `${exit.missingSymbol} expected at ${exit.expectedImportPath}` },
        summary: truncateText(`BlockedDependency: ${exit.missingSymbol}`),
      };
    case 'SpecAmbiguity':
      return {
        ok: true,
        exit,
        envelope: { message: truncateText(exit.question, 1_000) },
        summary: truncateText(`SpecAmbiguity: ${exit.question}`),
      };
    case 'Stuck':
      return {
        ok: true,
        exit,
        envelope: { message: truncateText(`${exit.diagnosis} (recommendation: ${exit.recommendation})`, 1_000) },
        summary: truncateText(`Stuck: ${exit.diagnosis}`),
      };
    case 'Approved':
      return { ok: true, exit, envelope: {}, summary: truncateText(`Approved: ${exit.signOff}`) };
    case 'MoreTests':
      return {
        ok: true,
        exit,
        envelope: { critiques: exit.critiques.length, additionalTests: exit.additionalTests.length },
        summary: `MoreTests: ${exit.critiques.length} critiques, ${exit.additionalTests.length} additional tests`,
      };
    case 'Reject':
      return {
        ok: true,
        exit,
        envelope: { message: truncateText(exit.reason, 1_000) },
        summary: truncateText(`Reject: ${exit.reason}`),
      };
  }
}

/** Merger: the squash merge and the test run are Treadle's; the agent describes the change (or refuses). */
async function merge(
  ctx: NodeRun,
  exit: Extract<NodeExit, { exit: 'MergeComplete' | 'MergeRejected' }>,
): Promise<Checked> {
  const { input } = ctx;
  const target = input.merge;
  if (!target) throw ApplicationFailure.nonRetryable('a merger call needs the branch to merge into', 'InvalidInput');
  if (exit.exit === 'MergeRejected') {
    return {
      ok: true,
      exit,
      envelope: { failingTests: cap(exit.failingTests), message: truncateText(exit.details, 1_000) },
      summary: truncateText(`MergeRejected (${exit.reason}): ${exit.details}`),
    };
  }
  const before = await headCommit(target.parentWorktree);
  let merged: { commit: string; created: boolean };
  try {
    merged = await squashMerge({
      worktree: target.parentWorktree,
      branch: input.branch,
      message: `feat(${input.specId}): implement`,
      opKey: ctx.opKey,
    });
  } catch (error) {
    if (!(error instanceof MergeConflictError)) throw error;
    const rejected: NodeExit = {
      exit: 'MergeRejected',
      reason: 'IntegrationFailure',
      details: `the squash merge into ${target.parentBranch} conflicts in ${error.files.join(', ')}`,
      failingTests: [],
    };
    return {
      ok: true,
      exit: rejected,
      envelope: { message: rejected.details },
      summary: truncateText(`MergeRejected: ${rejected.details}`),
    };
  }
  // A child's merge is verified by its own tests and contract suite in the parent's tree (the parent's own
  // tests are red until the parent's Impl); the root's merge runs the whole suite.
  const isRoot = depthOf(input.nodePath) === 0;
  const run = await runTests(ctx, target.parentWorktree, isRoot ? [] : await ownTests(ctx));
  if (!run.passed) {
    // Undo the merge commit (made by this call or by a crashed earlier try of it): the parent branch stays green.
    if ((await headCommit(target.parentWorktree)) === merged.commit)
      await git(target.parentWorktree, ['reset', '--hard', merged.created ? before : `${merged.commit}^`]);
    const failing = run.tests.filter((t) => !t.ok).map((t) => t.name);
    const rejected: NodeExit = {
      exit: 'MergeRejected',
      reason: 'IntegrationFailure',
      details: `after the squash merge into ${target.parentBranch}: ${run.summary}`,
      failingTests: failing,
    };
    return {
      ok: true,
      exit: rejected,
      testRun: run,
      envelope: { failingTests: cap(failing), message: rejected.details },
      summary: truncateText(`MergeRejected: ${rejected.details}`),
    };
  }
  const full: NodeExit = { ...exit, mergeCommit: merged.commit, author: input.nodePath };
  const changesRef = await storeJson(
    ctx.blobs,
    { author: input.nodePath, impactLevel: exit.impactLevel, changes: exit.changes },
    `MergeEvent of ${input.nodePath}`,
  );
  return {
    ok: true,
    exit: full,
    commit: merged.commit,
    testRun: run,
    envelope: { mergeCommit: merged.commit, impactLevel: exit.impactLevel, changesRef },
    summary: `MergeComplete: ${short(merged.commit)} on ${target.parentBranch} (${exit.impactLevel}, ${exit.changes.length} changes)`,
  };
}

/** Rebaser: the rebase is git's; a conflict is reported as git saw it, whatever the agent said. */
async function rebase(
  ctx: NodeRun,
  exit: Extract<NodeExit, { exit: 'RebaseClean' | 'RebaseAdapted' | 'RebaseConflict' }>,
): Promise<Checked> {
  const { input } = ctx;
  const onto = input.rebase?.newParentHead ?? input.rebase?.parentBranch;
  if (!onto)
    throw ApplicationFailure.nonRetryable('a rebaser call needs the parent head to rebase onto', 'InvalidInput');
  if (exit.exit === 'RebaseConflict')
    return {
      ok: true,
      exit,
      envelope: { message: truncateText(exit.whyUnresolvable, 1_000) },
      summary: truncateText(`RebaseConflict in ${exit.conflictFile}`),
    };
  // The agent's mechanical adaptations (if any) are committed before the rebase, then replayed by it (a
  // rebase needs a clean worktree; with nothing to commit this makes no commit).
  await commitAll({
    worktree: input.worktree,
    message: `chore(${input.specId}): adapt to a sibling's merge`,
    opKey: ctx.opKey,
  });
  const result = await rebaseOnto({ worktree: input.worktree, onto });
  if (!result.clean) {
    const conflict: NodeExit = {
      exit: 'RebaseConflict',
      conflictFile: result.conflictFiles[0] ?? '(unknown)',
      ourChange: 'this node’s commits',
      theirChange: `the parent head ${short(onto)}`,
      whyUnresolvable: truncateText(result.details, 1_000),
    };
    return {
      ok: true,
      exit: conflict,
      envelope: { message: `rebase conflicts in ${result.conflictFiles.join(', ')}` },
      summary: truncateText(`RebaseConflict: ${result.conflictFiles.join(', ')}`),
    };
  }
  const full: NodeExit = { ...exit, newBase: result.newBase };
  return {
    ok: true,
    exit: full,
    commit: await headCommit(input.worktree),
    envelope: {},
    summary: `${exit.exit} onto ${short(result.newBase)}`,
  };
}

/** A child's context (spec + what the parent gives it), stored for the child workflow to read. */
async function storeChild(
  ctx: NodeRun,
  child: ChildSpec,
  interfaceText: string,
  exit: Extract<NodeExit, { exit: 'InitWork' }>,
): Promise<{ id: string; contextRef: string; readOnly: string[] }> {
  const context: NodeContext = {
    spec: child,
    parentContext: {
      interface: interfaceText,
      assignedCriteria: child.acceptanceCriteria.map((c) => `${c.id}: ${c.text}`).join('\n'),
    },
  };
  const ref = await storeJson(ctx.blobs, context, `spec of ${ctx.input.nodePath}.${child.id}`);
  // The parent's interface file is read-only for the child (and for its children in turn), and so are the
  // siblings' target files: each child implements its own.
  const siblings = (exit.childSpecs ?? []).filter((c) => c.id !== child.id).map((c) => c.targetPath);
  const readOnly = [...new Set([...ctx.input.readOnly, exit.interfaceFile, ...siblings])];
  return { id: child.id, contextRef: ref, readOnly };
}

/** How deep a node is in the tree: 0 for the root. */
function depthOf(nodePath: string): number {
  return nodePath.split('.').length - 1;
}

/** An inline list cut for an envelope. */
function cap<T>(items: T[]): T[] {
  return items.slice(0, MAX_ENVELOPE_ITEMS);
}

/** A commit hash short enough for a summary. */
function short(commit: string): string {
  return commit.slice(0, 10);
}
