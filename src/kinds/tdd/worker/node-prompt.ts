/**
 * The prompt of one TDD node call (seed 001): the seed's template for the node, filled with what the node's
 * refs point at (read from the blob store), the reviewer's diff, and the reply instructions.
 */
import { readJson } from '../../../storage/blob-store';
import { git } from './git';
import { diffText } from './worktree-changes';
import { renderNodeTemplate } from './node-templates';
import { replyInstructions } from './prompts';
import type { NodeRun } from './call-state';
import type { NodeContext } from '../shapes';
import type {
  Critique,
  ImplResult,
  InitWorkPayload,
  MergeComplete,
  MergeEvent,
  PlannedTest,
  TDDApproval,
  TestsReadyPayload,
} from '../spec';

/** The diff shown to the reviewer is cut to this many bytes (the whole diff is stored). */
const MAX_PROMPT_DIFF_BYTES = 100_000;

/** The whole prompt of this call: the node's template, why it is called again (if it is), and how to reply. */
export async function renderPrompt(ctx: NodeRun): Promise<string> {
  const { input, context, blobs } = ctx;
  const spec = context.spec;
  const get = async <T>(ref: string | undefined): Promise<T | undefined> => (ref ? readJson<T>(blobs, ref) : undefined);
  let body: string;
  switch (input.node) {
    case 'scaffold':
      body = renderNodeTemplate('scaffold', { spec, parentContext: context.parentContext });
      break;
    case 'tddWriteTests': {
      const scaffold = (await get<InitWorkPayload>(input.refs.scaffold))!;
      body = renderNodeTemplate('tddWriteTests', { spec, scaffold, coveredCriteria: input.coveredCriteria ?? [] });
      const critiques = await get<{ critiques: Critique[]; additionalTests: PlannedTest[] }>(input.refs.critiques);
      if (critiques) body += `\n\n## Reviewer's requests (MoreTests)\n${JSON.stringify(critiques, null, 2)}\n`;
      break;
    }
    case 'impl': {
      const critiques = await get<{ critiques: Critique[] }>(input.refs.critiques);
      const childMerges = await Promise.all(
        (input.refs.childMerges ?? []).map((ref) => readJson<MergeComplete>(blobs, ref)),
      );
      body = renderNodeTemplate('impl', {
        spec,
        scaffold: (await get<InitWorkPayload>(input.refs.scaffold))!,
        testsReady: (await get<TestsReadyPayload>(input.refs.testsReady))!,
        childMerges: childMerges.length > 0 ? childMerges : null,
        attemptCount: input.attemptCount ?? 1,
        critiqueList: critiques?.critiques ?? null,
      });
      break;
    }
    case 'tddReviewImpl': {
      // As the parent's judge: the child's diff since it branched off, against the spec (criteria) it was given.
      const judge = input.judge;
      const judged = judge ? await readJson<NodeContext>(blobs, judge.childContextRef) : undefined;
      const base = judge
        ? await git(input.worktree, ['merge-base', 'HEAD', judge.childBranch])
        : (input.baseCommit ?? 'HEAD~1');
      const diff = await diffText({
        worktree: input.worktree,
        base,
        ...(judge ? { head: judge.childBranch } : {}),
        maxBytes: MAX_PROMPT_DIFF_BYTES,
      });
      body = renderNodeTemplate('tddReviewImpl', {
        spec: judged?.spec ?? spec,
        scaffold: (await get<InitWorkPayload>(input.refs.scaffold))!,
        implResult: (await get<ImplResult>(input.refs.implResult))!,
        diff: diff.truncated
          ? `${diff.text}\n… (diff cut at ${MAX_PROMPT_DIFF_BYTES} bytes; files: ${diff.files.join(', ')})`
          : diff.text,
      });
      if (judge)
        body += `\n\n## You judge a child's merge\nYou are the parent. Child \`${judge.childNodePath}\` (branch \`${judge.childBranch}\`) asks to merge. Check its diff against the criteria you assigned to it (the spec above) and against its siblings' work: Approved lets it merge; MoreTests or Reject sends it back to write tests for what is missing.\n`;
      break;
    }
    case 'merger': {
      const approval = (await get<TDDApproval>(input.refs.approval))!;
      const scaffold = (await get<InitWorkPayload>(input.refs.scaffold))!;
      body = renderNodeTemplate('merger', {
        parentNode: { nodeId: input.merge?.parentNodeId ?? '', branch: input.merge?.parentBranch ?? '' },
        childNode: { nodeId: input.nodePath, branch: input.branch },
        tddApproval: approval,
        contractSuite: scaffold.contractSuite,
      });
      break;
    }
    case 'rebaser':
      body = renderNodeTemplate('rebaser', {
        node: { nodeId: input.nodePath, branch: input.branch },
        parentBranch: input.rebase?.parentBranch ?? '',
        newParentHead: input.rebase?.newParentHead ?? '',
        mergeEvent: (await get<MergeEvent>(input.refs.mergeEvent))!,
      });
      break;
  }
  const note = input.note ? `\n\n## Why you are called again\n${input.note}\n` : '';
  return `${body}${note}\n\n${replyInstructions(input.node, { worktree: ctx.worktreeMode })}`;
}
