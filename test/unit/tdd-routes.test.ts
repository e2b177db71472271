/**
 * kinds/tdd/routes.ts against seed 001, without Temporal. Cases:
 * - the seed's "Node Edges" table, one `describe` per From node and one test per row, named after the row;
 * - the bounds: RequestRetry and MergeRejected against Impl's 5 attempts (the seed's "Retry Protocol"),
 *   MoreTests against `maxReviewRounds`, each way back to Scaffold against `maxScaffoldRuns`, and that each
 *   bound counts only its own edges; the Rebaser before the scaffold is done;
 * - ImplBarrier ("Wait Dependencies"): TestsReady and every child settled, in any order;
 * - after a human, for each reason × answer / abort / expiry; the Rebaser's rule per impact level;
 * - completeness: every exit of every node's schema (read from EXIT_SCHEMAS) has a route, and the schemas'
 *   exits are exactly the seed's.
 * Every exit routed here comes from a factory that parses it with its node's schema first.
 */
import { z } from 'zod';
import { SAMPLE_EXITS, exitNamesOf, type ExitOf } from '../support/tdd-exits';
import {
  afterHuman,
  afterImpl,
  afterMerger,
  afterRebaser,
  afterReview,
  afterScaffold,
  afterWriteTests,
  barrierReady,
  rebaseRule,
  type ChildStatus,
  type ExitSignal,
  type HumanAnswer,
  type HumanReason,
  type TddCounters,
  type TddRoute,
} from '../../src/kinds/tdd/routes';
import {
  EXIT_SCHEMAS,
  ImpactLevelSchema,
  MAX_IMPL_ATTEMPTS,
  TDD_LIMITS,
  TDD_NODES,
  type ExitName,
  type ImplExit,
  type MergerExit,
  type NodeExit,
  type RebaserExit,
  type ScaffoldExit,
  type TDDReviewImplExit,
  type TDDWriteTestsExit,
  type TddNodeName,
} from '../../src/kinds/tdd/spec';

// ---------------------------------------------------------------------------------------------------------
// Exits: one schema-valid sample per exit name

function nodeOf(exit: ExitName): TddNodeName {
  const node = TDD_NODES.find((n) => exitNamesOf(n).includes(exit));
  if (!node) throw new Error(`no node's schema has the exit ${exit}`);
  return node;
}

/**
 * A fresh sample of the exit `name`, parsed with its node's schema (so it is a reply an agent could send),
 * with `detail` (the activity's one-line summary) if given.
 */
function exitOf<N extends ExitName>(name: N, detail?: string): ExitOf<N> & { detail?: string } {
  const sample: ExitOf<N> = structuredClone(SAMPLE_EXITS[name]);
  expect(EXIT_SCHEMAS[nodeOf(name)].parse(sample)).toEqual(sample);
  return Object.assign(sample, detail === undefined ? {} : { detail });
}

// ---------------------------------------------------------------------------------------------------------
// Counters, routes, humans

/** The workflow's counters at a node's first Impl attempt, after one Scaffold run, with the default limits. */
function counters(overrides: Partial<TddCounters> = {}): TddCounters {
  return {
    implAttempt: 1,
    maxImplAttempts: MAX_IMPL_ATTEMPTS,
    reviewRounds: 0,
    maxReviewRounds: TDD_LIMITS.maxReviewRounds.default,
    scaffoldRuns: 1,
    maxScaffoldRuns: TDD_LIMITS.maxScaffoldRuns.default,
    ...overrides,
  };
}
/** Every bound spent. */
const spent = counters({
  implAttempt: MAX_IMPL_ATTEMPTS,
  reviewRounds: TDD_LIMITS.maxReviewRounds.default,
  scaffoldRuns: TDD_LIMITS.maxScaffoldRuns.default,
});

const HUMAN_REASONS = Object.keys({ clarification: true, stuck: true, review_rejected: true } satisfies Record<
  HumanReason,
  true
>) as HumanReason[];

