/**
 * src/capacity/messages.ts: what the limiter accepts from workers. Cases: a well-formed acquire passes; each
 * malformed field is named; release and renew signals (which have no validator) are checked the same way.
 */
import { demandProblem, leasesProblem, validateAcquire } from '../../src/capacity/messages';
import type { AcquireInput, DemandEntry } from '../../src/capacity/shapes';

const entry: DemandEntry = { priority: 1, fairnessKey: 'acme', weight: 2, calls: 3, inputTokens: 10, outputTokens: 20 };

describe('acquire and demand', () => {
  it('accepts a well-formed request, with or without a wait', () => {
    expect(() => validateAcquire({ holder: 'w1', demand: [entry] })).not.toThrow();
    expect(() => validateAcquire({ holder: 'w1', demand: [], waitMs: 0 })).not.toThrow();
    expect(() =>
      validateAcquire({ holder: 'w1', demand: [], limits: { concurrency: 3, tokensPerMinute: 9, leaseMs: 5_000 } }),
    ).not.toThrow();
  });

  it.each([
    [{ holder: '', demand: [] }, /holder: must be a name/],
    [{ holder: 'w', demand: 'x' }, /demand: must be a list of at most 100 entries/],
    [{ holder: 'w', demand: [{ ...entry, priority: 0 }] }, /demand\.0\.priority: must be a whole number from 1 to 5/],
    [{ holder: 'w', demand: [entry, { ...entry, weight: 0 }] }, /demand\.1\.weight: must be more than 0/],
    [{ holder: 'w', demand: [{ ...entry, calls: -1 }] }, /demand\.0\.calls: must be a whole number/],
    [{ holder: 'w', demand: [{ ...entry, outputTokens: 1.5 }] }, /demand\.0\.outputTokens: must be a whole number/],
    [{ holder: 'w', demand: [{ ...entry, fairnessKey: 7 }] }, /demand\.0\.fairnessKey: must be a string/],
    [{ holder: 'w', demand: [], waitMs: 60_000 }, /waitMs: must be from 0 to 10000/],
    [{ holder: 'w', demand: [], limits: { concurrency: 2 } }, /acquire: limits\.leaseMs: must be at least 1000/],
    [{ holder: 'w', demand: [], limits: { leaseMs: 5_000, concurrency: 0 } }, /limits\.concurrency: must be a whole/],
    [{ holder: 'w', demand: [], limits: { leaseMs: 5_000, provider: 'x' } }, /limits\.provider: is not a limit/],
  ])('refuses %j', (input, message) => {
    expect(() => validateAcquire(input as unknown as AcquireInput)).toThrow(message);
  });

  it('checks a demand signal the same way', () => {
    expect(demandProblem({ holder: 'w', demand: [entry] })).toBeUndefined();
    expect(demandProblem(null)).toBe('must be an object { holder, demand }');
  });
});

describe('release and renew', () => {
  it('accepts lease lists with or without usage', () => {
    expect(
      leasesProblem(
        { holder: 'w', releases: [{ leaseId: 'L1' }, { leaseId: 'L2', usage: { inputTokens: 1, outputTokens: 2 } }] },
        'releases',
      ),
    ).toBeUndefined();
    expect(leasesProblem({ holder: 'w', leaseIds: ['L1'] }, 'leaseIds')).toBeUndefined();
  });

  it('names what is wrong', () => {
    expect(leasesProblem({ releases: [] }, 'releases')).toBe('holder: must be a name');
    expect(leasesProblem({ holder: 'w', releases: [{ leaseId: 3 }] }, 'releases')).toBe(
      'releases: every lease id must be a name',
    );
    expect(
      leasesProblem(
        { holder: 'w', releases: [{ leaseId: 'L1', usage: { inputTokens: -1, outputTokens: 0 } }] },
        'releases',
      ),
    ).toMatch(/usage must be/);
    expect(leasesProblem({ holder: 'w', leaseIds: new Array(1_001).fill('L') }, 'leaseIds')).toMatch(/at most 1000/);
  });
});
