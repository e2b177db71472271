/// <reference lib="dom" />
/**
 * The review inbox in Chromium, a gate escalation (issue 27's first flow): a scripted gate rejects three
 * attempts and escalates; the list shows the row with its three attempts; the detail diffs attempt 1 against 3;
 * each attempt's verdict reads as text (summary, failed criteria, guidance) with its JSON one click away;
 * approving attempt 2 completes the item with attempt 2's artefact. Also writes the inbox's screenshots.
 */
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { Page } from 'puppeteer-core';
import { pipeline } from '../../src/kinds/builder';
import { decisionKey } from '../../src/model/decisions';
import { TEST_IDS } from '../../src/ui/test-ids';
import { eventually } from '../support/harness';
import { inboxSuite, login, rowKeys, tid } from '../support/inbox';

jest.setTimeout(180_000);

// Visibility is namespace-wide and test files run one after another on the same server: this file's own name.
const PIPELINE = 'browser-gate-review';
const ROOT = path.join(__dirname, '..', '..');

const s = inboxSuite();

/** Attempt n's draft: a short document whose middle line changes from attempt to attempt. */
const draft = (n: number, line: string) => ({
  title: 'Release notes',
  body: `# Release notes\n\nThe importer ${line}.\n\nNo other changes.`,
  attempt: n,
});

/** Writes a screenshot under the run's folder and, when asked to, over the docs' image (`docs: false`: none). */
async function screenshot(page: Page, name: string, options: { docs?: boolean } = {}): Promise<void> {
  const runDir = path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'screenshots');
  mkdirSync(runDir, { recursive: true });
  await page.screenshot({ path: path.join(runDir, `${name}.png`) as `${string}.png` });
  if (process.env.TREADLE_UPDATE_SCREENSHOTS === '1' && options.docs !== false) {
    mkdirSync(path.join(ROOT, 'docs', 'images'), { recursive: true });
    await page.screenshot({ path: path.join(ROOT, 'docs', 'images', `${name}.png`) as `${string}.png` });
  }
}

it('shows an escalation with 3 attempts, diffs attempt 1 against 3, and approving attempt 2 completes with its output', async () => {
  const spec = pipeline(PIPELINE)
    .stage('draft', 'scripted')
    .qualityGate('draft', 'scripted')
    .retryBudget('draft', { maxAttempts: 3, onExhausted: 'escalate' })
    .stage('publish', 'scripted')
    .dependency('publish', 'draft');
  const id = s.h.id('notes');
  const steps = [
    { verdict: 'rejected', summary: 'too vague', output: draft(1, 'is faster') },
    { verdict: 'rejected', summary: 'numbers missing', output: draft(2, 'is 40% faster on large files') },
    {
      verdict: 'rejected',
      summary: 'too long for a release note',
      criteria: [
        { name: 'length', expected: 'one sentence per change', actual: 'two clauses and a reference', passed: false },
        { name: 'audience', expected: 'no internal links', actual: '"see the benchmark" points inside', passed: false },
      ],
      guidance: 'Keep the number, drop the reference.',
      output: draft(3, 'is 40% faster on large files, see the benchmark'),
    },
  ];
  await s.h.client.start(spec, { script: { draft: steps } }, { id });
  const key = decisionKey(id, 'review', 'draft');
  await eventually(
    async () => (await s.h.client.listPendingDecisions({ pipeline: PIPELINE })).find((d) => d.key === key),
    60_000,
    'the escalated review in the listing',
  );

  const page = await s.browser.newPage();
  await login(page, s.inbox, s.inbox.tokens.alice);
  await page.goto(`${s.inbox.url}?pipeline=${PIPELINE}`);
  await page.waitForSelector(`${tid(TEST_IDS.decisionRow)}[data-key="${key}"]`, { timeout: 10_000 });
  expect(await rowKeys(page)).toEqual([key]);
  const rowText = await page.$eval(`${tid(TEST_IDS.decisionRow)}[data-key="${key}"]`, (r) => r.textContent ?? '');
  expect(rowText).toContain('escalated');
  expect(rowText).toContain('3 attempts');
  await screenshot(page, 'inbox-list');

  await Promise.all([page.waitForNavigation(), page.click(`${tid(TEST_IDS.decisionRow)}[data-key="${key}"] a`)]);
  expect(await page.$$eval(tid(TEST_IDS.attempt), (xs) => xs.map((x) => (x as HTMLElement).dataset.attempt))).toEqual([
    '3',
    '2',
    '1',
  ]);
  await page.select(tid(TEST_IDS.diffA), '1');
  await page.select(tid(TEST_IDS.diffB), '3');
  await page.click(tid(TEST_IDS.diffShow));
  const diff = await page.waitForSelector(tid(TEST_IDS.diffView));
  const diffText = (await diff!.evaluate((el) => el.textContent ?? '')).replace(/\s+/g, ' ');
  expect(diffText).toContain('Attempt 1 → attempt 3');
  expect(diffText).toContain('is faster');
  expect(diffText).toContain('see the benchmark');
  await screenshot(page, 'inbox-detail');

  // The newest attempt's verdict reads as text: outcome, the gate's summary, each failed criterion, guidance.
  const verdict = (await page.$eval(`${tid(TEST_IDS.attempt)}[data-attempt="3"] ${tid(TEST_IDS.verdict)}`, (el) =>
    (el as HTMLElement).innerText.replace(/\s+/g, ' '),
  ))!;
  expect(verdict).toContain('Rejected');
  expect(verdict).toContain('too long for a release note');
  expect(verdict).toContain('length: expected “one sentence per change”, got “two clauses and a reference”');
  expect(verdict).toContain('audience: expected “no internal links”');
  expect(verdict).toContain('Guidance: Keep the number, drop the reference.');
  expect(verdict).not.toMatch(/failedCriteria|▶|\{\d+\}/);
  expect(
    await page.$$eval(`${tid(TEST_IDS.attempt)}[data-attempt="3"] ${tid(TEST_IDS.criterion)}`, (xs) => xs.length),
  ).toBe(2);
  await page.$eval(`${tid(TEST_IDS.attempt)}[data-attempt="3"]`, (el) => el.scrollIntoView());
  // For a person to look at, in the run's folder: the docs show the top of the page (inbox-detail).
  await screenshot(page, 'inbox-verdict', { docs: false });
  // The JSON as recorded is one click away.
  await page.click(`${tid(TEST_IDS.attempt)}[data-attempt="3"] details.raw-json > summary`);
  const raw = await page.$eval(`${tid(TEST_IDS.attempt)}[data-attempt="3"] details.raw-json`, (el) =>
    (el as HTMLElement).innerText.replace(/\s+/g, ' '),
  );
  expect(raw).toContain('failedCriteria');
  expect(raw).toContain('summary: "too long for a release note"');

  await page.select('#approve-attempt', '2');
  await page.click(tid(TEST_IDS.actionApproveAttempt));
  const notice = await page.waitForSelector(tid(TEST_IDS.notice));
  expect(await notice!.evaluate((el) => el.textContent)).toContain('by alice');

  const result = await eventually(
    async () => {
      const r = await s.h.client.result(id);
      return r.status === 'completed' ? r : undefined;
    },
    60_000,
    'the item to complete',
  );
  expect(await s.h.client.readArtefact(result.artefacts.draft)).toEqual(steps[1]!.output);
  s.browser.expectClean();
});