const because = z.string().min(1);
/** A well-formed route: the `to` is known and carries exactly its fields; an Impl attempt is within the seed's 5. */
const RouteShape = z.discriminatedUnion('to', [
  z.object({ to: z.literal('fork') }).strict(),
  z.object({ to: z.literal('scaffold'), because }).strict(),
  z.object({ to: z.literal('tddWriteTests'), because }).strict(),
  z.object({ to: z.literal('barrier') }).strict(),
  z.object({ to: z.literal('impl'), attempt: z.number().int().min(1).max(MAX_IMPL_ATTEMPTS), because }).strict(),
  z.object({ to: z.literal('tddReviewImpl') }).strict(),
  z.object({ to: z.literal('merger') }).strict(),
  z
    .object({
      to: z.literal('human'),
      reason: z.enum(HUMAN_REASONS as [HumanReason, ...HumanReason[]]),
      message: because,
    })
    .strict(),
  z.object({ to: z.literal('exit'), status: z.enum(['merged', 'failed']), because }).strict(),
]) satisfies z.ZodType<TddRoute>;

const nobodyAnswers: HumanAnswer = { kind: 'expired' };

/** The seed's `Exit` for a route that waits for a human first: what happens when nobody answers. */
function exitAfterHuman(route: TddRoute): TddRoute {
  if (route.to !== 'human') throw new Error(`expected a human, got ${route.to}`);
  return afterHuman(route.reason, nobodyAnswers);
}

const stuck = { to: 'human', reason: 'stuck', message: expect.any(String) };

// ---------------------------------------------------------------------------------------------------------
// Seed 001 "Node Edges", row by row

describe('Scaffold', () => {
  test('Scaffold —InitWork→ Fork', () => {
    expect(afterScaffold(exitOf('InitWork'))).toEqual({ to: 'fork' });
    // Children start with the fork, not instead of it (seed: "Always InitWork, optionally with children").
    const withChildren = {
      ...exitOf('InitWork'),
      childSpecs: [
        {
          id: 'tokenizer',
          description: 'Split text',
          acceptanceCriteria: [{ id: 'TOK1', text: 'splits' }],
          targetPath: 'src/tokenizer.js',
          testPath: 'test/tokenizer.test.js',
        },
      ],
    };
    expect(EXIT_SCHEMAS.scaffold.safeParse(withChildren).success).toBe(true);
    expect(afterScaffold(withChildren)).toEqual({ to: 'fork' });
  });

  test('Scaffold —ClarificationNeeded→ Exit (via a human: clarification)', () => {
    const route = afterScaffold(exitOf('ClarificationNeeded', 'Does a hyphen split words?'));
    expect(route).toEqual({
      to: 'human',
      reason: 'clarification',
      message: 'ClarificationNeeded: Does a hyphen split words?',
    });
    expect(exitAfterHuman(route)).toEqual({ to: 'exit', status: 'failed', because: expect.any(String) });
  });
});

describe('Fork', () => {
  // Fork itself is workflow code (tdd-node.ts `case 'fork'`); what is pure is where its two branches meet.
  test('Fork —(spawns)→ TDDWriteTests, ImplBarrier', () => {
    expect(afterScaffold(exitOf('InitWork'))).toEqual({ to: 'fork' });
    // The ImplBarrier it spawns holds Impl back until TDDWriteTests' TestsReady and every child Scaffold spawned.
    expect(barrierReady(false, [{ id: 'tokenizer', status: 'running' }])).toEqual({
      ready: false,
      waitingFor: ['TestsReady', 'child tokenizer'],
    });
  });
});

describe('TDDWriteTests', () => {
  test('TDDWriteTests —TestsReady→ ImplBarrier', () => {
    expect(afterWriteTests(exitOf('TestsReady'), counters())).toEqual({ to: 'barrier' });
  });

  test('TDDWriteTests —InvalidScaffold→ Scaffold', () => {
    expect(afterWriteTests(exitOf('InvalidScaffold', 'Token is not in src/textkit.js'), counters())).toEqual({
      to: 'scaffold',
      because: 'InvalidScaffold: Token is not in src/textkit.js',
    });
  });
});

describe('ImplBarrier', () => {
  test('ImplBarrier —(unblocks)→ Impl', () => {
    const children: ChildStatus[] = [
      { id: 'tokenizer', status: 'merged' },
      { id: 'formatter', status: 'merged' },
    ];
    expect(barrierReady(true, children)).toEqual({ ready: true, waitingFor: [] });
  });
});

