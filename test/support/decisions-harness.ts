/**
 * The set-up the decision tests share (test/integration/decisions, decision-detail and client-parts): one harness
 * whose approval stages request `note` actions, loop stages working in a temporary workspace, TDD repositories
 * when asked, and the waits for a decision or a failed loop to show up in a listing.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { PendingDecision } from '../../src/model/decisions';
import type { LoopStageListing } from '../../src/client/parts/loop-stages';
import { eventually, startHarness, type Harness } from './harness';
import { noteActions } from './pipelines';
import { tddRepos, type TddRepos } from './tdd-fixtures';

/** What a test file of decisions works with; both are usable from its first test on. */
export interface DecisionsHarness {
  /** The harness, started before the file's tests (each member reads the started one). */
  readonly h: Harness;
  /** The folder of TDD repositories (with `tdd: true` only). */
  readonly repos: TddRepos;
}

/**
 * A stand-in for what beforeAll makes, so a test file can hold it in a `const`: each member read goes to the
 * started one (member reads only, not spreading; the harness's members are plain values and arrow functions, so
 * nothing needs its `this`).
 */
function lateBound<T extends object>(get: () => T | undefined, what: string): T {
  return new Proxy({} as T, {
    get(_target, key) {
      const value = get();
      if (value === undefined) throw new Error(`${what} is set up in beforeAll: use it inside a test`);
      return Reflect.get(value, key) as unknown;
    },
  });
}

/**
 * Registers the file's beforeAll and afterAll; `name` prefixes the temporary folders. Call it before any hook
 * of the file's own: jest runs afterAll hooks in the order they were declared, and this one shuts the harness's
 * worker down before it removes the loop workspace and TDD repositories the worker may still write to, so an
 * afterAll declared later finds the harness stopped.
 */
export function decisionsHarness(name: string, options: { tdd?: boolean } = {}): DecisionsHarness {
  let harness: Harness | undefined;
  let repos: TddRepos | undefined;
  let workspace: string | undefined;
  const savedWorkspace = process.env.TREADLE_LOOP_WORKSPACE;
  beforeAll(async () => {
    workspace = mkdtempSync(path.join(os.tmpdir(), `${name}-loops-`));
    process.env.TREADLE_LOOP_WORKSPACE = workspace;
    if (options.tdd) repos = tddRepos(`${name}-tdd-`);
    harness = await startHarness({ approvalActions: noteActions });
  });
  afterAll(async () => {
    await harness?.shutdown();
    if (savedWorkspace === undefined) delete process.env.TREADLE_LOOP_WORKSPACE;
    else process.env.TREADLE_LOOP_WORKSPACE = savedWorkspace;
    if (workspace) rmSync(workspace, { recursive: true, force: true });
    repos?.remove();
  });
  return {
    h: lateBound(() => harness, 'the harness'),
    repos: lateBound(() => repos, 'the TDD repositories (tdd: true)'),
  };
}

/** The first decision `list` returns that `matches`, once the (eventually consistent) listing has it. */
export function listedDecision(
  list: () => Promise<PendingDecision[]>,
  matches: (decision: PendingDecision) => boolean,
  what: string,
  timeoutMs = 30_000,
): Promise<PendingDecision> {
  return eventually(async () => (await list()).find(matches), timeoutMs, what);
}

/** The first of the loop stages `list` returns that failed, once one has. */
export function failedLoop(list: () => Promise<LoopStageListing[]>): Promise<LoopStageListing> {
  return eventually(async () => (await list()).find((l) => l.state.status === 'failed'), 60_000, 'the failed loop');
}
