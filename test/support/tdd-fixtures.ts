/**
 * What the TDD tests set up alike: the folder their repositories live in (the activities' allow-list,
 * `TREADLE_TDD_REPOS`), a repository with its first commit, git run in it, `node:test` files, a one-function
 * leaf spec with its scripted replies, and one node's activities in Temporal's mock activity environment.
 */
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AgentProviders } from '../../src/agents/providers';
import { createTddActivities } from '../../src/kinds/tdd/worker/activities';
import { initRepository } from '../../src/kinds/tdd/worker/git';
import type {
  NodeContext,
  Spec,
  TddNodeCallInput,
  TddNodeCallResult,
  TddWorktreeResult,
} from '../../src/kinds/tdd/shapes';
import { TDD_NODE_ACTIVITY, TDD_WORKTREE_ACTIVITY } from '../../src/model/activity-types';
import type { BlobStore } from '../../src/storage/blob-store';

/** A temporary folder of test repositories, the only place the TDD activities may use repositories from. */
export interface TddRepos {
  readonly root: string;
  /** A new repository `name` in the folder with `files` (by default a README `# <name>`) committed on main. */
  create(name: string, files?: Record<string, string>): Promise<string>;
  /** Puts `TREADLE_TDD_REPOS` back as it was (when this set it) and removes the folder. */
  remove(): void;
}

/**
 * Makes the folder (`prefix` names it) and, unless `setEnv` is false, points `TREADLE_TDD_REPOS` at it for the
 * worker the test starts next; a test that gives its activities their own environment passes `setEnv: false`.
 */
export function tddRepos(prefix: string, { setEnv = true }: { setEnv?: boolean } = {}): TddRepos {
  const root = mkdtempSync(path.join(os.tmpdir(), prefix));
  const previous = process.env.TREADLE_TDD_REPOS;
  if (setEnv) process.env.TREADLE_TDD_REPOS = root;
  return {
    root,
    create: async (name, files = { 'README.md': `# ${name}\n` }) => {
      const repo = path.join(root, name);
      await initRepository(repo, files);
      return repo;
    },
    remove: () => {
      if (setEnv) {
        if (previous === undefined) delete process.env.TREADLE_TDD_REPOS;
        else process.env.TREADLE_TDD_REPOS = previous;
      }
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/** Runs git in `repo` and returns its output, trimmed; git's own errors stay out of the test output. */
export function gitIn(repo: string, ...args: string[]): string {
  return execFileSync('git', args, { cwd: repo, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
}

/** A `node:test` file with `test` and `assert` in scope, and `body` after them. */
export function testFile(body: string): string {
  return `'use strict';\nconst test = require('node:test');\nconst assert = require('node:assert/strict');\n${body}\n`;
}

/**
 * A one-function leaf `<name>() is 1` (its spec, also as a parent's child spec) and the scripted replies a
 * tree of such leaves is built from: each node's usual exit, a stuck Impl and Impl's retries.
 */
export function leaf(name: string) {
  const stub = `'use strict';\nmodule.exports = { ${name}: () => { throw new Error('todo'); } };\n`;
  const spec = {
    id: name,
    description: `${name}() is 1`,
    acceptanceCriteria: [{ id: 'C1', text: `${name}() is 1` }],
    targetPath: `src/${name}.js`,
    testPath: `test/${name}.test.js`,
  };
  return {
    spec,
    child: spec,
    initWork: {
      exit: 'InitWork',
      scaffoldCommit: '',
      interfaceFile: `src/${name}.js`,
      contractSuite: `test/contract/${name}.test.js`,
      testPlan: [],
      files: {
        [`src/${name}.js`]: stub,
        [`test/contract/${name}.test.js`]: testFile(
          `test('exports ${name}', () => assert.equal(typeof require('../../src/${name}').${name}, 'function'));`,
        ),
      },
    },
    testsReady: {
      exit: 'TestsReady',
      testsCommit: '',
      testFiles: [`test/${name}.test.js`],
      pendingCriteria: ['C1'],
      files: {
        [`test/${name}.test.js`]: testFile(`test('C1', () => assert.equal(require('../src/${name}').${name}(), 1));`),
      },
    },
    testsPassed: {
      exit: 'TestsPassed',
      commitHash: '',
      iterations: 1,
      passedTests: ['C1'],
      files: { [`src/${name}.js`]: `module.exports = { ${name}: () => 1 };\n` },
    },
    requestRetry: (n: number) => ({
      exit: 'RequestRetry',
      diagnosis: `not yet (${n})`,
      strategyFrom: 'guess',
      strategyTo: 'think',
      failingTests: ['C1'],
    }),
    stuck: { exit: 'Stuck', diagnosis: `${name} cannot tell what 1 means`, recommendation: 'ask', attempts: 1 },
    approved: {
      exit: 'Approved',
      signOff: 'ok',
      coverageReport: { criteriaWithTests: [['C1', 'C1']], criteriaMissing: [] },
    },
    mergeComplete: {
      exit: 'MergeComplete',
      mergeCommit: '',
      author: name,
      impactLevel: 'Additive',
      changes: [{ symbol: name, changeType: 'NewExport', reason: 'the spec' }],
    },
  };
}

/** One node's TDD activities, called outside a workflow as its worker would call them. */
export interface NodeActivities {
  /** The worktree activity: `branch`'s worktree of `repo`, from HEAD. */
  worktree(repo: string, branch: string): Promise<TddWorktreeResult>;
  /** The node activity: one call of a graph node. */
  call(input: TddNodeCallInput): Promise<TddNodeCallResult>;
}

/**
 * The TDD activities over `blobs` and `agents` in Temporal's mock activity environment, as workflow
 * `workflowId` (run `run-1`), allowed the repositories in `root`; `quiet` logs errors only (for expected warnings).
 */
export function nodeActivities(options: {
  root: string;
  blobs: BlobStore;
  agents: AgentProviders;
  workflowId: string;
  quiet?: boolean;
}): NodeActivities {
  const activities = createTddActivities({
    blobs: options.blobs,
    agents: options.agents,
    env: { TREADLE_TDD_REPOS: options.root, PATH: process.env.PATH ?? '' },
  }) as unknown as {
    [TDD_WORKTREE_ACTIVITY]: (input: { repo: string; branch: string; base: string }) => Promise<TddWorktreeResult>;
    [TDD_NODE_ACTIVITY]: (input: TddNodeCallInput) => Promise<TddNodeCallResult>;
  };
  const info = { workflowExecution: { workflowId: options.workflowId, runId: 'run-1' } };
  const env = options.quiet
    ? new MockActivityEnvironment(info, { logger: new DefaultLogger('ERROR') })
    : new MockActivityEnvironment(info);
  return {
    worktree: (repo, branch) =>
      env.run(activities[TDD_WORKTREE_ACTIVITY], { repo, branch, base: 'HEAD' }) as Promise<TddWorktreeResult>,
    call: (input) => env.run(activities[TDD_NODE_ACTIVITY], input) as Promise<TddNodeCallResult>,
  };
}

/** Stores a root node's context (its spec, no parent) as the node calls read it, and returns its reference. */
export async function storeRootContext(blobs: BlobStore, spec: Spec): Promise<string> {
  const context = { spec, parentContext: null } satisfies NodeContext;
  return (await blobs.put(Buffer.from(JSON.stringify(context)), 'application/json', 'spec')).ref;
}
