/** Pipeline validation (every problem at once), the builder, YAML equivalence and durations. */
import YAML from 'yaml';
import { pipeline } from '../../src/kinds/builder';
import { formatDuration, parseDuration } from '../../src/model/duration';
import { PipelineValidationError } from '../../src/model/pipeline';
import { validatePipeline } from '../../src/kinds/pipeline';
import { checkApprovalStageConfig } from '../../src/kinds/approval/spec';

const known = { stages: ['scripted', 'llm'], gates: ['scripted'] };

it('reports every problem at once: unknown dependency, cycle, implementations, durations, max_attempts', () => {
  const raw = YAML.parse(`
name: broken
stages:
  - name: a
    run: scripted
    depends_on: [c]
  - name: b
    run: scriptd
    gate: nope
    depends_on: [a, ghost]
    retry_budget: { max_attempts: 0, delay: soon, attempt_timeout: 30x }
  - name: c
    run: scripted
    depends_on: [b]
    review_policy: sometimes
`);
  const result = validatePipeline(raw, known);
  expect(result.ok).toBe(false);
  const problems = (result as { problems: string[] }).problems;
  expect(problems).toEqual(
    expect.arrayContaining([
      'stages[1] (b).retry_budget.max_attempts: must be at least 1 (it includes the first attempt)',
      'stages[1] (b).retry_budget.delay: "soon" is not a duration (use e.g. 500ms, 30s, 5m, 2h, 1d or 1m30s)',
      'stages[1] (b).retry_budget.attempt_timeout: "30x" is not a duration (use e.g. 500ms, 30s, 5m, 2h, 1d or 1m30s)',
      'stage b: depends on unknown stage "ghost" (the stages are: a, b, c)',
      'dependency cycle: a -> b -> c -> a; remove one of these depends_on',
      'stage b: unknown stage implementation "scriptd" (did you mean "scripted"?) (registered: scripted, llm)',
      'stage b: unknown gate implementation "nope" (registered: scripted)',
    ]),
  );
  expect(problems.some((p) => p.startsWith('stages[2] (c).review_policy:'))).toBe(true);
  expect(problems).toHaveLength(8);
});

it('rejects duplicates, self-dependencies, unknown keys and empty pipelines', () => {
  const result = validatePipeline({
    name: 'x',
    stages: [
      { name: 'a', run: 'scripted', depends_on: ['a'], colour: 'red' },
      { name: 'a', run: 'scripted' },
    ],
  });
  expect((result as { problems: string[] }).problems).toEqual(
    expect.arrayContaining([
      'stages[1] (a): duplicate stage name, first used at stages[0]; rename one',
      'stage a: depends on itself; remove it from its depends_on',
      expect.stringMatching(
        /^stages\[0\] \(a\)\.colour: unknown field; the fields here are: name, description, type, run, max_retries, /,
      ),
    ]),
  );
  expect((validatePipeline({ name: 'x', stages: [] }) as { problems: string[] }).problems).toEqual([
    'stages: a pipeline needs at least one stage',
  ]);
  expect(validatePipeline('nonsense').ok).toBe(false);
});

it('the builder and the YAML form produce the same canonical spec', () => {
  const built = pipeline('review-demo')
    .stage('draft', 'scripted')
    .stage('publish', 'scripted')
    .qualityGate('draft', 'scripted')
    .retryBudget('draft', { maxAttempts: 3, delay: '0s', attemptTimeout: '30s', onExhausted: 'escalate' })
    .reviewPolicy('draft', 'on_escalation')
    .reviewPolicy('publish', 'always')
    .dependency('publish', 'draft')
    .build(known);
  const yaml = validatePipeline(
    YAML.parse(`
name: review-demo
stages:
  - name: draft
    run: scripted
    gate: scripted
    retry_budget: { max_attempts: 3, delay: 0s, attempt_timeout: 30s, on_exhausted: escalate }
    review_policy: on_escalation
  - name: publish
    run: scripted
    depends_on: [draft]
    review_policy: always
`),
    known,
  );
  expect(yaml).toEqual({ ok: true, spec: built });
  expect(built.stages[0]!.retryBudget).toEqual({
    maxAttempts: 3,
    delayMs: 0,
    attemptTimeoutMs: 30_000,
    onExhausted: 'escalate',
  });
  // The activity's own timeout comes after the attempt timer, which cancels and waits for it.
  expect(built.stages[0]!.activity.startToCloseTimeoutMs).toBe(30_000 + 30_000);
  expect(built.stages[1]).toEqual(
    expect.objectContaining({ dependsOn: ['draft'], reviewPolicy: 'always', gate: null }),
  );
});

