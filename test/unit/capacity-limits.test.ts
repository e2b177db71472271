/**
 * src/capacity/limits.ts: the limits file. Cases:
 * - a YAML file with every field parses to the canonical form (camelCase, lease in ms, default key and lease);
 * - every problem of a bad file is listed at once, each with its path and a fix;
 * - duplicates, a limit with no numbers, a provider Treadle does not call, a key that looks like a secret;
 * - limitFor picks the model's own limit over the provider's `*`, per key; describeUsage reads as a status line;
 * - the file as text (worker/limits-file.ts): YAML and JSON alike, problems with the file and the line.
 */
import { parse } from 'yaml';
import { describeUsage, limitFor, parseLimits } from '../../src/capacity/limits';
import { parseLimitsText, readLimitsFile } from '../../src/capacity/worker/limits-file';

const FILE = `
limits:
  - provider: anthropic
    model: claude-sonnet-4-5
    concurrency: 8
    tokens_per_minute: 60000
    lease: 30s
  - provider: anthropic
    model: "*"
    key: TEAM_B_ANTHROPIC_KEY
    requests_per_minute: 50
    input_tokens_per_minute: 40000
    output_tokens_per_minute: 8000
fairness:
  weights: { acme: 3 }
  default_weight: 1
`;

describe('the limits file', () => {
  it('parses to the canonical form with defaults filled in', () => {
    const result = parseLimits(parse(FILE));
    expect(result).toEqual({
      ok: true,
      limits: {
        limits: [
          {
            provider: 'anthropic',
            model: 'claude-sonnet-4-5',
            key: 'ANTHROPIC_API_KEY',
            concurrency: 8,
            tokensPerMinute: 60_000,
            leaseMs: 30_000,
          },
          {
            provider: 'anthropic',
            model: '*',
            key: 'TEAM_B_ANTHROPIC_KEY',
            requestsPerMinute: 50,
            inputTokensPerMinute: 40_000,
            outputTokensPerMinute: 8_000,
            leaseMs: 60_000,
          },
        ],
        fairness: { weights: { acme: 3 }, defaultWeight: 1 },
      },
    });
  });

  it('an empty file limits nothing', () => {
    expect(parseLimits(null)).toEqual({
      ok: true,
      limits: { limits: [], fairness: { weights: {}, defaultWeight: 1 } },
    });
  });

  it('lists every problem with its path and a fix', () => {
    const result = parseLimits({
      limits: [
        { provider: 'anthropic', model: 'm', concurency: 8 },
        { provider: 'anthropic', model: 'm2', concurrency: 0, tokens_per_minute: 1.5, lease: 'soon' },
        { model: 'x', concurrency: 2 },
      ],
      fairness: { weights: { acme: -1 }, default_weigth: 2 },
      limit: [],
    });
    expect(result.ok).toBe(false);
    const problems = result.ok ? [] : result.problems;
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^limits\.0\.concurency: unknown field \(did you mean "concurrency"\?\)/),
        expect.stringMatching(/^limits\.0: sets no limit; give at least one of concurrency/),
        'limits.1.concurrency: must be 1 or more',
        'limits.1.tokens_per_minute: must be a whole number',
        expect.stringMatching(/^limits\.1\.lease: "soon" is not a duration \(use e\.g\. 500ms, 30s/),
        'limits.2.provider: required: the provider whose calls are limited, e.g. anthropic',
        'fairness.weights.acme: must be more than 0',
        expect.stringMatching(/^fairness\.default_weigth: unknown field \(did you mean "default_weight"\?\)/),
        expect.stringMatching(/^limit: unknown field \(did you mean "limits"\?\)/),
      ]),
    );
    expect(problems).toHaveLength(9);
  });

  it('refuses a limit that limits nothing, a provider Treadle does not call, a key given as a secret', () => {
    const result = parseLimits({
      limits: [
        { provider: 'anthropic', model: 'a' },
        { provider: 'claude-code', model: 'b', key: 'ANTHROPIC_API_KEY', concurrency: 1 },
        { provider: 'anthropic', model: 'c', key: 'sk-ant-123', concurrency: 1 },
      ],
    });
    expect(result.ok ? [] : result.problems).toEqual([
      expect.stringMatching(/^limits\.0: sets no limit; give at least one of concurrency, requests_per_minute/),
      'limits.1.provider: must be one of anthropic: the providers whose calls Treadle makes itself (claude-code sessions and scripted replies are not limited)',
      'limits.2.key: must name an environment variable (e.g. ANTHROPIC_API_KEY), not hold a key',
    ]);
  });

  it('refuses two limits for the same scope, and a lease under a second', () => {
    const dup = parseLimits({
      limits: [
        { provider: 'anthropic', model: '*', concurrency: 1 },
        { provider: 'anthropic', model: '*', key: 'ANTHROPIC_API_KEY', concurrency: 2 },
      ],
    });
    expect(dup.ok ? [] : dup.problems).toEqual([
      'limits.1: repeats limits.0 (provider anthropic, model *, key ANTHROPIC_API_KEY); merge them into one',
    ]);
    const short = parseLimits({ limits: [{ provider: 'anthropic', model: '*', concurrency: 1, lease: 500 }] });
    expect(short.ok ? [] : short.problems).toEqual([
      'limits.0.lease: must be at least 1s (a renewal must have time to arrive)',
    ]);
  });
});

