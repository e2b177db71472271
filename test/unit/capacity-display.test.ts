/**
 * How model capacity is shown (issue 39): `treadle limits`' table, a limiter's scope read from its workflow id,
 * the status line of a call waiting for capacity and the stage it is put under, and `treadle status`'s text.
 */
import { limiterScopeOf, capacityWaitLine } from '../../src/client/capacity';
import { withStages, type ActivityCapacityWait } from '../../src/client/capacity-waits';
import { describeBinding, describeWaiting, renderLimits } from '../../src/cli/limits';
import { renderStatus } from '../../src/cli/render';
import type { UsageSnapshot } from '../../src/capacity/shapes';
import type { WorkItemState } from '../../src/model/state';

const busy: UsageSnapshot = {
  at: Date.parse('2026-12-06T14:05:00Z'),
  inFlight: 8,
  concurrency: { used: 8, limit: 8, configured: 8 },
  tokensPerMinute: { used: 41_000, limit: 60_000, configured: 60_000 },
  waiting: [
    { priority: 1, fairnessKey: 'acme', calls: 2, binds: 'concurrency' },
    { priority: 3, fairnessKey: '', calls: 3, binds: 'concurrency' },
  ],
  holders: 2,
};

describe('treadle limits', () => {
  it('reads provider, model and key id from the limiter id, a model with colons whole', () => {
    expect(limiterScopeOf('treadle-limiter:anthropic:claude-sonnet-4-6:ab12cd34')).toEqual({
      provider: 'anthropic',
      model: 'claude-sonnet-4-6',
      keyId: 'ab12cd34',
    });
    expect(limiterScopeOf('treadle-limiter:bedrock:anthropic.claude:v1:k')).toEqual({
      provider: 'bedrock',
      model: 'anthropic.claude:v1',
      keyId: 'k',
    });
  });

  it('shows the calls waiting by priority and fairness key, and what binds', () => {
    expect(describeWaiting(busy.waiting)).toBe('5 (priority 1 acme: 2, priority 3: 3)');
    expect(describeWaiting([])).toBe('');
    expect(describeBinding({ ...busy, waiting: [...busy.waiting, { ...busy.waiting[0]!, binds: 'throttle' }] })).toBe(
      'concurrency, throttle',
    );
  });

  it('prints one row per limiter, its use whole in the last column; a limiter with no answer says why', () => {
    const text = renderLimits([
      { workflowId: 'w1', provider: 'anthropic', model: 'claude-sonnet-4-6', keyId: 'ab12cd34', usage: busy },
      {
        workflowId: 'w2',
        provider: 'anthropic',
        model: '*',
        keyId: 'ab12cd34',
        usage: {
          at: 1_000,
          inFlight: 0,
          requestsPerMinute: { used: 3, limit: 25, configured: 50 },
          throttle: { until: 11_000, ratePercent: 50 },
          waiting: [],
          holders: 1,
        },
      },
      { workflowId: 'w3', provider: 'anthropic', model: 'm', keyId: 'k', error: 'no worker answered' },
    ]);
    const [header, sonnet, star, dead] = text.split('\n');
    expect(header).toMatch(/^PROVIDER\s+MODEL\s+KEY\s+WAITING\s+BINDS\s+IN USE$/);
    expect(sonnet).toMatch(
      /^anthropic\s+claude-sonnet-4-6\s+ab12cd34\s+5 \(priority 1 acme: 2, priority 3: 3\)\s+concurrency\s+8\/8 calls in flight, 41k\/60k tokens this minute$/,
    );
    expect(star).toContain('0 calls in flight, 3/25 requests this minute, paused by the provider for 10s');
    expect(dead).toContain('no answer: no worker answered');
  });
});

describe('a call waiting for capacity', () => {
  const wait = {
    scope: 'anthropic/claude-sonnet-4-6',
    waitingFor: '8/8 calls in flight, 41k/60k tokens this minute',
    since: '2026-12-06T14:02:10.123Z',
  };
  const now = new Date('2026-12-06T14:05:00Z');

  it('is one line with the model, what holds it and since when (UTC; the date too when not today)', () => {
    expect(capacityWaitLine(wait, now)).toBe(
      'waiting for claude-sonnet-4-6: 8/8 calls in flight, 41k/60k tokens this minute (since 14:02:10 UTC)',
    );
    expect(capacityWaitLine(wait, new Date('2026-12-07T00:00:01Z'))).toContain('(since 2026-12-06 14:02:10 UTC)');
  });

  const line: ActivityCapacityWait = { ...wait, activityType: 'anthropic', activityId: '3', line: 'waiting …' };
  const stage = (status: string) => ({ status, attempts: [] }) as unknown as WorkItemState['stages'][string];

  it('goes under the stage when one stage runs, else under its activity type', () => {
    expect(withStages([line], { stages: { plan: stage('completed'), write: stage('running') } })[0]!.stage).toBe(
      'write',
    );
    expect(withStages([line], { stages: { a: stage('running'), b: stage('running') } })[0]!.stage).toBeUndefined();
  });

  it('is a line of treadle status under the stage table', () => {
    const state = {
      id: 'item-1',
      pipeline: 'docs',
      status: 'running',
      stages: { write: stage('running') },
      pendingReviews: [],
      events: [],
    } as unknown as WorkItemState;
    const text = renderStatus(state, [], {}, [{ ...line, stage: 'write', line: capacityWaitLine(wait, now) }]);
    expect(text).toContain(
      '\n  write: waiting for claude-sonnet-4-6: 8/8 calls in flight, 41k/60k tokens this minute (since 14:02:10 UTC)',
    );
    expect(renderStatus(state)).not.toContain('waiting for');
  });
});
