/**
 * The evaluation pages of the inbox (issue 42) through fastify's inject, over a fake backend: only for a signed-in
 * reviewer (else the login page), only as the inbox's own host, every text of a record escaped (a scorer's error
 * and a pipeline name are anyone's text), an unknown run a 404 page, a backend without evaluations an empty list.
 */
import { TreadleError } from '../../src/config/errors';
import { summarizeVariant, type EvalCaseRecord, type EvalRunRecord } from '../../src/model/evals';
import { newToken, parseTokens } from '../../src/ui/auth';
import type { InboxBackend } from '../../src/ui/backend';
import { barChart } from '../../src/ui/pages/evals';
import { buildInboxApp } from '../../src/ui/server';

const HOST = '127.0.0.1:8234';
const alice = newToken('alice');
const EVIL = '<img src=x onerror=alert(1)>';

const result: EvalCaseRecord = {
  caseId: 'c1',
  variant: 'main',
  itemId: 'eval-r1-main-c1',
  outcome: 'completed',
  verdicts: { passed: 1, rejected: 0, uncertain: 0 },
  attempts: 1,
  escalations: 0,
  tokens: { input: 1, output: 1 },
  costUsd: 0.5,
  wallMs: 10,
  score: null,
  scoreError: EVIL,
  passed: false,
};
const record: EvalRunRecord = {
  format: 1,
  run: 'r1',
  pipeline: EVIL,
  scorer: { name: 'exact', passMark: 1 },
  policy: 'approve',
  variants: [{ name: 'main', overrides: {} }],
  startedAt: '2026-12-07T10:00:00.000Z',
  finishedAt: '2026-12-07T10:01:00.000Z',
  summaries: [summarizeVariant('main', [result])],
  results: [result],
};

function backend(withEvals = true): InboxBackend {
  const base: InboxBackend = {
    list: async () => [],
    changes: async () => [],
    detail: async () => {
      throw new Error('no detail');
    },
    checkEdit: async () => [],
    cancel: async () => {
      throw new Error('no cancel');
    },
    fork: async () => {
      throw new Error('no fork');
    },
    decide: async () => ({ status: 'already_decided' }),
  };
  if (!withEvals) return base;
  return {
    ...base,
    evalRuns: async () => [
      { run: 'r1', pipeline: EVIL, scorer: 'exact', finishedAt: record.finishedAt, summaries: record.summaries },
    ],
    evalRun: async (run) => {
      if (run === 'r1') return record;
      throw new TreadleError(`unknown evaluation run "${run}"`, 'not_found');
    },
  };
}

async function inject(url: string, options: { withEvals?: boolean; signedIn?: boolean; host?: string } = {}) {
  const { app } = await buildInboxApp(
    {
      backend: backend(options.withEvals ?? true),
      auth: { tokens: parseTokens(alice.line) },
      index: { deltaMs: 0, reconcileMs: 0 },
    },
    [HOST],
  );
  const headers = {
    host: options.host ?? HOST,
    ...(options.signedIn === false ? {} : { authorization: `Bearer ${alice.token}` }),
  };
  const res = await app.inject({ url, headers });
  await app.close();
  return res;
}

it('sends a visitor without a session to the login page, and answers no other host', async () => {
  for (const url of ['/evals', '/evals/r1']) {
    const anonymous = await inject(url, { signedIn: false });
    expect([anonymous.statusCode, anonymous.headers.location]).toEqual([303, '/login']);
    expect((await inject(url, { host: 'evil.example' })).statusCode).toBe(403);
  }
});

it('lists the runs and shows one with every text of its record escaped', async () => {
  const list = await inject('/evals');
  expect(list.statusCode).toBe(200);
  expect(list.body).toContain('href="/evals/r1"');
  const run = await inject('/evals/r1');
  expect(run.statusCode).toBe(200);
  for (const body of [list.body, run.body]) {
    expect(body).not.toContain(EVIL);
    expect(body).toContain('&lt;img src=x onerror=alert(1)&gt;');
    expect(body).not.toMatch(/\sstyle=/);
  }
  expect(run.body).toContain('data-testid="eval-pass-chart"');
});

it('answers 404 for an unknown run, and lists nothing from a backend without evaluations', async () => {
  const unknown = await inject('/evals/nope');
  expect(unknown.statusCode).toBe(404);
  expect(unknown.body).toContain('No evaluation run is named nope.');
  const none = await inject('/evals', { withEvals: false });
  expect(none.body).toContain('No evaluation has finished yet');
  expect((await inject('/evals/r1', { withEvals: false })).statusCode).toBe(404);
});

it('draws bars in proportion to the largest of the values and the given maximum, none past the bar area', () => {
  const svg = barChart(
    't',
    'x',
    [
      { label: 'a', value: 2, text: '2' },
      { label: 'b', value: 1, text: '1' },
    ],
    0,
  ).value;
  expect([...svg.matchAll(/width="([\d.]+)"\s+height="22"/g)].map((m) => Number(m[1]))).toEqual([420, 210]);
  const capped = barChart('t', 'x', [{ label: 'a', value: 0.5, text: '' }], 1).value;
  expect(capped).toMatch(/width="210.0"/);
});
