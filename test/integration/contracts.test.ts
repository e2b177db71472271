/**
 * Quality contracts (seed 002) on the real server: the consuming stage validates the producer's items in
 * one call, the producer revises each rejected item, only revised items are validated again, at most
 * `max_retries` rounds; still-rejected items pass through with `validation_warnings`, appended after the
 * accepted ones in their original order. Every fallback of the seed, ids that cannot be told apart, and a
 * list of 500 items with the history kept small. The built-in `llm` validator and reviser run on the
 * scripted agent: `<consumer>.validate` replies (one per round) and `<consumer>.revise.<id>` (one per round).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { defaultRegistry } from '../../src/worker';
import { SqliteCallLog } from '../../src/storage/sqlite-call-log';
import type { Json } from '../../src/model/shapes';
import { startHarness, type Harness } from '../support/harness';
import { runTreadle } from '../support/cli';

let h: Harness;
let dir: string;
let callLog: SqliteCallLog;

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'contracts-'));
  callLog = new SqliteCallLog(path.join(dir, 'calls.sqlite'));
  const registry = defaultRegistry()
    .validator('explodes', async () => {
      throw new Error('the validating model is down');
    })
    // A user's validator answering in a shape of its own: `key` and `why` instead of `id` and `reason`.
    .validator(
      'own-shape',
      async ({ items }) => ({ rejected: items.map(({ id }) => ({ key: id, why: 'no' })) }) as never,
    )
    // Rejects the items whose id starts with "bad" until a revision marked them fixed.
    .validator('picky', async ({ items }) => {
      const bad = items.filter(({ id, item }) => id.startsWith('bad') && (item as { fixed?: boolean }).fixed !== true);
      return { rejected: bad.map(({ id }) => ({ id, reason: 'bad' })) };
    })
    .reviser('fixer', async ({ item }) => ({ ...(item as Record<string, Json>), fixed: true }));
  h = await startHarness({ registry, callLog });
});
afterAll(async () => {
  await h?.shutdown();
  await callLog?.close();
  rmSync(dir, { recursive: true, force: true });
});

const brief = (area: string, extra: Record<string, Json> = {}): Json => ({
  affected_area: area,
  problem: `${area} is slow`,
  ...extra,
});
const verdicts = (...results: [string, 'accepted' | 'rejected', string?][]): Json => ({
  results: results.map(([id, verdict, reason]) => ({ id, verdict, ...(reason ? { reason } : {}) })),
});

/** OpportunityPM → SolutionDesigner with a contract on the edge; `validate` defaults to the llm validator. */
function pipeline(contract: Record<string, Json> = {}): Json {
  return {
    name: 'discovery',
    stages: [
      { name: 'opportunity_pm', run: 'scripted' },
      { name: 'solution_designer', run: 'scripted', depends_on: ['opportunity_pm'] },
    ],
    contracts: [
      {
        from: 'opportunity_pm',
        to: 'solution_designer',
        items: 'briefs',
        item_id: 'affected_area',
        validate: {
          run: 'llm',
          with: {
            criteria:
              'Actionability: can a developer identify a concrete surface? Coherence: a single underlying issue?',
          },
        },
        revise: { run: 'llm', with: { criteria: 'Name one concrete surface and one issue.' } },
        max_retries: 2,
        ...contract,
      },
    ],
  };
}

/** What the consumer received from the producer (the scripted stage's artefact shows its upstream). */
async function received(id: string): Promise<{ briefs: Record<string, Json>[] }> {
  const result = await h.client.result(id);
  expect(result.status).toBe('completed');
  const artefact = (await h.client.readArtefact(result.artefacts.solution_designer)) as {
    upstream: Record<string, Json>;
  };
  return (await h.client.readArtefact(artefact.upstream.opportunity_pm as Json)) as { briefs: Record<string, Json>[] };
}

async function validations(id: string) {
  return (await h.client.events(id)).filter((e) => e.type === 'InputValidation');
}

