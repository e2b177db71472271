/// <reference lib="dom" />
/**
 * The review inbox in Chromium, batch answers (issue 27): twenty reviews wait; one is approved through the
 * CLI just before the reviewer approves all of them from the list: nineteen are decided by the reviewer, and
 * the one the CLI took is reported as already decided by its reviewer, not as an error.
 */
import { pipeline } from '../../src/kinds/builder';
import { decisionKey } from '../../src/model/decisions';
import { TEST_IDS } from '../../src/ui/test-ids';
import { runTreadle, showRun } from '../support/cli';
import { eventually } from '../support/harness';
import { inboxSuite, login, rowKeys, startInbox, tid } from '../support/inbox';

jest.setTimeout(180_000);

const PIPELINE = 'browser-batch';
const COUNT = 20;

const s = inboxSuite({ inbox: false });

it('approves 20 selected reviews at once; the one the CLI approved just before is reported as already decided by it', async () => {
  const spec = pipeline(PIPELINE).stage('draft', 'scripted').reviewPolicy('draft', 'always');
  const ids = Array.from({ length: COUNT }, () => s.h.id('batch'));
  await Promise.all(ids.map((id) => s.h.client.start(spec, null, { id })));
  const keys = ids.map((id) => decisionKey(id, 'review', 'draft'));
  await eventually(
    async () => {
      const listed = new Set((await s.h.client.listPendingDecisions({ pipeline: PIPELINE })).map((d) => d.key));
      return keys.every((k) => listed.has(k)) ? true : undefined;
    },
    90_000,
    'all 20 reviews in the listing',
  );
  // The index lists everything once at start and is not refreshed after: the row the CLI answers stays on
  // the page until the batch, as it would for a reviewer whose page is a few seconds behind.
  s.inbox = await startInbox(s.h, { index: { deltaMs: 0, reconcileMs: 0 } });

  const page = await s.browser.newPage();
  await login(page, s.inbox, s.inbox.tokens.alice);
  await page.goto(`${s.inbox.url}?pipeline=${PIPELINE}`);
  await page.waitForSelector(tid(TEST_IDS.decisionRow));
  expect((await rowKeys(page)).sort()).toEqual([...keys].sort());

  const cli = await runTreadle(s.h, ['review', ids[7]!, 'draft', '--approve', '--reviewer', 'cli-user']);
  if (cli.code !== 0) throw new Error(`the CLI's review failed: ${showRun(cli)}`);

  await page.click(tid(TEST_IDS.selectAll));
  await page.waitForSelector(`${tid(TEST_IDS.batchApprove)}:not([hidden])`);
  expect(await page.$eval('#batch-count', (el) => el.textContent)).toBe('20 selected');
  await page.click(tid(TEST_IDS.batchApprove));
  const notice = await page.waitForSelector(tid(TEST_IDS.notice));
  const text = await notice!.evaluate((el) => el.textContent ?? '');
  expect(text).toBe('19 approved, 1 already decided by cli-user.');
  expect(await notice!.evaluate((el) => el.classList.contains('error'))).toBe(false);
  expect(await rowKeys(page)).toEqual([]);

  const states = await Promise.all(ids.map((id) => s.h.client.getState(id)));
  expect(states.map((state) => state.stages.draft?.status)).toEqual(ids.map(() => 'completed'));
  const reviewers = states.map((state) => state.stages.draft?.review?.reviewer);
  expect(reviewers.filter((r) => r === 'alice')).toHaveLength(COUNT - 1);
  expect(reviewers[7]).toBe('cli-user');
  s.browser.expectClean();
});