describe('Impl', () => {
  test('Impl —TestsPassed→ TDDReviewImpl', () => {
    expect(afterImpl(exitOf('TestsPassed'), counters())).toEqual({ to: 'tddReviewImpl' });
  });

  test('Impl —RequestRetry→ Impl (self-loop, attempt n+1)', () => {
    expect(afterImpl(exitOf('RequestRetry', 'off by one'), counters({ implAttempt: 2 }))).toEqual({
      to: 'impl',
      attempt: 3,
      because: 'RequestRetry: off by one',
    });
  });

  test('Impl —BlockedDependency→ Scaffold', () => {
    expect(afterImpl(exitOf('BlockedDependency', 'tokenize'), counters())).toEqual({
      to: 'scaffold',
      because: 'BlockedDependency: tokenize',
    });
  });

  test('Impl —SpecAmbiguity→ Scaffold', () => {
    expect(afterImpl(exitOf('SpecAmbiguity', 'trim the ends?'), counters())).toEqual({
      to: 'scaffold',
      because: 'SpecAmbiguity: trim the ends?',
    });
  });

  test('Impl —Stuck→ Exit (via a human: stuck)', () => {
    const route = afterImpl(exitOf('Stuck', 'the contract contradicts TK2'), counters());
    expect(route).toEqual({ to: 'human', reason: 'stuck', message: 'Stuck: the contract contradicts TK2' });
    expect(exitAfterHuman(route)).toEqual({ to: 'exit', status: 'failed', because: expect.any(String) });
  });
});

describe('TDDReviewImpl', () => {
  test('TDDReviewImpl —Approved→ Merger', () => {
    expect(afterReview(exitOf('Approved'), counters())).toEqual({ to: 'merger' });
  });

  test('TDDReviewImpl —MoreTests→ TDDWriteTests', () => {
    expect(afterReview(exitOf('MoreTests', 'test empty input'), counters())).toEqual({
      to: 'tddWriteTests',
      because: 'MoreTests: test empty input',
    });
  });

  test('TDDReviewImpl —Reject→ Exit (via a human: review_rejected)', () => {
    const route = afterReview(exitOf('Reject', 'reimplements the tokenizer'), counters());
    expect(route).toEqual({
      to: 'human',
      reason: 'review_rejected',
      message: expect.stringContaining('Reject: reimplements the tokenizer'),
    });
    expect(exitAfterHuman(route)).toEqual({ to: 'exit', status: 'failed', because: expect.any(String) });
  });
});

describe('Merger', () => {
  test('Merger —MergeComplete→ Parent + Rebaser (the node exits merged)', () => {
    expect(afterMerger(exitOf('MergeComplete', 'd4e5f6'), counters())).toEqual({
      to: 'exit',
      status: 'merged',
      because: 'MergeComplete: d4e5f6',
    });
  });

  test('Merger —MergeRejected→ Impl', () => {
    expect(afterMerger(exitOf('MergeRejected', 'ContractViolation'), counters())).toEqual({
      to: 'impl',
      attempt: 2,
      because: 'MergeRejected: ContractViolation',
    });
  });
});

describe('Rebaser', () => {
  test('Rebaser —RebaseClean→ TDDWriteTests', () => {
    expect(afterRebaser(exitOf('RebaseClean', 'onto e5f6a7'), counters(), true)).toEqual({
      to: 'tddWriteTests',
      because: 'RebaseClean: onto e5f6a7',
    });
  });

  test('Rebaser —RebaseAdapted→ TDDWriteTests', () => {
    expect(afterRebaser(exitOf('RebaseAdapted', '1 adaptation'), counters(), true)).toEqual({
      to: 'tddWriteTests',
      because: 'RebaseAdapted: 1 adaptation',
    });
  });

  test('Rebaser —RebaseConflict→ Scaffold', () => {
    expect(afterRebaser(exitOf('RebaseConflict', 'src/textkit.js'), counters(), true)).toEqual({
      to: 'scaffold',
      because: 'RebaseConflict: src/textkit.js',
    });
  });
});

// ---------------------------------------------------------------------------------------------------------
// Bounds