test('rejected items are revised and re-validated alone, at most max_retries rounds; the rest pass through with warnings, appended in order', async () => {
  const id = h.id('contract-rounds');
  const input = {
    script: {
      opportunity_pm: [{ output: { briefs: [brief('checkout'), brief('search'), brief('login'), brief('cart')] } }],
    },
    agent_replies: {
      'solution_designer.validate': [
        verdicts(
          ['checkout', 'accepted'],
          ['search', 'rejected', 'Glitches and performance issues: two problems'],
          ['login', 'rejected', 'no concrete surface'],
          ['cart', 'accepted'],
        ),
        verdicts(['search', 'rejected', 'still two problems'], ['login', 'accepted']),
        verdicts(['search', 'rejected', 'still not one issue']),
      ],
      'solution_designer.revise.search': [
        brief('search', { problem: 'search is slow and broken' }),
        brief('search', { problem: 'search is slow, and broken too' }),
      ],
      'solution_designer.revise.login': [
        brief('login', { problem: 'the login form times out', affected_area: 'renamed' }),
      ],
    },
  };
  await h.client.start(pipeline(), input, { id });
  const { briefs } = await received(id);
  expect(briefs.map((b) => b.affected_area)).toEqual(['checkout', 'login', 'cart', 'search']);
  expect(briefs[1]).toEqual({ affected_area: 'login', problem: 'the login form times out' });
  expect(briefs[3]).toEqual({
    affected_area: 'search',
    problem: 'search is slow, and broken too',
    validation_warnings: ['Rejected after 2 retries: still not one issue'],
  });
  expect(briefs.slice(0, 3).every((b) => b.validation_warnings === undefined)).toBe(true);

  const events = await validations(id);
  expect(events.map((e) => [e.details?.round, e.details?.validated, e.details?.accepted, e.details?.rejected])).toEqual(
    [
      [0, 4, 2, 2],
      [1, 2, 1, 1],
      [2, 1, 0, 1],
      [undefined, undefined, 3, undefined],
    ],
  );
  expect(events[3]!.message).toBe('opportunity_pm → solution_designer: 3 accepted, 1 passed through with warnings');
  const state = await h.client.getState(id);
  expect(state.stages.solution_designer!.qualityFlags).toEqual({
    items_produced: 4,
    validation_rejections: 4,
    validation_retries: 2,
  });
  // Every validation and revision call is in the call log, with its tokens.
  const calls = (await callLog.query()).filter((row) => row.workflowId === id);
  expect(calls.filter((c) => c.stage === 'solution_designer.validate')).toHaveLength(3);
  expect(calls.filter((c) => c.stage === 'solution_designer.revise')).toHaveLength(3);
  expect(calls.every((c) => c.inputTokens > 0 && c.outputTokens > 0)).toBe(true);
  // They are the consuming stage's usage too (and so count against the item's token budget).
  const usage = await h.client.usage(id);
  expect(usage.stages.solution_designer).toMatchObject({
    calls: 6,
    inputTokens: calls.reduce((sum, c) => sum + c.inputTokens, 0),
  });
}, 60_000);

test('all accepted the first time: one validation call, no revision', async () => {
  const id = h.id('contract-clean');
  const input = {
    script: { opportunity_pm: [{ output: { briefs: [brief('a'), brief('b')] } }] },
    agent_replies: { 'solution_designer.validate': [verdicts(['a', 'accepted'], ['b', 'accepted'])] },
  };
  await h.client.start(pipeline(), input, { id });
  expect((await received(id)).briefs).toEqual([brief('a'), brief('b')]);
  expect((await validations(id)).map((e) => e.details?.round)).toEqual([0, undefined]);
  const calls = (await callLog.query()).filter((row) => row.workflowId === id);
  expect(calls.map((c) => c.stage)).toEqual(['solution_designer.validate']);
  expect((await h.client.getState(id)).stages.solution_designer!.qualityFlags).toEqual({
    items_produced: 2,
    validation_rejections: 0,
    validation_retries: 0,
  });
}, 60_000);

