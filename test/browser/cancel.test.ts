/// <reference lib="dom" />
/**
 * The review inbox in Chromium, cancel (issue 40): from a decision's page a reviewer cancels the work item it
 * belongs to. Dismissing the confirmation sends nothing; confirming cancels the item as the signed-in reviewer
 * with the reason typed, the item's workflow ends CANCELLED with who and why in its state, and its decision
 * leaves the inbox.
 */
import type { HTTPRequest } from 'puppeteer-core';
import { pipeline } from '../../src/kinds/builder';
import { decisionKey } from '../../src/model/decisions';
import { TEST_IDS } from '../../src/ui/test-ids';
import { eventually } from '../support/harness';
import { inboxSuite, login, openDecision, tid } from '../support/inbox';

jest.setTimeout(180_000);

const PIPELINE = 'browser-cancel';

const s = inboxSuite();

it('cancels the item from its decision page after a confirmation, as the signed-in reviewer, with the reason', async () => {
  const spec = pipeline(PIPELINE)
    .stage('draft', 'scripted')
    .reviewPolicy('draft', 'always')
    .stage('publish', 'scripted')
    .dependency('publish', 'draft');
  const id = s.h.id('cancel');
  await s.h.client.start(spec, { script: { draft: [{ output: { title: 'a duplicate' } }] } }, { id });
  const key = decisionKey(id, 'review', 'draft');
  await eventually(
    async () => (await s.h.client.listPendingDecisions({ pipeline: PIPELINE })).find((d) => d.key === key),
    60_000,
    'the review in the listing',
  );

  const page = await s.browser.newPage();
  const cancelsSent: string[] = [];
  const cancelUrl = `${s.inbox.url}api/decisions/${encodeURIComponent(key)}/cancel`;
  page.on('request', (request: HTTPRequest) => {
    if (request.method() === 'POST' && request.url() === cancelUrl) cancelsSent.push(request.postData() ?? '');
  });
  await login(page, s.inbox, s.inbox.tokens.alice);
  expect((await openDecision(page, s.inbox, key))?.status()).toBe(200);
  await page.click('details.cancel summary');
  await page.type(tid(TEST_IDS.cancelReason), 'a duplicate of tour-1');

  // Dismissed: nothing is sent, the item runs on.
  const dismissed = s.browser.expectDialog(page, 'dismiss');
  await page.click(tid(TEST_IDS.actionCancelItem));
  expect(await dismissed).toBe(`Cancel work item ${id}? Its stages stop and its decisions leave the inbox.`);
  expect(cancelsSent).toEqual([]);
  expect((await s.h.client.getState(id)).status).toBe('waiting_review');

  // Confirmed: cancelled as alice, with the reason.
  const accepted = s.browser.expectDialog(page, 'accept');
  await page.click(tid(TEST_IDS.actionCancelItem));
  expect(await accepted).toBe(`Cancel work item ${id}? Its stages stop and its decisions leave the inbox.`);
  const notice = await page.waitForSelector(`${tid(TEST_IDS.notice)}.ok`);
  expect(await notice!.evaluate((el) => el.textContent)).toBe(`Cancelled ${id} as alice: a duplicate of tour-1.`);
  expect(cancelsSent).toEqual([JSON.stringify({ reason: 'a duplicate of tour-1' })]);

  const described = await eventually(
    async () => {
      const d = await s.h.temporal.workflow.getHandle(id).describe();
      return d.status.name === 'CANCELLED' ? d : undefined;
    },
    30_000,
    'the workflow cancelled',
  );
  expect(described.status.name).toBe('CANCELLED');
  const state = await s.h.client.getState(id);
  expect(state).toMatchObject({
    status: 'cancelled',
    cancelledBy: 'alice',
    cancelReason: 'a duplicate of tour-1',
    error: 'work item cancelled by alice: a duplicate of tour-1',
  });
  await eventually(
    async () =>
      (await s.h.client.listPendingDecisions({ pipeline: PIPELINE })).some((d) => d.key === key) ? undefined : true,
    30_000,
    'the decision gone from the listing',
  );
  await page.close();
});