describe('Retry Protocol: RequestRetry within 5 attempts', () => {
  test('the seed allows 5 attempts per Impl invocation', () => {
    expect(MAX_IMPL_ATTEMPTS).toBe(5);
  });

  test.each([1, 2, 3, 4, 5])('RequestRetry at attempt %i', (attempt) => {
    const route = afterImpl(exitOf('RequestRetry'), counters({ implAttempt: attempt }));
    if (attempt < 5) expect(route).toEqual({ to: 'impl', attempt: attempt + 1, because: 'RequestRetry' });
    else
      expect(route).toEqual({
        to: 'human',
        reason: 'stuck',
        message: expect.stringMatching(/RequestRetry at attempt 5 of 5 becomes Stuck/),
      });
  });

  test('an agent that always asks to retry makes exactly 5 attempts, then is Stuck', () => {
    const attempts: number[] = [];
    let route: TddRoute = { to: 'impl', attempt: 1, because: 'barrier' };
    while (route.to === 'impl') {
      attempts.push(route.attempt);
      route = afterImpl(exitOf('RequestRetry'), counters({ implAttempt: route.attempt }));
    }
    expect(attempts).toEqual([1, 2, 3, 4, 5]);
    expect(route).toEqual(stuck);
  });
});

describe('MergeRejected counts against Impl attempts', () => {
  test.each([1, 2, 3, 4, 5])('MergeRejected after Impl attempt %i', (attempt) => {
    const route = afterMerger(exitOf('MergeRejected'), counters({ implAttempt: attempt }));
    if (attempt < 5) expect(route).toEqual({ to: 'impl', attempt: attempt + 1, because: 'MergeRejected' });
    else expect(route).toEqual({ to: 'human', reason: 'stuck', message: expect.stringMatching(/attempt 5 of 5/) });
  });

  test('retries and rejected merges share one budget', () => {
    // attempt 1 retries, attempt 2 passes, the merge is rejected → attempt 3 (not 2), and so on to 5.
    let route = afterImpl(exitOf('RequestRetry'), counters({ implAttempt: 1 }));
    expect(route).toEqual({ to: 'impl', attempt: 2, because: 'RequestRetry' });
    route = afterMerger(exitOf('MergeRejected'), counters({ implAttempt: 2 }));
    expect(route).toEqual({ to: 'impl', attempt: 3, because: 'MergeRejected' });
    expect(afterImpl(exitOf('RequestRetry'), counters({ implAttempt: 4 }))).toEqual({
      to: 'impl',
      attempt: 5,
      because: 'RequestRetry',
    });
    expect(afterMerger(exitOf('MergeRejected'), counters({ implAttempt: 5 }))).toEqual(stuck);
  });
});

describe('MoreTests bounded by maxReviewRounds', () => {
  test.each([
    { maxReviewRounds: 3, reviewRounds: 0, to: 'tddWriteTests' },
    { maxReviewRounds: 3, reviewRounds: 1, to: 'tddWriteTests' },
    { maxReviewRounds: 3, reviewRounds: 2, to: 'tddWriteTests' },
    { maxReviewRounds: 3, reviewRounds: 3, to: 'human' },
    { maxReviewRounds: 1, reviewRounds: 0, to: 'tddWriteTests' },
    { maxReviewRounds: 1, reviewRounds: 1, to: 'human' },
  ])('MoreTests after $reviewRounds of $maxReviewRounds rounds → $to', ({ maxReviewRounds, reviewRounds, to }) => {
    const route = afterReview(exitOf('MoreTests'), counters({ reviewRounds, maxReviewRounds }));
    expect(route).toEqual(
      to === 'human'
        ? { ...stuck, message: expect.stringContaining(`maxReviewRounds ${maxReviewRounds}`) }
        : { to, because: 'MoreTests' },
    );
  });

  test('a reviewer that always asks for more tests gets maxReviewRounds rounds, then the node is Stuck', () => {
    const maxReviewRounds = TDD_LIMITS.maxReviewRounds.default;
    let reviewRounds = 0;
    let route = afterReview(exitOf('MoreTests'), counters({ reviewRounds, maxReviewRounds }));
    while (route.to === 'tddWriteTests') {
      reviewRounds++; // as the workflow counts a MoreTests it follows
      route = afterReview(exitOf('MoreTests'), counters({ reviewRounds, maxReviewRounds }));
    }
    expect(reviewRounds).toBe(maxReviewRounds);
    expect(route).toEqual(stuck);
  });

  test('Approved and Reject are not bounded by review rounds', () => {
    expect(afterReview(exitOf('Approved'), spent)).toEqual({ to: 'merger' });
    expect(afterReview(exitOf('Reject'), spent)).toEqual(
      expect.objectContaining({ to: 'human', reason: 'review_rejected' }),
    );
  });
});

