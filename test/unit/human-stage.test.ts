/**
 * The `human` stage kind (issue 40) without a server: its spec checks (an output_schema is required, `with:` takes
 * instructions and reviewers), the checks of a person's response (the stage must be waiting, the attempt the one
 * waiting), its handler on the work item and what the item publishes for a waiting request.
 */
import type { setHandler } from '@temporalio/workflow';
import { validatePipeline } from '../../src/kinds/pipeline';
import type { HumanRequest, WorkItemState } from '../../src/model/state';
import type { EventType } from '../../src/model/shapes';
import { declaredHandlers, kindPublications, workflowKind } from '../../src/kinds/workflow-table';
import { HUMAN_MEMO_KEY, MAX_INLINE_HUMAN_OUTPUT_BYTES, checkHumanResponse } from '../../src/kinds/human/shapes';
import { answerProblem } from '../../src/client/decide';
import { renderHumanRequests } from '../../src/cli/render';
import { checkReview } from '../../src/engine/review';

const SCHEMA = { type: 'object', required: ['approved'], properties: { approved: { type: 'boolean' } } };

function spec(stage: Record<string, unknown>) {
  return {
    name: 'p',
    stages: [
      { name: 'draft', run: 'scripted' },
      { name: 'sign_off', depends_on: ['draft'], ...stage },
    ],
  };
}

function pending(stage = 'sign_off', attempt = 1): HumanRequest {
  return { stage, attempt, status: 'pending', requestedAt: '2026-12-06T10:00:00.000Z' };
}

function itemState(humanRequests?: HumanRequest[]): WorkItemState {
  return {
    id: 'item-1',
    pipeline: 'p',
    status: 'running',
    stages: Object.create(null) as WorkItemState['stages'],
    pendingReviews: [],
    events: [],
    eventCount: 0,
    startedAt: '2026-12-06T10:00:00.000Z',
    ...(humanRequests ? { humanRequests } : {}),
  };
}

describe('a human stage in a spec', () => {
  it('needs an output_schema, listed with the other problems', () => {
    const result = validatePipeline(spec({ run: 'human', with: { instructions: 'Sign it off', colour: 'red' } }));
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^stage sign_off: output_schema: required for run: human/),
        'stage sign_off: with.colour: unknown field; a human stage takes instructions and reviewers',
      ]),
    );
  });

  it('validates with an output_schema and optional instructions and reviewers', () => {
    const result = validatePipeline(
      spec({ run: 'human', output_schema: SCHEMA, with: { instructions: 'Sign it off', reviewers: 'legal' } }),
    );
    expect(result.ok ? [] : result.problems).toEqual([]);
  });

  it('refuses empty instructions and reviewers, naming the fix', () => {
    const result = validatePipeline(
      spec({ run: 'human', output_schema: SCHEMA, with: { instructions: '', reviewers: ' ' } }),
    );
    expect(result.ok ? [] : result.problems).toEqual([
      'stage sign_off: with.instructions: must be text saying what the person should supply',
      'stage sign_off: with.reviewers: must name a reviewer group, e.g. legal',
    ]);
  });
});

describe("a person's response", () => {
  const requests = [pending('sign_off', 2)];

  it('is refused for a stage that does not wait, naming the stages that do', () => {
    expect(checkHumanResponse(requests, 'item-1', { stage: 'draft', attempt: 1, output: {}, by: 'ann' })).toEqual({
      ok: false,
      error: "stage draft of item-1 is not waiting for a person's output (waiting: sign_off)",
    });
  });

  it('is refused for another attempt, saying which one waits', () => {
    expect(checkHumanResponse(requests, 'item-1', { stage: 'sign_off', attempt: 1, output: {}, by: 'ann' })).toEqual({
      ok: false,
      error: 'stage sign_off of item-1 waits for attempt 2, not 1: answer attempt 2',
    });
  });

  it('needs exactly one of output and outputRef, a blob reference, and a small inline output', () => {
    const base = { stage: 'sign_off', attempt: 2, by: 'ann' };
    const error = (payload: object) => {
      const checked = checkHumanResponse(requests, 'item-1', { ...base, ...payload });
      return checked.ok ? undefined : checked.error;
    };
    expect(error({})).toMatch(/exactly one/);
    expect(error({ output: {}, outputRef: { ref: 'sha256:ab' } })).toMatch(/exactly one/);
    expect(error({ outputRef: { ref: 'elsewhere' } })).toMatch(/^outputRef: must be a blob reference/);
    expect(error({ output: 'x'.repeat(MAX_INLINE_HUMAN_OUTPUT_BYTES) })).toMatch(/send outputRef/);
    expect(error({ reject: ' ' })).toBe('reject: must say why the stage fails');
    expect(error({ output: { approved: true } })).toBeUndefined();
    expect(error({ outputRef: { ref: 'sha256:ab', bytes: 3, summary: 's' } })).toBeUndefined();
  });

  it('needs the output to respond (the client checks before sending)', () => {
    expect(answerProblem('human', { action: 'respond' })).toBe('respond needs the output');
    expect(answerProblem('human', { action: 'reject' })).toBe('reject needs a reason');
    expect(answerProblem('human', { action: 'approve' })).toBe('human decisions take respond, reject, not approve');
    expect(answerProblem('human', { action: 'respond', artefact: { approved: true } })).toBeUndefined();
  });
});

