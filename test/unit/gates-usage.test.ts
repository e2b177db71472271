/** Gate composition (all / any, merged feedback) and usage accounting with cost estimates. */
import { combineVerdicts, type NamedVerdict } from '../../src/engine/gates';
import { summarizeUsage, tokensSpent } from '../../src/engine/usage';
import { estimateCost } from '../../src/model/pricing';
import { gateLeaves } from '../../src/model/pipeline';
import { validatePipeline } from '../../src/kinds/pipeline';
import type { CallRecord } from '../../src/model/shapes';

const accepted = (gate: string): NamedVerdict => ({ gate, verdict: { kind: 'accepted' } });
const uncertain = (gate: string, reason: string): NamedVerdict => ({ gate, verdict: { kind: 'uncertain', reason } });
const rejected = (gate: string, summary: string, criterion: string, guidance?: unknown): NamedVerdict => ({
  gate,
  verdict: {
    kind: 'rejected',
    feedback: {
      summary,
      failedCriteria: [{ name: criterion, expected: 'x', actual: 'y', passed: false }],
      ...(guidance ? { guidance: guidance as never } : {}),
    },
  },
});

describe('all', () => {
  it('accepts only when every gate accepts', () => {
    expect(combineVerdicts('all', [accepted('a'), accepted('b')])).toEqual({ kind: 'accepted' });
  });
  it('rejects with every rejection merged, even next to an uncertain gate', () => {
    expect(
      combineVerdicts('all', [
        rejected('a', 'too short', 'length', { more: true }),
        uncertain('c', 'hmm'),
        rejected('b', 'no tables', 'tables'),
      ]),
    ).toEqual({
      kind: 'rejected',
      feedback: {
        summary: 'a: too short; b: no tables',
        failedCriteria: [expect.objectContaining({ name: 'length' }), expect.objectContaining({ name: 'tables' })],
        guidance: { a: { more: true } },
      },
    });
  });
  it('is uncertain when nothing rejects but a gate is unsure', () => {
    expect(combineVerdicts('all', [accepted('a'), uncertain('b', 'cannot tell')])).toEqual({
      kind: 'uncertain',
      reason: 'b: cannot tell',
    });
  });
  it("keeps a single rejection's feedback as it is", () => {
    const one = rejected('a', 'too short', 'length');
    expect(combineVerdicts('all', [accepted('b'), one])).toEqual(one.verdict);
  });
});

describe('any', () => {
  it('accepts when one gate accepts', () => {
    expect(combineVerdicts('any', [rejected('a', 'no', 'x'), accepted('b')])).toEqual({ kind: 'accepted' });
  });
  it('is uncertain before rejecting', () => {
    expect(combineVerdicts('any', [rejected('a', 'no', 'x'), uncertain('b', 'unsure')])).toEqual({
      kind: 'uncertain',
      reason: 'b: unsure',
    });
  });
  it('rejects with all feedback merged when every gate rejects', () => {
    const verdict = combineVerdicts('any', [rejected('a', 'no', 'x'), rejected('b', 'nope', 'y')]);
    expect(verdict).toEqual({
      kind: 'rejected',
      feedback: {
        summary: 'a: no; b: nope',
        failedCriteria: [expect.objectContaining({ name: 'x' }), expect.objectContaining({ name: 'y' })],
      },
    });
  });
});

it('composed gates validate in YAML form and name their implementations', () => {
  const result = validatePipeline(
    {
      name: 'g',
      stages: [
        {
          name: 's',
          run: 'scripted',
          gate: { all: ['scripted', { any: [{ run: 'llm-judge', with: { criteria: [] } }, 'scripted'] }] },
        },
      ],
    },
    { stages: ['scripted'], gates: ['scripted'] },
  );
  expect(result.ok).toBe(false);
  expect((result as { problems: string[] }).problems).toEqual([
    'stage s: unknown gate implementation "llm-judge" (registered: scripted)',
  ]);
  const ok = validatePipeline({
    name: 'g',
    stages: [
      { name: 's', run: 'scripted', gate: { all: ['scripted', { any: [{ run: 'scripted', with: { n: 1 } }] }] } },
    ],
  });
  expect(ok.ok && gateLeaves(ok.spec.stages[0]!.gate)).toEqual([
    { run: 'scripted' },
    { run: 'scripted', with: { n: 1 } },
  ]);
  expect(
    (
      validatePipeline({ name: 'g', stages: [{ name: 's', run: 'scripted', gate: { all: [] } }] }) as {
        problems: string[];
      }
    ).problems,
  ).toEqual(['stages[0] (s).gate.all: needs at least one gate']);
});

const call = (over: Partial<CallRecord>): CallRecord => ({
  correlationId: 'i/s/1',
  provider: 'anthropic',
  model: 'claude-sonnet-4-5',
  promptHash: 'sha256:00',
  inputTokens: 1000,
  outputTokens: 200,
  cacheReadTokens: 0,
  latencyMs: 1500,
  status: 'success',
  at: '2026-01-01T00:00:00.000Z',
  ...over,
});

it('sums usage per stage and in total, with estimated costs', () => {
  const stages = {
    draft: {
      attempts: [
        { attempt: 1, startedAt: '', calls: [call({}), call({ status: 'error', outputTokens: 0 })] },
        { attempt: 2, startedAt: '', calls: [call({ cacheReadTokens: 500 })] },
      ],
    },
    local: { attempts: [{ attempt: 1, startedAt: '' }] },
    offline: { attempts: [{ attempt: 1, startedAt: '', calls: [call({ provider: 'scripted', model: 'scripted' })] }] },
  };
  const usage = summarizeUsage(stages);
  expect(usage.stages.draft).toEqual({
    calls: 3,
    errors: 1,
    inputTokens: 3000,
    outputTokens: 400,
    cacheReadTokens: 500,
    latencyMs: 4500,
    estimatedCostUsd: 0.01515,
  });
  expect(usage.stages.local).toEqual({
    calls: 0,
    errors: 0,
    inputTokens: 0,
    outputTokens: 0,
    cacheReadTokens: 0,
    latencyMs: 0,
    estimatedCostUsd: 0,
  });
  expect(usage.stages.offline!.estimatedCostUsd).toBe(0);
  expect(usage.total.calls).toBe(4);
  expect(tokensSpent(stages)).toBe(4000 + 600);
  expect(estimateCost(call({ model: 'some-unknown-model' }))).toBeNull();
  expect(
    summarizeUsage({ x: { attempts: [{ attempt: 1, startedAt: '', calls: [call({ model: 'mystery' })] }] } }).total
      .estimatedCostUsd,
  ).toBeNull();
});