describe('returning to Scaffold bounded by maxScaffoldRuns', () => {
  const toScaffold: { name: string; route: (c: TddCounters) => TddRoute }[] = [
    { name: 'TDDWriteTests InvalidScaffold', route: (c) => afterWriteTests(exitOf('InvalidScaffold'), c) },
    { name: 'Impl BlockedDependency', route: (c) => afterImpl(exitOf('BlockedDependency'), c) },
    { name: 'Impl SpecAmbiguity', route: (c) => afterImpl(exitOf('SpecAmbiguity'), c) },
    { name: 'Rebaser RebaseConflict (scaffolded)', route: (c) => afterRebaser(exitOf('RebaseConflict'), c, true) },
    {
      name: 'Rebaser RebaseConflict (before the scaffold was done)',
      route: (c) => afterRebaser(exitOf('RebaseConflict'), c, false),
    },
  ];
  const maxScaffoldRuns = TDD_LIMITS.maxScaffoldRuns.default;

  test.each(toScaffold)('$name: back to Scaffold while it ran fewer than maxScaffoldRuns times', ({ route }) => {
    for (let scaffoldRuns = 1; scaffoldRuns < maxScaffoldRuns; scaffoldRuns++) {
      expect(route(counters({ scaffoldRuns, maxScaffoldRuns }))).toEqual({
        to: 'scaffold',
        because: expect.any(String),
      });
    }
  });

  test.each(toScaffold)('$name: Stuck once Scaffold ran maxScaffoldRuns times', ({ route }) => {
    expect(route(counters({ scaffoldRuns: maxScaffoldRuns, maxScaffoldRuns }))).toEqual({
      ...stuck,
      message: expect.stringContaining('maxScaffoldRuns'),
    });
    expect(route(counters({ scaffoldRuns: 2, maxScaffoldRuns: 2 }))).toEqual(stuck);
  });

  test.each(toScaffold)('$name: the Stuck message keeps the last reason', ({ route }) => {
    const r = route(counters({ scaffoldRuns: maxScaffoldRuns, maxScaffoldRuns }));
    expect(r.to === 'human' && r.message).toMatch(/InvalidScaffold|BlockedDependency|SpecAmbiguity|RebaseConflict/);
  });
});

describe('Rebaser before the scaffold is done', () => {
  test.each(['RebaseClean', 'RebaseAdapted'] as const)(
    '%s before InitWork → Scaffold (no tests to write yet)',
    (name) => {
      expect(afterRebaser(exitOf(name, 'onto e5f6a7'), counters(), false)).toEqual({
        to: 'scaffold',
        because: expect.stringContaining(`${name}: onto e5f6a7`),
      });
    },
  );
});

