/**
 * `client.trees`: V3 TDD trees (seed 001) — start one on a git repository, read a node's state, wait for a node's
 * result. `TreadleClient.startTdd`, `getTddState` and `tddResult` are aliases.
 */
import type { StateQueryArgs } from '../../model/state';
import type { TddNodeResult, TddNodeState } from '../../kinds/tdd/shapes';
import { tddStateQuery } from '../../kinds/tdd/messages';
import { resultOf } from '../worker-presence';
import { startTddTree } from '../on-demand';
import type { TddStartOptions } from '../start';
import { ClientPart } from './context';

/** The TDD trees part of `TreadleClient` (`client.trees`). */
export class TreesClient extends ClientPart {
  /**
   * Starts a V3 TDD tree (seed 001) on a git repository: the root `tddNode` workflow, whose children appear
   * under it. `spec` is a spec file's content (the seed's Spec plus `tdd:` settings), validated first with
   * every problem listed. `repo` is a path on the workers (they refuse one outside `TREADLE_TDD_REPOS`).
   * `replies` are scripted agent replies (`{ "<spec id>.<node>": [reply, ...] }`), stored by reference.
   * Idempotent like `items.start`: the id defaults to `tdd-<spec id>`. `priority`, `fairnessKey` and
   * `fairnessWeight` as for `items.start`; every node of the tree inherits them.
   */
  async start(
    spec: unknown,
    options: TddStartOptions,
  ): Promise<{ id: string; runId: string; branch: string; targetBranch: string }> {
    return startTddTree(this.context.startContext(), spec, options).catch(this.context.rethrow);
  }

  /** A TDD node's state (the `state` query of a `tddNode` workflow); `timeoutMs` as for `items.state`. */
  async state(id: string, page: StateQueryArgs = {}, timeoutMs?: number): Promise<TddNodeState> {
    return this.context.ask(id, (h) => h.query(tddStateQuery, page), timeoutMs);
  }

  /** Waits for a TDD node to finish: its MergeComplete (by reference) or why it failed. */
  async result(id: string): Promise<TddNodeResult> {
    return this.context.call(id, (h) => resultOf<TddNodeResult>(h));
  }
}
