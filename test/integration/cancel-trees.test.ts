/**
 * Cancelling a work item whose stage has child workflows at work (issue 40's cancel "done when"), on the real
 * server (test/support/busy-children.ts): a `tdd` stage whose tree (root `cr`, children `cx` and `cy`) has an
 * agent call running in each node, beside an approval request still pending; and a `loop` stage whose first
 * iteration is running. After `TreadleClient.cancel`: the item is CANCELLED with who and why, every workflow
 * under it (as visibility lists them by root) is closed as CANCELLED, each running agent call heard its abort
 * within 5 s of the request, the worker has no activity left in flight within 5 s, and the approval's action
 * never ran. Each TDD node closes after its children and says `cancelled`, as the loop does.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { defaultAgentProviders } from '../../src/agents';
import { bundledActionRegistry } from '../../src/cli/bundled-examples';
import type { ActionCatalog } from '../../src/kinds/approval/worker/activities';
import { TreadleStatus } from '../../src/model/search-attributes';
import { HeldCalls, HOLDING_AGENT, startBusyLoop, startBusyTree } from '../support/busy-children';
import { eventually, startHarness, type Harness } from '../support/harness';
import { tddRepos, type TddRepos } from '../support/tdd-fixtures';

/** The bound: a running activity hears a cancel within 5 s of the request. */
const HEARD_WITHIN_MS = 5_000;

const held = new HeldCalls();
/** Approval actions that ran, by idempotency key (none may: the item is cancelled while its request waits). */
const executed: string[] = [];

let h: Harness;
let repos: TddRepos;
const savedWorkspace = process.env.TREADLE_LOOP_WORKSPACE;
beforeAll(async () => {
  process.env.TREADLE_LOOP_WORKSPACE = mkdtempSync(path.join(os.tmpdir(), 'cancel-trees-loops-'));
  repos = tddRepos('cancel-trees-');
  const actions = bundledActionRegistry({
    tasksFile: path.join(mkdtempSync(path.join(os.tmpdir(), 'cancel-trees-tasks-')), 'tasks.json'),
  });
  const recordingActions: ActionCatalog = {
    validatePayload: (type, payload) => actions.validatePayload(type, payload),
    summarize: (type, payload) => actions.summarize(type, payload),
    execute: (type, payload, context) => {
      executed.push(context.idempotencyKey);
      return actions.execute(type, payload, context);
    },
    names: () => actions.names(),
  };
  h = await startHarness({
    agents: { ...defaultAgentProviders(), [HOLDING_AGENT]: held.provider },
    approvalActions: recordingActions,
  });
});
afterAll(async () => {
  await h?.shutdown();
  repos?.remove();
  if (savedWorkspace === undefined) delete process.env.TREADLE_LOOP_WORKSPACE;
  else process.env.TREADLE_LOOP_WORKSPACE = savedWorkspace;
});

/** Every workflow whose root is item `id` (the item, its stages' children and theirs), as visibility lists them. */
async function workflowsUnder(id: string): Promise<{ id: string; status: string }[]> {
  const found: { id: string; status: string }[] = [];
  for await (const w of h.temporal.workflow.list({ query: `RootWorkflowId = "${id}"` }))
    found.push({ id: w.workflowId, status: w.status.name });
  return found.sort((a, b) => a.id.localeCompare(b.id));
}

/** Waits until visibility lists exactly `ids` under item `id`, every one of them CANCELLED. */
async function allCancelled(id: string, ids: string[]): Promise<void> {
  const expected = JSON.stringify([...ids].sort().map((w) => ({ id: w, status: 'CANCELLED' })));
  await eventually(
    async () => (JSON.stringify(await workflowsUnder(id)) === expected ? true : undefined),
    20_000,
    `every workflow under ${id} cancelled`,
  );
}

/**
 * Cancels item `id` as ann, checks that it recorded who and why and closed CANCELLED, and measures, from the
 * request, when each held call of `keys` heard its abort and when the worker had no activity left in flight.
 */
