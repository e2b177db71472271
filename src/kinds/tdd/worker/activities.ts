/**
 * The TDD node's activities (seed 001), registered by name: the git worktree each node works in, one call of
 * a graph node (`node-call.ts`, whose exits `exit-checks.ts` makes true), and the root input of a `tdd` stage
 * in an ordinary pipeline.
 */
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { callLogWriter, type CallLog } from '../../../storage/call-log';
import { supervise, withHeartbeats } from '../../../activities/supervision';
import { TDD_NODE_ACTIVITY, TDD_PREPARE_ACTIVITY, TDD_WORKTREE_ACTIVITY } from '../../../model/activity-types';
import { resolveArtefact, storeJson } from '../../../storage/blob-store';
import type { Json } from '../../../model/shapes';
import { git } from './git';
import { runNodeCall, type NodeCallDependencies } from './node-call';
import { allowedRepoRoots, checkRepo } from './repo-roots';
import type {
  TddNodeCallInput,
  TddNodeCallResult,
  TddNodeInput,
  TddPrepareInput,
  TddWorktreeInput,
  TddWorktreeResult,
} from '../shapes';
import { checkTddStageConfig, seedSpecOf, tddRootInput, TddStageConfigSchema, validateTddSpec } from '../spec';
import { ensureWorktree } from './worktrees';

/** What the TDD activities need from the worker. */
export interface TddActivityDependencies extends NodeCallDependencies {
  env?: NodeJS.ProcessEnv;
  /** The cross-run call log (see `storage/call-log.ts`). */
  callLog?: CallLog;
}

/** The TDD activities by their registered names, over the worker's dependencies. */
export function createTddActivities(deps: TddActivityDependencies): Record<string, (input: never) => Promise<unknown>> {
  const env = deps.env ?? process.env;
  return {
    // Shares the node calls' short heartbeat timeout: a large repository's checkout must heartbeat too.
    [TDD_WORKTREE_ACTIVITY]: async (input: TddWorktreeInput): Promise<TddWorktreeResult> =>
      withHeartbeats(async () => {
        const problem = checkRepo(input.repo, allowedRepoRoots(env));
        if (problem) throw ApplicationFailure.nonRetryable(problem, 'RepositoryNotAllowed');
        const commonDir = path.resolve(input.repo, await git(input.repo, ['rev-parse', '--git-common-dir']));
        const made = await ensureWorktree({
          repo: input.repo,
          worktreesDir: path.join(commonDir, 'treadle-worktrees'),
          branch: input.branch,
          base: input.base,
        });
        return { worktree: made.path, head: made.head };
      }),
    [TDD_NODE_ACTIVITY]: async (input: TddNodeCallInput): Promise<TddNodeCallResult> =>
      supervise((supervision) => runNodeCall(input, deps, env, supervision), {
        blobs: deps.blobs,
        onCalls: callLogWriter(deps.callLog, { pipeline: 'tdd', stage: `${input.nodePath}.${input.node}` }),
      }),
    // A `tdd` stage of an ordinary pipeline: its config becomes the root node's input, stored by reference.
    [TDD_PREPARE_ACTIVITY]: async (input: TddPrepareInput): Promise<TddNodeInput> => {
      const config = (await resolveArtefact(input.config as Json, deps.blobs)) ?? null;
      const problems = checkTddStageConfig(config);
      if (problems.length > 0)
        throw ApplicationFailure.nonRetryable(`invalid tdd stage: ${problems.join('; ')}`, 'InvalidConfig');
      const { spec, repo, replies } = TddStageConfigSchema.parse(config);
      const checked = validateTddSpec(spec);
      if (!checked.ok)
        throw ApplicationFailure.nonRetryable(`invalid tdd spec: ${checked.problems.join('; ')}`, 'InvalidConfig');
      return tddRootInput(checked.spec, {
        treeId: input.treeId,
        repo,
        contextRef: await storeJson(
          deps.blobs,
          { spec: seedSpecOf(checked.spec), parentContext: null },
          `TDD spec ${checked.spec.id}`,
        ),
        ...(replies
          ? { repliesRef: await storeJson(deps.blobs, replies, `scripted replies for ${checked.spec.id}`) }
          : {}),
      });
    },
  };
}
