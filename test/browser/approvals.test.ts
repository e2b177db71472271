/// <reference lib="dom" />
/**
 * The review inbox in Chromium, approval requests (issue 27): an escalated request shows its badge and a
 * ticking expiry countdown in the list; rejecting it from its page with a reason records the signed-in
 * reviewer (the token's name) as `decidedBy`, with the reason.
 */
import { pipeline } from '../../src/kinds/builder';
import { TEST_IDS } from '../../src/ui/test-ids';
import { eventually } from '../support/harness';
import { assignGroups, inboxSuite, login, tid } from '../support/inbox';
import { noteActions } from '../support/pipelines';

jest.setTimeout(180_000);

const PIPELINE = 'browser-approvals';

const s = inboxSuite({ harness: { approvalActions: noteActions } });

it('shows an escalated approval with its badge and countdown; rejecting it with a reason records the token’s name', async () => {
  const spec = pipeline(PIPELINE)
    .stage('draft', 'scripted')
    .stage('approve', 'approval', {
      dependsOn: ['draft'],
      with: { action: 'note', items: 'notes', ttl: '1s', escalation: { to: 'leads', ttl: '10m', default: 'approve' } },
    });
  const id = s.h.id('approval');
  await s.h.client.start(spec, { script: { draft: [{ output: { notes: [{ title: 'ship it' }] } }] } }, { id });
  const pending = await eventually(
    async () =>
      (await s.h.client.listPendingDecisions({ pipeline: PIPELINE, kinds: ['approval'] })).find(
        (d) => d.itemId === id && d.approval?.escalated,
      ),
    60_000,
    'the escalated approval in the listing',
  );

  // Escalated to `leads` (groups are enforced): bob answers it as a member.
  assignGroups(s.inbox, { bob: 'leads' });
  const page = await s.browser.newPage();
  await login(page, s.inbox, s.inbox.tokens.bob);
  const row = `${tid(TEST_IDS.decisionRow)}[data-key="${pending.key}"]`;
  // The index may still hold the request as it was before it escalated: wait for the escalated row.
  await eventually(
    async () => {
      await page.goto(`${s.inbox.url}?pipeline=${PIPELINE}`);
      const text = await page.$eval(row, (r) => r.textContent ?? '').catch(() => '');
      return text.includes('escalated') ? true : undefined;
    },
    20_000,
    'the escalated row',
  );
  const countdown = `${row} time[data-countdown]`;
  const first = await page.$eval(countdown, (t) => t.textContent ?? '');
  expect(first).toMatch(/^in \d+m \d+s$/);
  await page.waitForFunction((sel, was) => document.querySelector(sel)?.textContent !== was, {}, countdown, first);
  expect(await page.$eval(`${row} .badge`, (b) => b.textContent)).toBe('escalated');

  await Promise.all([page.waitForNavigation(), page.click(`${row} a`)]);
  await page.type(tid(TEST_IDS.rejectReason), 'not this quarter');
  await page.click(tid(TEST_IDS.actionReject));
  const notice = await page.waitForSelector(tid(TEST_IDS.notice));
  expect(await notice!.evaluate((el) => el.textContent)).toContain('by bob');

  const decided = await eventually(
    async () => {
      const request = (await s.h.client.getState(id)).approvals?.find((a) => a.status !== 'pending');
      return request?.decidedBy ? request : undefined;
    },
    30_000,
    'the decided request',
  );
  expect(decided).toMatchObject({ decidedBy: 'bob', reason: 'not this quarter' });
  s.browser.expectClean();
});