describe('each bound counts only its own edges', () => {
  test('spent Impl attempts and review rounds do not stop a return to Scaffold', () => {
    const c = counters({ implAttempt: MAX_IMPL_ATTEMPTS, reviewRounds: TDD_LIMITS.maxReviewRounds.default });
    expect(afterImpl(exitOf('BlockedDependency'), c)).toEqual({ to: 'scaffold', because: 'BlockedDependency' });
    expect(afterWriteTests(exitOf('InvalidScaffold'), c)).toEqual({ to: 'scaffold', because: 'InvalidScaffold' });
  });

  test('spent Scaffold runs and review rounds do not stop a retry', () => {
    const c = counters({
      scaffoldRuns: TDD_LIMITS.maxScaffoldRuns.default,
      reviewRounds: TDD_LIMITS.maxReviewRounds.default,
    });
    expect(afterImpl(exitOf('RequestRetry'), c)).toEqual({ to: 'impl', attempt: 2, because: 'RequestRetry' });
    expect(afterMerger(exitOf('MergeRejected'), c)).toEqual({ to: 'impl', attempt: 2, because: 'MergeRejected' });
  });

  test('spent Impl attempts and Scaffold runs do not stop a review round', () => {
    const c = counters({ implAttempt: MAX_IMPL_ATTEMPTS, scaffoldRuns: TDD_LIMITS.maxScaffoldRuns.default });
    expect(afterReview(exitOf('MoreTests'), c)).toEqual({ to: 'tddWriteTests', because: 'MoreTests' });
  });

  test('exits that loop nowhere route the same with every bound spent', () => {
    expect(afterScaffold(exitOf('InitWork'))).toEqual({ to: 'fork' });
    expect(afterWriteTests(exitOf('TestsReady'), spent)).toEqual({ to: 'barrier' });
    expect(afterImpl(exitOf('TestsPassed'), spent)).toEqual({ to: 'tddReviewImpl' });
    expect(afterReview(exitOf('Approved'), spent)).toEqual({ to: 'merger' });
    expect(afterMerger(exitOf('MergeComplete'), spent)).toEqual({
      to: 'exit',
      status: 'merged',
      because: 'MergeComplete',
    });
    expect(afterRebaser(exitOf('RebaseClean'), spent, true)).toEqual({ to: 'tddWriteTests', because: 'RebaseClean' });
  });
});

describe('reasons quote the exit', () => {
  test('a whole exit is quoted by its name; a signal with a detail by name and detail', () => {
    expect(afterImpl(exitOf('RequestRetry'), counters())).toEqual(expect.objectContaining({ because: 'RequestRetry' }));
    const signal: ExitSignal<ImplExit> = { exit: 'RequestRetry', detail: '2 tests still fail' };
    expect(afterImpl(signal, counters())).toEqual(
      expect.objectContaining({ because: 'RequestRetry: 2 tests still fail' }),
    );
    expect(afterImpl({ exit: 'RequestRetry', detail: '' }, counters())).toEqual(
      expect.objectContaining({ because: 'RequestRetry' }),
    );
  });
});

// ---------------------------------------------------------------------------------------------------------
// Seed 001 "Wait Dependencies": ImplBarrier

/** Every ordering of `items`. */
function permutations<T>(items: readonly T[]): T[][] {
  if (items.length <= 1) return [[...items]];
  return items.flatMap((item, i) =>
    permutations([...items.slice(0, i), ...items.slice(i + 1)]).map((rest) => [item, ...rest]),
  );
}

type BarrierEvent = 'TestsReady' | `${string} merged` | `${string} failed`;

describe('barrierReady', () => {
  const events: BarrierEvent[] = ['TestsReady', 'tokenizer merged', 'formatter failed', 'stemmer merged'];

  test.each(permutations(events).map((order) => [order.join(', '), order] as const))(
    'tests ready and all children settled, in the order %s',
    (_name, order) => {
      let testsReady = false;
      const children: ChildStatus[] = [
        { id: 'tokenizer', status: 'running' },
        { id: 'formatter', status: 'running' },
        { id: 'stemmer', status: 'running' },
      ];
      const outstanding = new Set<string>(['TestsReady', 'child tokenizer', 'child formatter', 'child stemmer']);
      order.forEach((event, i) => {
        if (event === 'TestsReady') {
          testsReady = true;
          outstanding.delete('TestsReady');
        } else {
          const [id, status] = event.split(' ') as [string, 'merged' | 'failed'];
          children.find((c) => c.id === id)!.status = status;
          outstanding.delete(`child ${id}`);
        }
        const { ready, waitingFor } = barrierReady(testsReady, children);
        expect(ready).toBe(i === order.length - 1);
        expect([...waitingFor].sort()).toEqual([...outstanding].sort());
      });
    },
  );

  test('children that finished before the tests were ready wait only for TestsReady', () => {
    const children: ChildStatus[] = [
      { id: 'tokenizer', status: 'merged' },
      { id: 'formatter', status: 'failed' },
    ];
    expect(barrierReady(false, children)).toEqual({ ready: false, waitingFor: ['TestsReady'] });
    expect(barrierReady(true, children)).toEqual({ ready: true, waitingFor: [] });
  });

  test('no children: TestsReady alone opens it', () => {
    expect(barrierReady(false, [])).toEqual({ ready: false, waitingFor: ['TestsReady'] });
    expect(barrierReady(true, [])).toEqual({ ready: true, waitingFor: [] });
  });

  test('a running child blocks and is named in waitingFor', () => {
    const children: ChildStatus[] = [
      { id: 'tokenizer', status: 'merged' },
      { id: 'formatter', status: 'running' },
    ];
    const { ready, waitingFor } = barrierReady(true, children);
    expect(ready).toBe(false);
    expect(waitingFor).toEqual([expect.stringContaining('formatter')]);
    expect(waitingFor.join(' ')).not.toContain('tokenizer');
  });

  test('a failed child settles it (Impl hears of the failure instead of waiting forever)', () => {
    expect(barrierReady(true, [{ id: 'formatter', status: 'failed' }])).toEqual({ ready: true, waitingFor: [] });
  });

  test('reads its inputs without changing them', () => {
    const children = Object.freeze([Object.freeze({ id: 'tokenizer', status: 'running' as const })]);
    expect(barrierReady(false, children)).toEqual({ ready: false, waitingFor: ['TestsReady', 'child tokenizer'] });
  });
});

