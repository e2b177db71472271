/**
 * The work item's hooks of the StageKind contract (docs/stage-kinds.md): the work item sets each kind's
 * handlers through the table (`installHandlers`), only under names the kind declares in its `messages`, and
 * publishes what each kind's `publish` hook gives for the decisions it holds (approval requests). The hooks
 * are run here with a recording `setHandler` in place of Temporal's, outside a workflow.
 */
import type { setHandler } from '@temporalio/workflow';
import { TreadleApprovals, MAX_APPROVAL_IDS_ATTRIBUTE } from '../../src/model/search-attributes';
import type { ApprovalRequest, WorkItemState } from '../../src/model/state';
import type { EventType } from '../../src/model/shapes';
import type { WorkflowStageKind } from '../../src/workflow-kit/stage-kind';
import {
  declaredHandlers,
  installKindHandlers,
  kindPublications,
  registerWorkflowKind,
  workflowKind,
  workflowKindNames,
} from '../../src/kinds/workflow-table';
import { APPROVALS_MEMO_KEY } from '../../src/kinds/approval/shapes';

type Handler = (...args: unknown[]) => unknown;
interface SetCall {
  name: string;
  handler: Handler;
  options?: { validator?: (payload: unknown) => void };
}

/** A `setHandler` that records what it is given. */
function recorder(calls: SetCall[]): typeof setHandler {
  return ((definition: { name: string }, handler: Handler, options?: SetCall['options']) => {
    calls.push({ name: definition.name, handler, ...(options ? { options } : {}) });
  }) as unknown as typeof setHandler;
}

function request(id: string, status: ApprovalRequest['status'] = 'pending'): ApprovalRequest {
  return {
    id,
    itemId: 'item-1',
    runId: 'run-1',
    step: 'publish',
    actionType: 'task.create',
    payload: { title: id },
    summary: `create ${id}`,
    context: null,
    status,
    createdAt: '2026-12-06T10:00:00.000Z',
    idempotencyKey: `key-${id}`,
    ...(status !== 'pending' ? { decidedBy: 'ann', decidedAt: '2026-12-06T10:05:00.000Z' } : {}),
  };
}

function itemState(approvals?: ApprovalRequest[]): WorkItemState {
  return {
    id: 'item-1',
    pipeline: 'p',
    status: 'running',
    stages: Object.create(null) as WorkItemState['stages'],
    pendingReviews: [],
    events: [],
    eventCount: 0,
    startedAt: '2026-12-06T10:00:00.000Z',
    ...(approvals ? { approvals } : {}),
  };
}

/** The item's context, with its events and touches recorded. */
function itemOf(state: WorkItemState) {
  const events: { type: EventType; message: string }[] = [];
  let touches = 0;
  const item = {
    state,
    itemId: state.id,
    emit: (type: EventType, message: string) => void events.push({ type, message }),
    touch: () => void touches++,
  };
  return { item, events, touches: () => touches };
}

describe("the kinds' handlers on the work item (installHandlers)", () => {
  it('sets, in table order, the messages the item handles for its kinds, each declared by its kind', () => {
    const byKind: [string, string][] = [];
    for (const name of workflowKindNames()) {
      const kind = workflowKind(name)!;
      const calls: SetCall[] = [];
      kind.installHandlers?.({ ...itemOf(itemState()).item, setHandler: declaredHandlers(kind, recorder(calls)) });
      for (const call of calls) {
        expect(kind.messages).toContain(call.name);
        byKind.push([name, call.name]);
      }
    }
    // The approval decisions and the fan-out's progress reports are the work item's to handle.
    expect(byKind).toEqual(
      expect.arrayContaining([
        ['approval', 'approval'],
        ['approval', 'decideApproval'],
        ['fan_out', 'fanOutProgress'],
        ['human', 'respondHuman'],
      ]),
    );
    const all: SetCall[] = [];
    installKindHandlers(itemOf(itemState()).item, recorder(all));
    expect(all.map((call) => call.name)).toEqual(byKind.map(([, message]) => message));
  });

  it("refuses a handler whose name the kind's messages do not declare, and passes a declared one on", () => {
    const kind = { name: 'odd', messages: ['declared'] } as unknown as WorkflowStageKind;
    const calls: SetCall[] = [];
    const set = declaredHandlers(kind, recorder(calls)) as unknown as (d: { name: string }, h: Handler) => void;
    expect(() => set({ name: 'undeclared' }, () => undefined)).toThrow(
      'stage kind "odd" sets a handler of "undeclared", which is not in its messages (declared): declare it there',
    );
    const handler = () => undefined;
    set({ name: 'declared' }, handler);
    expect(calls).toEqual([{ name: 'declared', handler }]);
  });

  it("decides an approval request through the approval kind's handlers, as the work item did", () => {
    const state = itemState([request('ap-aaaaaaaaaa'), request('ap-bbbbbbbbbb')]);
    const { item, events, touches } = itemOf(state);
    const calls: SetCall[] = [];
    const approval = workflowKind('approval')!;
    approval.installHandlers!({ ...item, setHandler: declaredHandlers(approval, recorder(calls)) });
    const signal = calls.find((call) => call.name === 'approval')!;
    const update = calls.find((call) => call.name === 'decideApproval')!;

    signal.handler({ id: 'ap-aaaaaaaaaa', decision: 'approve', by: 'ann', reason: 'fine' });
    expect(state.approvals![0]).toEqual(
      expect.objectContaining({ status: 'approved', decidedBy: 'ann', reason: 'fine' }),
    );
    expect(events).toEqual([
      { type: 'ApprovalDecided', message: 'publish: approval ap-aaaaaaaaaa approved by ann: fine' },
    ]);
    expect(touches()).toBe(1);

    signal.handler({ id: 'ap-aaaaaaaaaa', decision: 'reject' });
    expect(events[1]).toEqual(expect.objectContaining({ type: 'ApprovalInputRejected' }));
    expect(() => update.options!.validator!({ id: 'ap-zzzzzzzzzz', decision: 'reject' })).toThrow(
      'work item item-1 has no approval request ap-zzzzzzzzzz (pending: ap-bbbbbbbbbb)',
    );
    expect(update.handler({ id: 'ap-bbbbbbbbbb', decision: 'reject' })).toEqual({
      id: 'ap-bbbbbbbbbb',
      itemId: 'item-1',
      step: 'publish',
      status: 'rejected',
      decidedBy: 'anonymous',
    });
  });
});