describe("the human kind's part of the work item", () => {
  type Handler = (...args: unknown[]) => unknown;
  interface SetCall {
    name: string;
    handler: Handler;
    options?: { validator?: (payload: unknown) => void };
  }

  it('answers the waiting attempt through respondHuman, and refuses a stage that does not wait', () => {
    const state = itemState([pending()]);
    const events: { type: EventType; message: string }[] = [];
    let touches = 0;
    const calls: SetCall[] = [];
    const set = ((definition: { name: string }, handler: Handler, options?: SetCall['options']) =>
      void calls.push({
        name: definition.name,
        handler,
        ...(options ? { options } : {}),
      })) as unknown as typeof setHandler;
    const kind = workflowKind('human')!;
    kind.installHandlers!({
      state,
      itemId: 'item-1',
      emit: (type, message) => void events.push({ type, message }),
      touch: () => void touches++,
      setHandler: declaredHandlers(kind, set),
    });
    const [update] = calls;
    expect(update!.name).toBe('respondHuman');
    expect(() => update!.options!.validator!({ stage: 'nope', attempt: 1, output: {}, by: 'ann' })).toThrow(
      "stage nope of item-1 is not waiting for a person's output (waiting: sign_off)",
    );
    expect(update!.handler({ stage: 'sign_off', attempt: 1, output: { approved: true }, by: 'ann' })).toEqual({
      itemId: 'item-1',
      stage: 'sign_off',
      attempt: 1,
      outcome: 'responded',
      by: 'ann',
    });
    expect(state.humanRequests![0]).toEqual(expect.objectContaining({ status: 'responded', respondedBy: 'ann' }));
    expect(events).toEqual([{ type: 'HumanResponded', message: 'sign_off: output supplied by ann (attempt 1)' }]);
    expect(touches).toBe(1);
  });

  it('publishes a waiting request: its stage among the pending ones, the memo and the details', () => {
    expect(kindPublications(itemState())).toEqual([]);
    const state = itemState([{ ...pending('sign_off', 2), reviewers: 'legal', feedback: 'missing the date' }]);
    const [publication] = kindPublications(state);
    expect(publication!.stages).toEqual(['sign_off']);
    expect(publication!.pending).toEqual(['human:sign_off:2']);
    expect(publication!.memo[HUMAN_MEMO_KEY]).toEqual({ pipeline: 'p', requests: state.humanRequests });
    expect(publication!.details!.lines).toEqual(['- **sign_off** attempt 2 (legal): the gate said missing the date']);
    state.humanRequests![0]!.status = 'responded';
    const [after] = kindPublications(state);
    expect(after).toEqual({ pending: [], stages: [], memo: { [HUMAN_MEMO_KEY]: null } });
  });
});

describe('a review or status of a human stage', () => {
  const waiting = {
    id: 'item-1',
    stages: { sign_off: { status: 'waiting_review', attempts: [] }, draft: { status: 'completed', attempts: [] } },
    pendingReviews: [],
    humanRequests: [{ stage: 'sign_off', status: 'pending' }],
  };

  it('a review naming a stage that waits for a person is pointed at treadle respond', () => {
    expect(checkReview(waiting, { stage: 'sign_off', outcome: { kind: 'approve' }, reviewer: 'lee' })).toEqual({
      ok: false,
      error:
        'stage "sign_off" of work item item-1 waits for a person\'s output, not a review: give it with treadle respond item-1 sign_off --output @output.json (or --reject <reason>), or TreadleClient.respond',
    });
    // Any other stage keeps the usual answer.
    expect(checkReview(waiting, { stage: 'draft', outcome: { kind: 'approve' }, reviewer: 'lee' })).toEqual({
      ok: false,
      error:
        'stage "draft" of work item item-1 is not waiting for review (it is completed); no stage is waiting for review',
    });
  });

  it("treadle status lists what the person is asked, the gate's word, the deadline and the command", () => {
    const requests: HumanRequest[] = [
      {
        stage: 'sign_off',
        attempt: 2,
        status: 'pending',
        requestedAt: '2026-01-07T10:00:00.000Z',
        instructions: 'Sign it off',
        reviewers: 'leads',
        feedback: 'missing signed_by',
        dueAt: '2026-01-07T10:05:00.000Z',
        escalated: { to: 'leads', from: 'legal', at: '2026-01-07T10:05:00.000Z' },
      },
    ];
    expect(renderHumanRequests('item-1', requests).split('\n')).toEqual([
      "Waiting for a person's output:",
      '  sign_off (attempt 2 for leads): Sign it off',
      '    the gate said: missing signed_by',
      '    overdue since 2026-01-07T10:05:00.000Z, handed to leads from legal',
      '    treadle respond item-1 sign_off --output @output.json | --reject REASON',
    ]);
  });
});
