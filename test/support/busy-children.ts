/**
 * Work items whose stage's child workflows are at work, for cancelling them (issue 40): a `tdd` stage whose
 * tree (root `cr`, children `cx` and `cy`) has an agent call running in every node beside an approval request
 * still pending, and a `loop` stage whose first iteration is running. The calls are held by an agent provider
 * that wraps the scripted one: a held call waits for its abort signal (its activity's cancellation) and notes
 * when it came. `recordCancelledChildren` cancels one of each and returns the histories the replay test keeps.
 */
import type { temporal } from '@temporalio/proto';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { defaultAgentProviders } from '../../src/agents';
import type { AgentProviderFactory } from '../../src/agents/providers';
import { initRepository } from '../../src/kinds/tdd/worker/git';
import type { Json } from '../../src/model/shapes';
import { APPROVAL_INPUT, APPROVAL_SPEC } from './decision-recording';
import { eventually, startHarness, type Harness } from './harness';
import { leaf } from './tdd-fixtures';

/** The provider name items here give their agents. */
export const HOLDING_AGENT = 'holding';

/** One held call: when it began, and when its abort signal fired (and why). */
export interface HeldCall {
  startedAt: number;
  abortedAt?: number;
  reason?: string;
}

/** Agent calls held until their activity is cancelled, by `<item or tree id>/<stage key>`. */
export class HeldCalls {
  private readonly holdOn = new Set<string>();
  readonly calls = new Map<string, HeldCall>();

  /** Holds every call of `key`; a TDD node's stage key is `<spec id>.<graph node>`, a loop's its stage name. */
  hold(key: string): void {
    this.holdOn.add(key);
  }

  /** The provider: the scripted agent, but a call to hold waits for its abort signal and then throws. */
  readonly provider: AgentProviderFactory = (ctx) => {
    const scripted = defaultAgentProviders().scripted!(ctx);
    const key = `${ctx.itemId}/${ctx.stage}`;
    return {
      provider: HOLDING_AGENT,
      run: async (request) => {
        if (!this.holdOn.has(key)) return scripted.run(request);
        const { signal } = request;
        if (!signal) throw new Error(`${key}: no abort signal, so a held call could never stop`);
        const call: HeldCall = { startedAt: Date.now() };
        this.calls.set(key, call);
        await new Promise<void>((resolve) =>
          signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), { once: true }),
        );
        call.abortedAt = Date.now();
        call.reason = String(signal.reason);
        throw new Error(`${key}: stopped`);
      },
    };
  };

  /** Waits until every call of `keys` is held. */
  async allHeld(keys: string[], timeoutMs = 120_000): Promise<void> {
    await eventually(async () => (keys.every((k) => this.calls.has(k)) ? true : undefined), timeoutMs, 'held calls');
  }
}

/** A busy tree's workflow ids and the keys of its held calls. */
export interface BusyTree {
  treeId: string;
  nodes: string[];
  keys: string[];
}

/**
 * Starts item `id` (as `name`): an approval request (`create_task`) waiting beside a `tdd` stage `build` whose
 * three nodes scaffold (the root with two children) and then hold their TDDWriteTests calls; returns once all
 * three are held.
 */
export async function startBusyTree(h: Harness, held: HeldCalls, id: string, repo: string): Promise<BusyTree> {
  const treeId = `${id}.build.1`;
  const [r, x, y] = [leaf('cr'), leaf('cx'), leaf('cy')];
  const replies: Record<string, Json[]> = {
    'cr.scaffold': [{ ...r.initWork, childSpecs: [x.child, y.child] }],
    'cx.scaffold': [x.initWork],
    'cy.scaffold': [y.initWork],
  };
  const keys = ['cr', 'cx', 'cy'].map((node) => `${treeId}/${node}.tddWriteTests`);
  for (const key of keys) held.hold(key);
  // No nudge while held: the reminder's timeout would abort the call too.
  const spec = { ...r.spec, tdd: { agent: HOLDING_AGENT, nudgeTimeoutSeconds: 600 } };
  await h.client.start(
    {
      name: 'cancel-busy-tree',
      stages: [...APPROVAL_SPEC.stages, { name: 'build', run: 'tdd', with: { spec, repo, replies } }],
    },
    APPROVAL_INPUT,
    { id },
  );
  await held.allHeld(keys);
  return { treeId, nodes: [treeId, `${treeId}.cx`, `${treeId}.cy`], keys };
}

/** Starts item `id` with a `loop` stage `work` whose first iteration is held; returns its key once held. */
export async function startBusyLoop(h: Harness, held: HeldCalls, id: string): Promise<string> {
  const key = `${id}/work`;
  held.hold(key);
  const stage = { name: 'work', prompt: 'Read ${CTX}', agent: HOLDING_AGENT, termination: { type: 'fixed' } };
  await h.client.start(
    { name: 'cancel-busy-loop', stages: [{ name: 'work', run: 'loop', with: { stage, max_iterations: 3 } }] },
    null,
    { id },
  );
  await held.allHeld([key], 60_000);
  return key;
}

/**
 * Cancels a busy tree's item (`cancelled-tree`) and a busy loop's (`cancelled-loop`) on a worker of its own and
 * returns the histories of both items, the tree's root and one child, and the loop, each under its workflow id.
 */
export async function recordCancelledChildren(): Promise<Record<string, temporal.api.history.v1.IHistory>> {
  const root = mkdtempSync(path.join(os.tmpdir(), 'cancel-record-'));
  process.env.TREADLE_TDD_REPOS = root;
  const repo = path.join(root, 'cancelled');
  await initRepository(repo, { 'README.md': '# cancelled\n' });
  const held = new HeldCalls();
  const h = await startHarness({ agents: { ...defaultAgentProviders(), [HOLDING_AGENT]: held.provider } });
  try {
    // The replay test replays each file under its name as the workflow id, and children's ids derive from it.
    const tree = await startBusyTree(h, held, 'cancelled-tree', repo);
    await h.client.cancel('cancelled-tree', { by: 'ann', reason: 'not needed' });
    await startBusyLoop(h, held, 'cancelled-loop');
    await h.client.cancel('cancelled-loop', { by: 'ann', reason: 'not needed' });
    const ids = ['cancelled-tree', tree.treeId, tree.nodes[1]!, 'cancelled-loop', 'cancelled-loop.work.1'];
    const histories: Record<string, temporal.api.history.v1.IHistory> = {};
    for (const id of ids) {
      const handle = h.temporal.workflow.getHandle(id);
      const status = (await handle.describe()).status.name;
      if (status !== 'CANCELLED') throw new Error(`${id} ended ${status}, not CANCELLED`);
      histories[id] = await handle.fetchHistory();
    }
    return histories;
  } finally {
    await h.shutdown();
  }
}