describe("what the work item publishes for its kinds' decisions (publish)", () => {
  it('is given by every kind whose decisions the item holds, and only by those', () => {
    const row = (over: Partial<WorkflowStageKind>): WorkflowStageKind => ({
      name: 'odd',
      runAttempt: () => Promise.resolve({ outcome: 'completed', previousLog: null }),
      callsModels: false,
      messages: [],
      decisions: 'none',
      ...over,
    });
    expect(() => registerWorkflowKind(row({ decisions: 'item' }))).toThrow(
      `stage kind "odd" has decisions: 'item' but no publish hook`,
    );
    expect(() => registerWorkflowKind(row({ decisions: 'child', publish: () => undefined }))).toThrow(
      `stage kind "odd" has a publish hook but decisions: 'child'`,
    );
    expect(workflowKind('odd')).toBeUndefined();
    for (const name of workflowKindNames())
      expect([name, workflowKind(name)!.publish !== undefined]).toEqual([
        name,
        workflowKind(name)!.decisions === 'item',
      ]);
  });

  it('publishes nothing for an item that never had an approval request', () => {
    expect(kindPublications(itemState())).toEqual([]);
  });

  it('publishes the approval requests: pending ids, the TreadleApprovals attribute and the memo', () => {
    const pending = Array.from({ length: MAX_APPROVAL_IDS_ATTRIBUTE + 1 }, (_, i) => request(`ap-p${i}`));
    const state = itemState([request('ap-d1', 'approved'), ...pending, request('ap-d2', 'rejected')]);
    const [publication, ...others] = kindPublications(state);
    expect(others).toEqual([]);
    const pendingIds = pending.map((r) => r.id);
    expect(publication!.pending).toEqual(pendingIds);
    expect(publication!.attribute!.watched).toEqual(pendingIds.slice(0, MAX_APPROVAL_IDS_ATTRIBUTE));
    expect(publication!.attribute!.value()).toEqual({
      key: TreadleApprovals,
      value: pendingIds.slice(0, MAX_APPROVAL_IDS_ATTRIBUTE),
    });
    const memo = publication!.memo[APPROVALS_MEMO_KEY] as { requests: { id: string }[]; omitted: number };
    expect(memo.requests.map((r) => r.id)).toEqual(pendingIds.slice(0, 50));
    expect(memo.omitted).toBe(pendingIds.length - 50);
    expect(JSON.stringify(memo)).not.toContain('"payload"');
    // The Web UI's current details list the first 30 and count the rest.
    expect(publication!.details!.heading).toBe('Waiting for approval (treadle approve <id>):');
    expect(publication!.details!.lines.slice(0, 2)).toEqual([
      '- `ap-p0` **publish** task.create: create ap-p0',
      '- `ap-p1` **publish** task.create: create ap-p1',
    ]);
    expect(publication!.details!.lines.slice(30)).toEqual([`- … ${pendingIds.length - 30} more`]);
  });

  it('names decided requests newest first in the attribute, and clears the memo once none is pending', () => {
    const state = itemState([request('ap-d1', 'approved'), request('ap-p1'), request('ap-d2', 'rejected')]);
    const [publication] = kindPublications(state);
    expect(publication!.attribute!.value()).toEqual({ key: TreadleApprovals, value: ['ap-p1', 'ap-d2', 'ap-d1'] });
    state.approvals![1]!.status = 'expired';
    const [after] = kindPublications(state);
    expect(after!.pending).toEqual([]);
    expect(after!.attribute!.value().value).toEqual(['ap-d2', 'ap-p1', 'ap-d1']);
    expect(after!.memo).toEqual({ [APPROVALS_MEMO_KEY]: null });
    expect(after!.details).toBeUndefined();
  });
});