it('keeps with: payloads verbatim while camelising spec keys', () => {
  const result = validatePipeline({
    name: 'p',
    stages: [
      {
        name: 's',
        run: 'scripted',
        with: { max_tokens: 5, nested: { snake_key: 1 } },
        gate: { run: 'scripted', with: { min_word_count: 3 } },
      },
    ],
  });
  expect(result.ok && result.spec.stages[0]!.with).toEqual({ max_tokens: 5, nested: { snake_key: 1 } });
  expect(result.ok && result.spec.stages[0]!.gate).toEqual({ run: 'scripted', with: { min_word_count: 3 } });
});

it('the builder reports calls naming undeclared stages together with spec problems', () => {
  const build = () =>
    pipeline('p').stage('a', 'scripted').reviewPolicy('ghost', 'always').dependency('a', 'missing').build();
  expect(build).toThrow(PipelineValidationError);
  try {
    build();
  } catch (error) {
    expect((error as PipelineValidationError).problems).toEqual([
      'reviewPolicy("ghost", …): no stage named "ghost" was declared with .stage()',
      'stage a: depends on unknown stage "missing" (the stages are: a)',
    ]);
  }
});

it('refuses zero timeouts, which Temporal would read as none', () => {
  const result = validatePipeline({
    name: 'z',
    stages: [
      {
        name: 'a',
        run: 'scripted',
        retry_budget: { attempt_timeout: 0, delay: 0 },
        review_ttl: '0s',
        activity: { heartbeat_timeout: 0 },
      },
    ],
  });
  expect((result as { problems: string[] }).problems).toEqual([
    'stages[0] (a).retry_budget.attempt_timeout: must be longer than 0',
    'stages[0] (a).review_ttl: must be longer than 0',
    'stages[0] (a).activity.heartbeat_timeout: must be longer than 0',
  ]);
});

it('parses and formats durations', () => {
  expect(parseDuration('1m30s')).toEqual({ ms: 90_000 });
  expect(parseDuration('250ms')).toEqual({ ms: 250 });
  expect(parseDuration(1500)).toEqual({ ms: 1500 });
  expect(parseDuration('2h')).toEqual({ ms: 7_200_000 });
  expect(parseDuration('-1s')).toHaveProperty('error');
  expect(parseDuration(-5)).toHaveProperty('error');
  expect(formatDuration(90_000)).toBe('1m30s');
  expect(formatDuration(999)).toBe('999ms');
  expect(formatDuration(1500)).toBe('1.5s');
  expect(formatDuration(61_500)).toBe('1m2s');
});

it('a canonical spec validates to itself, so built specs can be started and re-validated', () => {
  const spec = pipeline('p')
    .stage('a', 'scripted')
    .stage('b', 'scripted', { dependsOn: ['a'] })
    .qualityGate('a', 'scripted', { strict: true })
    .retryBudget('a', { maxAttempts: 2, delay: '1s', attemptTimeout: '5s', onExhausted: 'escalate' })
    .reviewTtl('a', '1h', 'approve')
    .activityOptions('b', { heartbeatTimeout: '10s', retry: { initialInterval: '200ms', maximumAttempts: 3 } })
    .build();
  expect(validatePipeline(spec, known)).toEqual({ ok: true, spec });
  expect(validatePipeline(JSON.parse(JSON.stringify(spec)))).toEqual({ ok: true, spec });
});