test('the seed’s fallbacks: a validator that throws or answers nonsense accepts all, a partial answer accepts the unmentioned, an empty list makes no call', async () => {
  const items = { briefs: [brief('a'), brief('b'), brief('c')] };
  const threw = h.id('contract-threw');
  const malformed = h.id('contract-malformed');
  const partial = h.id('contract-partial');
  const empty = h.id('contract-empty');
  await Promise.all([
    h.client.start(
      pipeline({ validate: 'explodes' }),
      { script: { opportunity_pm: [{ output: items }] } },
      { id: threw },
    ),
    h.client.start(
      pipeline(),
      {
        script: { opportunity_pm: [{ output: items }] },
        agent_replies: { 'solution_designer.validate': [{ verdicts: 'all fine' }] },
      },
      { id: malformed },
    ),
    h.client.start(
      pipeline({ max_retries: 0 }),
      {
        script: { opportunity_pm: [{ output: items }] },
        agent_replies: { 'solution_designer.validate': [verdicts(['a', 'accepted'], ['b', 'rejected', 'vague'])] },
      },
      { id: partial },
    ),
    h.client.start(pipeline(), { script: { opportunity_pm: [{ output: { briefs: [] } }] } }, { id: empty }),
  ]);
  expect((await received(threw)).briefs).toEqual(items.briefs);
  expect((await validations(threw))[0]).toMatchObject({
    details: { round: 0, validated: 3, accepted: 3, rejected: 0, fallback: 'threw' },
    message: expect.stringContaining('the validator failed, so every item is accepted (the validating model is down)'),
  });

  expect((await received(malformed)).briefs).toEqual(items.briefs);
  expect((await validations(malformed))[0]).toMatchObject({
    details: { fallback: 'malformed', accepted: 3 },
    message: expect.stringContaining("the validator's reply did not match its schema"),
  });

  // c is not mentioned: accepted; b rejected with no retries left: warned after 0 retries.
  expect((await received(partial)).briefs.map((b) => [b.affected_area, b.validation_warnings ?? null])).toEqual([
    ['a', null],
    ['c', null],
    ['b', ['Rejected after 0 retries: vague']],
  ]);
  expect((await validations(partial))[0]).toMatchObject({ details: { fallback: 'partial', accepted: 2, rejected: 1 } });

  expect((await received(empty)).briefs).toEqual([]);
  expect((await validations(empty))[0]).toMatchObject({ details: { round: 0, validated: 0 } });
  for (const id of [threw, empty])
    expect(
      (await callLog.query()).filter((row) => row.workflowId === id && row.stage === 'solution_designer.validate'),
    ).toHaveLength(0);
}, 60_000);

test('a revision that does not parse skips the item and records the wasted tokens; the next round revises it again', async () => {
  const id = h.id('contract-unparsable');
  const input = {
    script: { opportunity_pm: [{ output: { briefs: [brief('a'), brief('b')] } }] },
    agent_replies: {
      'solution_designer.validate': [
        verdicts(['a', 'accepted'], ['b', 'rejected', 'too broad']),
        verdicts(['b', 'accepted']),
      ],
      'solution_designer.revise.b': [
        { $reply: { text: 'Sure! Here is the improved brief: b is better now.', outputTokens: 37 } },
        brief('b', { problem: 'one issue' }),
      ],
    },
  };
  await h.client.start(pipeline(), input, { id });
  expect((await received(id)).briefs).toEqual([brief('a'), brief('b', { problem: 'one issue' })]);
  const events = await validations(id);
  expect(events[1]).toMatchObject({
    details: { round: 1, revised: 0, skipped: 1, validated: 0, rejected: 0, stillRejected: 1 },
    message: expect.stringContaining('1 revision unusable ('),
  });
  expect(Number(events[1]!.details?.wastedTokens)).toBeGreaterThanOrEqual(37);
  expect(events[2]).toMatchObject({ details: { round: 2, revised: 1, validated: 1, accepted: 1 } });
}, 60_000);

