import { checkCancel, describeCancel, recordCancel } from '../../src/engine/cancel';
import type { WorkItemState } from '../../src/model/state';
import { EXIT, exitCodeOf } from '../../src/cli/exit-codes';
import { MAX_TEXT_CHARS } from '../../src/model/limits';

describe('checkCancel (the cancelItem update)', () => {
  it('accepts a running or waiting item, with who and why trimmed', () => {
    for (const status of ['running', 'waiting_review', 'waiting_approval'] as const)
      expect(checkCancel('item-1', status, { by: ' ann ', reason: ' out of scope ' })).toEqual({
        ok: true,
        cancel: { by: 'ann', reason: 'out of scope' },
      });
  });

  it('records a cancel without a name as anonymous, and an empty reason as none', () => {
    expect(checkCancel('item-1', 'running', { reason: '   ' })).toEqual({ ok: true, cancel: { by: 'anonymous' } });
    expect(checkCancel('item-1', 'running', undefined)).toEqual({ ok: true, cancel: { by: 'anonymous' } });
  });

  it('refuses an item that has finished, saying how', () => {
    expect(checkCancel('item-1', 'completed', { by: 'ann' })).toEqual({
      ok: false,
      error: 'work item item-1 has already completed; there is nothing to cancel',
    });
    expect(checkCancel('item-1', 'failed', {})).toMatchObject({ ok: false, error: expect.stringContaining('failed') });
    expect(checkCancel('item-1', 'cancelled', {})).toMatchObject({
      ok: false,
      error: expect.stringContaining('already cancelled'),
    });
  });

  it('refuses a who or why that is not text', () => {
    expect(checkCancel('item-1', 'running', { by: 3 })).toMatchObject({
      ok: false,
      error: expect.stringContaining('"by" must be a non-empty string'),
    });
    expect(checkCancel('item-1', 'running', { by: '' })).toMatchObject({ ok: false });
    expect(checkCancel('item-1', 'running', { reason: ['x'] })).toMatchObject({
      ok: false,
      error: expect.stringContaining('"reason" must be a string'),
    });
  });

  it('cuts a long reason to the history text limit', () => {
    const checked = checkCancel('item-1', 'running', { reason: 'x'.repeat(MAX_TEXT_CHARS * 2) });
    expect(checked.ok && checked.cancel.reason!.length).toBe(MAX_TEXT_CHARS);
  });
});

it('describeCancel says who and why, or only that the item was cancelled', () => {
  expect(describeCancel({ by: 'ann', reason: 'out of scope' })).toBe('work item cancelled by ann: out of scope');
  expect(describeCancel({ by: 'ann' })).toBe('work item cancelled by ann');
  expect(describeCancel(undefined)).toBe('work item cancelled');
});

it('a cancelled item or TDD node exits 4, apart from failed (1)', () => {
  expect(EXIT.cancelled).toBe(4);
  expect(exitCodeOf('cancelled')).toBe(4);
  expect(exitCodeOf('CANCELLED')).toBe(4);
  expect(exitCodeOf('failed')).toBe(EXIT.failed);
  expect(exitCodeOf('terminated')).toBe(EXIT.failed);
});

it("recordCancel ends the item's pending approval requests and human requests cancelled, and leaves decided ones", () => {
  const state = {
    error: undefined,
    approvals: [{ status: 'pending' }, { status: 'approved' }],
    humanRequests: [
      { stage: 'sign_off', status: 'pending' },
      { stage: 'facts', status: 'responded' },
    ],
  } as unknown as WorkItemState;
  expect(recordCancel(state, { by: 'alice', reason: 'duplicate' })).toBe('work item cancelled by alice: duplicate');
  expect(state.approvals!.map((r) => r.status)).toEqual(['cancelled', 'approved']);
  expect(state.humanRequests!.map((r) => r.status)).toEqual(['cancelled', 'responded']);
  expect(state).toMatchObject({ cancelledBy: 'alice', cancelReason: 'duplicate' });
});