// ---------------------------------------------------------------------------------------------------------
// After a human

describe('afterHuman', () => {
  const answers: { kind: HumanAnswer['kind']; answer: HumanAnswer }[] = [
    { kind: 'answer', answer: { kind: 'answer', text: 'hyphens split words' } },
    { kind: 'abort', answer: { kind: 'abort', reason: 'out of scope' } },
    { kind: 'expired', answer: { kind: 'expired' } },
  ];
  const cases = HUMAN_REASONS.flatMap((reason) => answers.map(({ kind, answer }) => ({ reason, kind, answer })));

  test('covers every reason × answer', () => {
    expect(cases).toHaveLength(9);
  });

  test.each(cases)('$reason × $kind', ({ reason, kind, answer }) => {
    const route = afterHuman(reason, answer);
    expect(RouteShape.parse(route)).toEqual(route);
    if (kind === 'abort')
      expect(route).toEqual({ to: 'exit', status: 'failed', because: expect.stringContaining('out of scope') });
    else if (kind === 'expired')
      expect(route).toEqual({ to: 'exit', status: 'failed', because: expect.stringMatching(/expired/) });
    else if (reason === 'clarification') expect(route).toEqual({ to: 'scaffold', because: expect.any(String) });
    else expect(route).toEqual({ to: 'impl', attempt: 1, because: expect.any(String) });
  });

  test('guidance for a node stuck before it had tests resumes at Scaffold, not Impl', () => {
    const guidance: HumanAnswer = { kind: 'answer', text: 'put the types in src/types.js' };
    expect(afterHuman('stuck', guidance, { testsReady: false })).toEqual({
      to: 'scaffold',
      because: 'guidance from a human',
    });
    expect(afterHuman('stuck', guidance, { testsReady: true })).toEqual({
      to: 'impl',
      attempt: 1,
      because: 'guidance from a human',
    });
    expect(afterHuman('clarification', guidance, { testsReady: false })).toEqual({
      to: 'scaffold',
      because: 'clarification answered',
    });
    expect(afterHuman('stuck', { kind: 'abort', reason: 'no' }, { testsReady: false })).toMatchObject({
      to: 'exit',
      status: 'failed',
    });
  });

  test('an exit after a human says what the node was waiting for', () => {
    expect(afterHuman('clarification', nobodyAnswers)).toEqual(
      expect.objectContaining({ because: expect.stringMatching(/clarification/) }),
    );
    expect(afterHuman('stuck', nobodyAnswers)).toEqual(
      expect.objectContaining({ because: expect.stringMatching(/stuck/) }),
    );
    expect(afterHuman('review_rejected', nobodyAnswers)).toEqual(
      expect.objectContaining({ because: expect.stringMatching(/review rejected/) }),
    );
  });
});

// ---------------------------------------------------------------------------------------------------------
// The Rebaser's rule