test('items with missing or duplicate ids, or no list where the contract says, fail the consuming stage with every problem', async () => {
  const id = h.id('contract-ids');
  await h.client.start(
    pipeline(),
    { script: { opportunity_pm: [{ output: { briefs: [brief('a'), { problem: 'no area' }, brief('a'), 'text'] } }] } },
    { id },
  );
  const result = await h.client.result(id);
  expect(result.status).toBe('failed');
  const state = await h.client.getState(id);
  expect(state.stages.solution_designer!.status).toBe('failed');
  expect(state.stages.solution_designer!.error).toBe(
    'opportunity_pm → solution_designer: the items cannot be validated: contract opportunity_pm → solution_designer: item 1 has no "affected_area" (the contract\'s item_id); contract opportunity_pm → solution_designer: items 0 and 2 share the affected_area "a"; ids must be unique; contract opportunity_pm → solution_designer: item 3 is not an object',
  );
  const notAList = h.id('contract-not-list');
  await h.client.start(
    pipeline(),
    { script: { opportunity_pm: [{ output: { summary: 'no briefs here' } }] } },
    { id: notAList },
  );
  expect((await h.client.result(notAList)).status).toBe('failed');
  expect((await h.client.getState(notAList)).stages.solution_designer!.error).toContain(
    '"briefs" in opportunity_pm\'s artefact is not a list (it is missing)',
  );
}, 60_000);

test('a contract whose edge does not exist, or whose llm validator has no criteria, is refused with the spec; an unknown reviser by the worker', async () => {
  await expect(
    h.client.start(pipeline({ from: 'solution_designer', to: 'opportunity_pm', validate: { run: 'llm' } }), null, {
      id: h.id('contract-bad-spec'),
    }),
  ).rejects.toThrow(
    /stage opportunity_pm does not depend on solution_designer; add solution_designer to its depends_on[\s\S]*validate\.with\.criteria: the llm validator needs its criteria as text/,
  );
  // The client cannot know the worker's validators and revisers: the worker checks them before any stage runs.
  const id = h.id('contract-unknown-reviser');
  await h.client.start(pipeline({ revise: 'nope' }), null, { id });
  const result = await h.client.result(id);
  expect(result.status).toBe('failed');
  expect(JSON.stringify(result)).toContain('revise: unknown reviser \\"nope\\" (registered: fixer, llm)');
}, 30_000);

test('a contract on 500 items keeps the history small: items and verdicts travel by reference', async () => {
  const id = h.id('contract-500');
  const briefs = Array.from({ length: 500 }, (_, i) => brief(`area-${i}`, { detail: 'x'.repeat(1_000) }));
  const rejectedIds = [3, 99, 250, 401, 498].map((i) => `area-${i}`);
  const input = {
    script: { opportunity_pm: [{ output: { briefs } }] },
    agent_replies: {
      'solution_designer.validate': [
        verdicts(
          ...briefs.map((_, i): [string, 'accepted' | 'rejected', string?] =>
            rejectedIds.includes(`area-${i}`) ? [`area-${i}`, 'rejected', 'too vague'] : [`area-${i}`, 'accepted'],
          ),
        ),
        verdicts(...rejectedIds.map((r): [string, 'accepted'] => [r, 'accepted'])),
      ],
      ...Object.fromEntries(
        rejectedIds.map((r) => [`solution_designer.revise.${r}`, [brief(r, { detail: 'concrete now' })]]),
      ),
    },
  };
  await h.client.start(pipeline(), input, { id });
  const final = (await received(id)).briefs;
  expect(final).toHaveLength(500);
  expect(final.map((b) => b.affected_area)).toEqual(briefs.map((b) => (b as { affected_area: string }).affected_area));
  expect(final[99]).toEqual(brief('area-99', { detail: 'concrete now' }));
  expect((await h.client.getState(id)).stages.solution_designer!.qualityFlags).toEqual({
    items_produced: 500,
    validation_rejections: 5,
    validation_retries: 1,
  });
  const description = await h.temporal.workflow.getHandle(id).describe();
  const historyBytes = Number(description.raw.workflowExecutionInfo?.historySizeBytes ?? 0);
  // The list is about 520 KB (and the scripted replies in the input more); the history holds references.
  expect(historyBytes).toBeGreaterThan(0);
  expect(historyBytes).toBeLessThan(60_000);
}, 120_000);

