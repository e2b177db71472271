/// <reference lib="dom" />
/**
 * The evaluation pages in Chromium (issue 42): an evaluation of an `llm` stage on two variants (two models, the
 * fake Anthropic server answering; the cheaper model gets every third question wrong) is listed on `/evals`, and
 * its page draws one bar per variant in each chart — pass rate and cost — with lengths in proportion to the
 * values, the per-case table, and nothing the CSP refuses. Writes docs/images/eval-page.png when
 * TREADLE_UPDATE_SCREENSHOTS=1.
 */
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { Page } from 'puppeteer-core';
import { AnthropicAgent } from '../../src/agents/anthropic';
import { defaultAgentProviders } from '../../src/agents';
import { TEST_IDS } from '../../src/ui/test-ids';
import { startFakeAnthropic, type FakeAnthropic, type RecordedRequest } from '../support/fake-anthropic';
import { inboxSuite, login, tid } from '../support/inbox';

jest.setTimeout(180_000);

const ROOT = path.join(__dirname, '..', '..');
let fake: FakeAnthropic;
beforeAll(async () => {
  fake = await startFakeAnthropic();
  // The answer is the question's number doubled; the haiku model misses every third one.
  fake.setDefault({
    kind: 'computed',
    reply: (request: RecordedRequest) => {
      const body = request.body as { model: string; messages: { content: unknown }[] };
      const n = Number(/question (\d+)/.exec(JSON.stringify(body.messages))?.[1]);
      const haiku = body.model.includes('haiku');
      const answer = haiku && n % 3 === 0 ? n : 2 * n;
      return { kind: 'tool', input: { answer }, usage: { input_tokens: 400, output_tokens: 100 } };
    },
  });
});
afterAll(async () => {
  await fake?.close();
});
// Registered after the fake's beforeAll: the worker's agent points at a server that is already up.
const s = inboxSuite({
  harness: {
    agents: {
      ...defaultAgentProviders(),
      anthropic: () => new AnthropicAgent({ apiKey: 'test-key', baseURL: fake.baseURL }),
    },
  },
});

const SPEC = {
  name: 'eval-doubling',
  stages: [
    {
      name: 'answer',
      run: 'llm',
      agent: 'anthropic',
      with: {
        model: 'claude-sonnet-4-6',
        prompt: 'Double the number in question {{ input.n }}.',
        output_schema: { type: 'object', properties: { answer: { type: 'number' } }, required: ['answer'] },
      },
    },
  ],
};

/** Each bar of a chart: its variant, value and drawn width. */
async function barsOf(page: Page, chart: string): Promise<{ variant: string; value: number; width: number }[]> {
  return page.$$eval(`${tid(chart)} ${tid(TEST_IDS.evalBar)}`, (rects) =>
    rects.map((r) => ({
      variant: r.getAttribute('data-variant') ?? '',
      value: Number(r.getAttribute('data-value')),
      width: (r as SVGGraphicsElement).getBBox().width,
    })),
  );
}

it('lists the run and draws its pass-rate and cost charts, one bar per variant, in proportion', async () => {
  const run = `doubling-${s.h.taskQueue}`;
  const cases = Array.from({ length: 12 }, (_, i) => ({
    id: `q${i + 1}`,
    input: { n: i + 1 },
    expected: { answer: 2 * (i + 1) },
  }));
  const record = await s.h.client.evals.run({
    run,
    pipeline: SPEC,
    variants: [
      { name: 'sonnet', overrides: {} },
      { name: 'haiku', file: 'haiku.yaml', overrides: { stages: { answer: { with: { model: 'claude-haiku-4-5' } } } } },
    ],
    cases,
    scorer: await s.h.client.evals.scorer({ scorer: 'exact' }),
    concurrency: 6,
  });
  const [sonnet, haiku] = record.summaries;
  expect(sonnet).toMatchObject({ passed: 12, passRate: 1, tokens: { input: 4800, output: 1200 } });
  expect(haiku).toMatchObject({ passed: 8 });
  expect(sonnet!.costUsd).toBeCloseTo(0.0324); // 4800 × $3/M + 1200 × $15/M
  expect(haiku!.costUsd).toBeCloseTo(0.0108); // 4800 × $1/M + 1200 × $5/M

  const page = await s.browser.newPage();
  await login(page, s.inbox, s.inbox.tokens.alice);
  await page.goto(`${s.inbox.url}evals`);
  const row = await page.waitForSelector(`${tid(TEST_IDS.evalRunRow)}[data-run="${run}"]`);
  expect(await row!.evaluate((el) => el.textContent?.replace(/\s+/g, ' '))).toContain('sonnet: 100.0% of 12');

  await Promise.all([page.waitForNavigation(), row!.$eval('a', (a) => (a as HTMLAnchorElement).click())]);
  expect(new URL(page.url()).pathname).toBe(`/evals/${run}`);
  const pass = await barsOf(page, TEST_IDS.evalPassChart);
  expect(pass.map((b) => [b.variant, b.value])).toEqual([
    ['sonnet', 1],
    ['haiku', 8 / 12],
  ]);
  // The bar area is 420 units wide for a pass rate of 1; haiku's is two thirds of it.
  expect(pass[0]!.width).toBeCloseTo(420, 0);
  expect(pass[1]!.width / pass[0]!.width).toBeCloseTo(8 / 12, 2);
  const cost = await barsOf(page, TEST_IDS.evalCostChart);
  expect(cost.map((b) => b.variant)).toEqual(['sonnet', 'haiku']);
  expect(cost[1]!.width / cost[0]!.width).toBeCloseTo(0.0108 / 0.0324, 2);
  expect(await page.$$(tid(TEST_IDS.evalCaseRow))).toHaveLength(24);
  const missed = await page.$eval(`${tid(TEST_IDS.evalCaseRow)}[data-variant="haiku"][data-case="q3"]`, (el) =>
    el.textContent?.replace(/\s+/g, ' '),
  );
  expect(missed).toContain('0.000');

  const runDir = path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'screenshots');
  mkdirSync(runDir, { recursive: true });
  await page.screenshot({ path: path.join(runDir, 'eval-page.png') as `${string}.png`, fullPage: false });
  if (process.env.TREADLE_UPDATE_SCREENSHOTS === '1')
    await page.screenshot({ path: path.join(ROOT, 'docs', 'images', 'eval-page.png') as `${string}.png` });

  // Nothing the CSP refused, no script error, no failed request while the pages drew.
  s.browser.expectClean();

  const unknown = await page.goto(`${s.inbox.url}evals/no-such-run`);
  expect(unknown?.status()).toBe(404);
  expect(await page.$eval(tid(TEST_IDS.notice), (el) => el.textContent)).toBe(
    'No evaluation run is named no-such-run.',
  );
  // The one problem: the 404 itself, as the browser logs it.
  expect(s.browser.problems.splice(0).map((p) => p.text)).toEqual([expect.stringContaining('status of 404')]);
});