describe('rebaseRule', () => {
  test.each([
    ['Trivial', /auto-resolve/i],
    ['Additive', /added exports.*may use/i],
    ['Breaking', /mechanical.*RebaseConflict/i],
  ] as const)('%s', (impact, rule) => {
    expect(rebaseRule(impact)).toMatch(rule);
  });

  test('one distinct rule per impact level', () => {
    const rules = ImpactLevelSchema.options.map((impact) => rebaseRule(impact));
    expect(rules.every((r) => typeof r === 'string' && r.length > 0)).toBe(true);
    expect(new Set(rules).size).toBe(ImpactLevelSchema.options.length);
  });
});

// ---------------------------------------------------------------------------------------------------------
// Completeness: every exit of every schema has a route

/** The seed's Node Edges table: each agent node's exits. */
const SEED_EXITS: Record<TddNodeName, string[]> = {
  scaffold: ['InitWork', 'ClarificationNeeded'],
  tddWriteTests: ['TestsReady', 'InvalidScaffold'],
  impl: ['TestsPassed', 'RequestRetry', 'BlockedDependency', 'SpecAmbiguity', 'Stuck'],
  tddReviewImpl: ['Approved', 'MoreTests', 'Reject'],
  merger: ['MergeComplete', 'MergeRejected'],
  rebaser: ['RebaseClean', 'RebaseAdapted', 'RebaseConflict'],
};

/** The routes of the exit `exit` of `node`, with fresh and with spent counters (and both `scaffolded`). */
function routesOf(node: TddNodeName, exit: string): unknown[] {
  const contexts = [counters(), spent];
  switch (node) {
    case 'scaffold':
      return [afterScaffold({ exit } as ExitSignal<ScaffoldExit>)];
    case 'tddWriteTests':
      return contexts.map((c) => afterWriteTests({ exit } as ExitSignal<TDDWriteTestsExit>, c));
    case 'impl':
      return contexts.map((c) => afterImpl({ exit } as ExitSignal<ImplExit>, c));
    case 'tddReviewImpl':
      return contexts.map((c) => afterReview({ exit } as ExitSignal<TDDReviewImplExit>, c));
    case 'merger':
      return contexts.map((c) => afterMerger({ exit } as ExitSignal<MergerExit>, c));
    case 'rebaser':
      return contexts.flatMap((c) =>
        [true, false].map((scaffolded) => afterRebaser({ exit } as ExitSignal<RebaserExit>, c, scaffolded)),
      );
  }
}

describe('table completeness', () => {
  const everyExit = TDD_NODES.flatMap((node) => exitNamesOf(node).map((exit) => ({ node, exit })));

  test('every agent node has an exit schema, a discriminated union on `exit`', () => {
    expect(Object.keys(EXIT_SCHEMAS).sort()).toEqual([...TDD_NODES].sort());
    for (const node of TDD_NODES) {
      expect(EXIT_SCHEMAS[node].def.discriminator).toBe('exit');
      expect(exitNamesOf(node).length).toBeGreaterThan(0);
    }
  });

  test("the schemas hold exactly the seed's exits, node by node", () => {
    for (const node of TDD_NODES)
      expect({ node, exits: exitNamesOf(node).sort() }).toEqual({ node, exits: [...SEED_EXITS[node]].sort() });
  });

  test.each(everyExit)('$node —$exit→ has a route', ({ node, exit }) => {
    const routes = routesOf(node, exit);
    expect(routes.length).toBeGreaterThan(0);
    for (const route of routes) expect(RouteShape.safeParse(route)).toEqual(expect.objectContaining({ success: true }));
  });

  test.each(everyExit)('$node —$exit→ has a schema-valid sample', ({ node, exit }) => {
    const sample = (SAMPLE_EXITS as Record<string, NodeExit | undefined>)[exit];
    expect(sample).toBeDefined();
    expect(EXIT_SCHEMAS[node].safeParse(sample).success).toBe(true);
  });

  test('an exit no schema knows has no route', () => {
    // The guard for the tests above: an unknown exit falls through every switch.
    expect(
      RouteShape.safeParse(afterImpl({ exit: 'Teleport' } as unknown as ExitSignal<ImplExit>, counters())).success,
    ).toBe(false);
  });
});