describe('seed 003 step types and retry names', () => {
  const withApproval = { stages: ['scripted', 'llm', 'approval'], gates: ['scripted'] };

  it('derives the type from run, and run from the type', () => {
    const result = validatePipeline(
      YAML.parse(`
name: typed
stages:
  - { name: fetch, run: scripted }
  - { name: classify, type: llm, depends_on: [fetch], with: { prompt: "Classify {{ input }}" } }
  - { name: approve, type: approval, depends_on: [classify] }
  - { name: route, type: deterministic, run: scripted, depends_on: [approve] }
`),
      withApproval,
    );
    expect(result.ok).toBe(true);
    const spec = (result as { spec: { stages: { name: string; type: string; run: string }[] } }).spec;
    expect(spec.stages.map((s) => [s.name, s.type, s.run])).toEqual([
      ['fetch', 'deterministic', 'scripted'],
      ['classify', 'llm', 'llm'],
      ['approve', 'approval', 'approval'],
      ['route', 'deterministic', 'scripted'],
    ]);
  });

  it('lists every contradiction between type and run, and a missing run', () => {
    const result = validatePipeline(
      {
        name: 'contradictions',
        stages: [
          { name: 'a', type: 'deterministic' },
          { name: 'b', type: 'deterministic', run: 'approval' },
          { name: 'c', type: 'approval', run: 'scripted' },
          { name: 'd', type: 'sometimes', run: 'scripted' },
          { name: 'e' },
        ],
      },
      withApproval,
    );
    expect(result.ok).toBe(false);
    expect((result as { problems: string[] }).problems).toEqual(
      expect.arrayContaining([
        'stages[0] (a).run: a deterministic step must name its implementation (run: <name>)',
        'stages[1] (b).type: run: approval is a step type of its own (type: approval), not deterministic',
        'stages[2] (c).type: type approval runs "approval", not "scripted"; drop run: or the type',
        'stages[4] (e).run: must name a registered implementation (or give the step a type: llm, approval, fan_out)',
      ]),
    );
    expect((result as { problems: string[] }).problems.some((p) => p.startsWith('stages[3] (d).type:'))).toBe(true);
  });

  it('maps max_retries, backoff_seconds and backoff_coefficient onto the activity retry policy', () => {
    const result = validatePipeline(
      {
        name: 'retries',
        stages: [
          { name: 'send', run: 'scripted', max_retries: 3, backoff_seconds: 0.5, backoff_coefficient: 3 },
          { name: 'plain', run: 'scripted' },
        ],
      },
      withApproval,
    );
    expect(result.ok).toBe(true);
    const [send, plain] = (result as { spec: { stages: { activity: { retry: Record<string, unknown> } }[] } }).spec
      .stages;
    expect(send!.activity.retry).toMatchObject({ maximumAttempts: 4, initialIntervalMs: 500, backoffCoefficient: 3 });
    expect(plain!.activity.retry).toMatchObject({
      maximumAttempts: 5,
      initialIntervalMs: 1_000,
      backoffCoefficient: 2,
    });
  });

  it('refuses a retry policy given twice, and bad values', () => {
    const result = validatePipeline(
      {
        name: 'twice',
        stages: [
          { name: 'a', run: 'scripted', max_retries: 1, activity: { retry: { maximum_attempts: 2 } } },
          { name: 'b', run: 'scripted', max_retries: -1, backoff_seconds: 0, backoff_coefficient: 0.5 },
        ],
      },
      withApproval,
    );
    expect((result as { problems: string[] }).problems).toEqual(
      expect.arrayContaining([
        'stages[0] (a).max_retries: give the retry policy once: max_retries/backoff_seconds/backoff_coefficient, or activity.retry',
        'stages[1] (b).max_retries: must be 0 or more',
        'stages[1] (b).backoff_seconds: must be more than 0',
        'stages[1] (b).backoff_coefficient: must be at least 1',
      ]),
    );
  });

  it("checks an approval stage's config, listing every problem", () => {
    const known = {
      ...withApproval,
      checkConfig: (_kind: 'stage' | 'gate', name: string, config: unknown) =>
        name === 'approval' ? checkApprovalStageConfig(config) : [],
    };
    const result = validatePipeline(
      {
        name: 'bad-approval',
        stages: [
          {
            name: 'a',
            type: 'approval',
            with: {
              ttl: 'soon',
              on_reject: 'maybe',
              escalation: { to: 'leads', ttl: '1h', default: 'approve' },
              extra: 1,
            },
          },
        ],
      },
      known,
    );
    expect((result as { problems: string[] }).problems.sort()).toEqual([
      'stage a: with.extra: unknown field; the fields here are: action, from, items, context, context_field, ttl, on_reject, escalation, reviewers',
      'stage a: with.on_reject: must be one of skip, stop (got "maybe")',
      'stage a: with.ttl: "soon" is not a duration (use e.g. 500ms, 30s, 5m, 2h, 1d or 1m30s)',
    ]);
    const noTtl = validatePipeline(
      {
        name: 'no-ttl',
        stages: [{ name: 'a', type: 'approval', with: { escalation: { to: 'leads', ttl: '1h', default: 'reject' } } }],
      },
      known,
    );
    expect((noTtl as { problems: string[] }).problems).toEqual([
      'stage a: with.escalation: needs a ttl: the request escalates when its ttl has passed',
    ]);
  });
});
