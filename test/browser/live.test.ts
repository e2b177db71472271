/// <reference lib="dom" />
/**
 * The review inbox in Chromium, live updates (issue 27): with the list open (filtered to this file's
 * pipeline), a review that starts waiting appears without a reload; approving it with `treadle review …
 * --approve` removes its row within seconds.
 */
import { pipeline } from '../../src/kinds/builder';
import { decisionKey } from '../../src/model/decisions';
import { TEST_IDS } from '../../src/ui/test-ids';
import { runTreadle, showRun } from '../support/cli';
import { inboxSuite, login, rowKeys, tid } from '../support/inbox';

jest.setTimeout(180_000);

const PIPELINE = 'browser-live';

const s = inboxSuite();

it('shows a new review without a reload and drops its row when the CLI approves it', async () => {
  const page = await s.browser.newPage();
  await login(page, s.inbox, s.inbox.tokens.bob);
  await page.goto(`${s.inbox.url}?pipeline=${PIPELINE}`);
  await page.waitForSelector(tid(TEST_IDS.emptyState));
  // Marks this document: a reload would lose it.
  await page.evaluate(() => ((window as unknown as { __sameDocument: boolean }).__sameDocument = true));

  const spec = pipeline(PIPELINE).stage('draft', 'scripted').reviewPolicy('draft', 'always');
  const id = s.h.id('live');
  await s.h.client.start(spec, null, { id });
  const key = decisionKey(id, 'review', 'draft');
  await page.waitForSelector(`${tid(TEST_IDS.decisionRow)}[data-key="${key}"]`, { visible: true, timeout: 30_000 });
  expect(await rowKeys(page)).toEqual([key]);
  expect(await page.evaluate(() => (window as unknown as { __sameDocument?: boolean }).__sameDocument)).toBe(true);

  const cli = await runTreadle(s.h, ['review', id, 'draft', '--approve', '--reviewer', 'cli-user']);
  if (cli.code !== 0) throw new Error(`the CLI's review failed: ${showRun(cli)}`);
  const approvedAt = Date.now();
  await page.waitForSelector(`${tid(TEST_IDS.decisionRow)}[data-key="${key}"]`, { hidden: true, timeout: 10_000 });
  expect(Date.now() - approvedAt).toBeLessThan(10_000);
  expect(await rowKeys(page)).toEqual([]);
  expect(await page.evaluate(() => (window as unknown as { __sameDocument?: boolean }).__sameDocument)).toBe(true);
  s.browser.expectClean();
});
