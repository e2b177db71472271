/// <reference lib="dom" />
/**
 * The review inbox in Chromium, fork (issue 42): from a decision's page a reviewer forks the work item it belongs
 * to from one of its stages with changed settings. The fork carries the stage before it as it ended in the
 * original, runs the stage again with the settings typed (here: no review), and completes; the original still
 * waits for its review. A refused fork says why and starts nothing.
 */
import { pipeline } from '../../src/kinds/builder';
import { decisionKey } from '../../src/model/decisions';
import { TEST_IDS } from '../../src/ui/test-ids';
import { eventually } from '../support/harness';
import { inboxSuite, login, openDecision, tid } from '../support/inbox';

jest.setTimeout(180_000);

const PIPELINE = 'browser-fork';

const s = inboxSuite();

it('forks the item from its decision page with YAML settings; a refused fork says why', async () => {
  const spec = pipeline(PIPELINE)
    .stage('draft', 'scripted')
    .stage('publish', 'scripted')
    .dependency('publish', 'draft')
    .reviewPolicy('publish', 'always');
  const id = s.h.id('fork');
  await s.h.client.start(spec, { script: { draft: [{ output: { title: 'a draft' } }] } }, { id });
  const key = decisionKey(id, 'review', 'publish');
  await eventually(
    async () => (await s.h.client.listPendingDecisions({ pipeline: PIPELINE })).find((d) => d.key === key),
    60_000,
    'the review in the listing',
  );

  const page = await s.browser.newPage();
  await login(page, s.inbox, s.inbox.tokens.alice);
  expect((await openDecision(page, s.inbox, key))?.status()).toBe(200);
  await page.click('details.fork summary');
  expect(await page.$eval(tid(TEST_IDS.forkFrom), (el) => (el as HTMLInputElement).value)).toBe('publish');

  // A stage the pipeline does not have: refused, with the reason, and nothing started.
  await page.$eval(tid(TEST_IDS.forkFrom), (el) => ((el as HTMLInputElement).value = 'nope'));
  await page.click(tid(TEST_IDS.actionForkItem));
  const refused = await page.waitForSelector(`${tid(TEST_IDS.notice)}.error`);
  expect(await refused!.evaluate((el) => el.textContent)).toContain(
    'no stage named "nope" (the stages: draft, publish)',
  );

  await page.$eval(tid(TEST_IDS.forkFrom), (el) => ((el as HTMLInputElement).value = 'publish'));
  await page.type(tid(TEST_IDS.forkSettings), 'stages:\n  publish:\n    review_policy: never\n');
  await page.click(tid(TEST_IDS.actionForkItem));
  const notice = await page.waitForSelector(`${tid(TEST_IDS.notice)}.ok`);
  const text = (await notice!.evaluate((el) => el.textContent)) ?? '';
  const forkId = /^Forked as (\S+): carried draft; runs again publish\.$/.exec(text)?.[1];
  expect(forkId).toBeDefined();

  expect((await s.h.client.result(forkId!)).status).toBe('completed');
  const fork = await s.h.client.getState(forkId!);
  expect(fork.stages.draft).toMatchObject({ status: 'completed', carriedFrom: id });
  expect(fork.stages.publish!.review).toBeUndefined();
  expect((await s.h.client.getState(id)).status).toBe('waiting_review');
  await page.close();
});