async function cancelAndMeasure(id: string, reason: string, keys: string[]) {
  const zeroes: number[] = [];
  const subscription = h.worker.numInFlightActivities$.subscribe((n) => {
    if (n === 0) zeroes.push(Date.now());
  });
  const asked = Date.now();
  try {
    const outcome = await h.client.cancel(id, { by: 'ann', reason });
    expect(outcome).toEqual({ id, by: 'ann', reason, recorded: true, closed: true });
    expect((await h.temporal.workflow.getHandle(id).describe()).status.name).toBe('CANCELLED');
    expect(await h.client.getState(id)).toMatchObject({
      status: 'cancelled',
      cancelledBy: 'ann',
      cancelReason: reason,
      error: `work item cancelled by ann: ${reason}`,
    });
    const heard: Record<string, number> = {};
    for (const key of keys) {
      const at = await eventually(async () => held.calls.get(key)?.abortedAt, 15_000, `${key} to hear its abort`);
      heard[key] = at - asked;
    }
    const idle = await eventually(
      async () => (h.worker.getStatus().numInFlightActivities === 0 ? zeroes.find((t) => t >= asked) : undefined),
      15_000,
      'no activity in flight',
    );
    process.stderr.write(
      `cancel-trees ${id}: heard after ${JSON.stringify(heard)} ms; idle after ${idle - asked} ms\n`,
    );
    return { heard, idleAfter: idle - asked };
  } finally {
    subscription.unsubscribe();
  }
}

it('cancels an item while its TDD tree works in every node and its approval waits: every workflow of the tree closes cancelled, each running call hears it within 5 s, nothing runs after, the action never runs', async () => {
  const id = h.id('cancel-tree');
  const tree = await startBusyTree(h, held, id, await repos.create('cancelled'));
  const [request] = await eventually(async () => {
    const approvals = (await h.client.getState(id)).approvals ?? [];
    return approvals.some((a) => a.status === 'pending') ? approvals : undefined;
  });

  const { heard, idleAfter } = await cancelAndMeasure(id, 'the tree is not needed', tree.keys);

  expect(Object.keys(heard)).toEqual(tree.keys);
  expect(Math.max(...Object.values(heard))).toBeLessThanOrEqual(HEARD_WITHIN_MS);
  expect(idleAfter).toBeLessThanOrEqual(HEARD_WITHIN_MS);
  // The item, the tree's root and both children: all listed under the item, all closed as cancelled, each node
  // after its children (none left to the parent-close policy, which would terminate it) and saying so.
  await allCancelled(id, [id, ...tree.nodes]);
  const closedAt = async (w: string) => (await h.temporal.workflow.getHandle(w).describe()).closeTime!.getTime();
  const [root, ...children] = await Promise.all(tree.nodes.map(closedAt));
  expect(root).toBeGreaterThanOrEqual(Math.max(...children));
  expect(await closedAt(id)).toBeGreaterThanOrEqual(root!);
  for (const node of tree.nodes) {
    const { status, error } = await h.client.getTddState(node);
    const published = (await h.temporal.workflow.getHandle(node).describe()).typedSearchAttributes.get(TreadleStatus);
    expect({ node, status, error, published }).toEqual({
      node,
      status: 'cancelled',
      error: 'cancelled',
      published: 'cancelled',
    });
  }

  // The approval request waiting beside the tree ended cancelled, and its action never ran.
  const state = await h.client.getState(id);
  expect(state.approvals).toEqual([expect.objectContaining({ id: request!.id, status: 'cancelled' })]);
  await expect(h.client.decideApproval(request!.id, 'approve')).rejects.toThrow(
    `approval request ${request!.id} is already cancelled`,
  );
  expect(executed).toEqual([]);
}, 180_000);

it('cancels an item while its loop stage runs an iteration: the loop workflow closes cancelled, the iteration hears it within 5 s, nothing runs after', async () => {
  const id = h.id('cancel-loop');
  const key = await startBusyLoop(h, held, id);

  const { heard, idleAfter } = await cancelAndMeasure(id, 'enough iterations', [key]);

  expect(heard[key]).toBeLessThanOrEqual(HEARD_WITHIN_MS);
  expect(idleAfter).toBeLessThanOrEqual(HEARD_WITHIN_MS);
  await allCancelled(id, [id, `${id}.work.1`]);
  // The loop says it was cancelled, in its state and where the listings look.
  const [loop] = await h.client.loops(id);
  expect(loop).toMatchObject({ workflowId: `${id}.work.1`, state: { status: 'cancelled', iteration: 0 } });
  const description = await h.temporal.workflow.getHandle(`${id}.work.1`).describe();
  expect(description.typedSearchAttributes.get(TreadleStatus)).toBe('cancelled');
});