describe('limitFor and describeUsage', () => {
  const result = parseLimits(parse(FILE));
  const limits = result.ok ? result.limits : { limits: [], fairness: { weights: {}, defaultWeight: 1 } };

  it("picks the model's own limit, else the provider's *, for the key in use", () => {
    expect(limitFor(limits, 'anthropic', 'claude-sonnet-4-5')?.concurrency).toBe(8);
    expect(limitFor(limits, 'anthropic', 'claude-haiku')).toBeUndefined();
    expect(limitFor(limits, 'anthropic', 'claude-haiku', 'TEAM_B_ANTHROPIC_KEY')?.requestsPerMinute).toBe(50);
    expect(limitFor(limits, 'other', 'claude-sonnet-4-5')).toBeUndefined();
  });

  it('reads as a status line', () => {
    const text = describeUsage({
      at: 1_000,
      inFlight: 8,
      concurrency: { used: 8, limit: 8, configured: 8 },
      tokensPerMinute: { used: 41_200, limit: 60_000, configured: 60_000 },
      waiting: [],
      holders: 3,
    });
    expect(text).toBe('8/8 calls in flight, 41k/60k tokens this minute');
    expect(
      describeUsage({ at: 0, inFlight: 2, throttle: { until: 5_000, ratePercent: 50 }, waiting: [], holders: 1 }),
    ).toBe('2 calls in flight, paused by the provider for 5s');
  });
});

describe('the limits file as text', () => {
  it('reads YAML and JSON alike', () => {
    const yaml = parseLimitsText(FILE, 'limits.yaml');
    const json = parseLimitsText(JSON.stringify(parse(FILE)), 'limits.json');
    expect(yaml.ok && json.ok && yaml.limits).toEqual(json.ok && json.limits);
  });

  it("names the file and each problem's line", () => {
    const text = 'limits:\n  - provider: anthropic\n    model: m\n    concurrency: 0\nfairness:\n  weights: { a: x }\n';
    expect(parseLimitsText(text, 'limits.yaml')).toEqual({
      ok: false,
      problems: [
        'limits.yaml (line 4): limits.0.concurrency: must be 1 or more',
        expect.stringMatching(/^limits\.yaml \(line 6\): fairness\.weights\.a: /),
      ],
    });
    expect(parseLimitsText('limits: [', 'limits.yaml')).toEqual({
      ok: false,
      problems: [expect.stringMatching(/^limits\.yaml: line \d+: /)],
    });
  });

  it('a file that cannot be read is one problem naming it', () => {
    expect(readLimitsFile('/nonexistent/limits.yaml')).toEqual({
      ok: false,
      problems: [expect.stringMatching(/^\/nonexistent\/limits\.yaml: cannot be read \(.*\); check the path$/)],
    });
  });
});