test('a code validator answering in a shape the engine does not know is a flagged fallback', async () => {
  const id = h.id('contract-own-shape');
  const items = { briefs: [brief('a'), brief('b')] };
  const input = { script: { opportunity_pm: [{ output: items }] } };
  await h.client.start(pipeline({ validate: 'own-shape' }), input, { id });
  expect((await received(id)).briefs).toEqual(items.briefs);
  const [round0] = await validations(id);
  expect(round0).toMatchObject({ details: { round: 0, validated: 2, accepted: 2, fallback: 'malformed' } });
  expect(round0!.message).toContain('the answer was malformed, so every item is accepted');
  const why =
    "the validator's answer is not {rejected: [{id, reason}], accepted?: [id]}: " +
    'rejected[0] has no id (keys given: key, why)';
  expect(round0!.message).toContain(why);
}, 60_000);

test('the audit names every contract round (stage, edge, round) with its counts', async () => {
  const id = h.id('contract-audit');
  const raw = {
    name: 'two-contracts',
    stages: [
      { name: 'left', run: 'scripted' },
      { name: 'right', run: 'scripted' },
      { name: 'join', run: 'scripted', depends_on: ['left', 'right'] },
    ],
    contracts: ['left', 'right'].map((from) => ({
      from,
      to: 'join',
      items: 'briefs',
      item_id: 'affected_area',
      validate: 'picky',
      revise: 'fixer',
      max_retries: 2,
    })),
  };
  const left = [{ output: { briefs: [brief('ok-1'), brief('bad-1'), brief('ok-2')] } }];
  const input = { script: { left, right: [{ output: { briefs: [brief('bad-2'), brief('bad-3')] } }] } };
  await h.client.start(raw, input, { id });
  expect((await h.client.result(id)).status).toBe('completed');

  const entries = (await h.client.audit(id)).filter((e) => e.message.startsWith('contract '));
  const lines = entries.map((e) => `${e.kind}|${e.step ?? ''}|${e.message}`);
  expect(lines.filter((l) => l.includes('left→join'))).toEqual([
    'step|join|contract left→join round 0: 3 validated, 2 accepted, 1 rejected',
    'step|join|contract left→join round 1: bad-1 revised',
    'step|join|contract left→join round 1: 1 revised, 1 validated, 1 accepted, 0 rejected',
    'step|join|contract left→join round 1: final list: 3 accepted, 0 passed through with warnings',
  ]);
  // Its two revisions run in parallel: either may finish first.
  expect(lines.filter((l) => l.includes('right→join')).sort()).toEqual(
    [
      'step|join|contract right→join round 0: 2 validated, 0 accepted, 2 rejected',
      'step|join|contract right→join round 1: bad-2 revised',
      'step|join|contract right→join round 1: bad-3 revised',
      'step|join|contract right→join round 1: 2 revised, 2 validated, 2 accepted, 0 rejected',
      'step|join|contract right→join round 1: final list: 2 accepted, 0 passed through with warnings',
    ].sort(),
  );
  // The Web UI shows the same names (the activities' summaries), the rounds' counts on the finalize call.
  const history = (await h.temporal.workflow.getHandle(id).fetchHistory()).events ?? [];
  const isContract = (name: string | null | undefined): boolean => name?.startsWith('treadle.contract') === true;
  const contractCalls = history.filter((e) => isContract(e.activityTaskScheduledEventAttributes?.activityType?.name));
  const summaryOf = (e: (typeof history)[number]): string =>
    JSON.parse(Buffer.from(e.userMetadata?.summary?.data ?? []).toString());
  const summaries = contractCalls.map(summaryOf);
  expect(summaries).toEqual(
    expect.arrayContaining([
      'join · contract left→join · round 0 · validate',
      'join · contract right→join · round 1 · revise 2/2',
      'join · contract right→join · round 1 · validate 2 revised',
      'join · contract left→join · round 1 · finalize (round 0: 3 validated, 2 accepted, 1 rejected; ' +
        'round 1: 1 revised, 1 validated, 1 accepted, 0 rejected)',
    ]),
  );
  // The CLI's STEP column names the stage.
  const cli = await runTreadle(h, ['audit', id]);
  expect(cli.code).toBe(0);
  expect(cli.stdout).toMatch(/ step +join +contract left→join round 0: 3 validated, 2 accepted, 1 rejected\n/);
}, 90_000);
