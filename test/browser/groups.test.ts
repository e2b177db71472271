/// <reference lib="dom" />
/**
 * The review inbox in Chromium, reviewer groups enforced (issue 40): a review addressed to `legal` is shown
 * read-only to bob (in `leads`), with the sentence why and no answer buttons, and the API answers his bearer
 * token 403 naming the group; alice (in `legal`) approves it from the page, and the audit records the group
 * beside her name. An approval request addressed to `legal` answered over the API records the group too.
 */
import { pipeline } from '../../src/kinds/builder';
import { decisionKey } from '../../src/model/decisions';
import { TEST_IDS } from '../../src/ui/test-ids';
import { eventually } from '../support/harness';
import { assignGroups, inboxSuite, login, type TestInbox, tid, whenListed } from '../support/inbox';
import { noteActions } from '../support/pipelines';

jest.setTimeout(180_000);

const PIPELINE = 'browser-groups';

const s = inboxSuite({ harness: { approvalActions: noteActions } });

/** POSTs `body` to the inbox's API with `token`, as a script would. */
async function api(inbox: TestInbox, token: string, path: string, body: unknown) {
  const res = await fetch(new URL(path, inbox.url), {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

beforeAll(() => assignGroups(s.inbox, { alice: 'legal', bob: 'leads' }));

it('shows a review for legal read-only to a reviewer in leads and refuses his answer 403; a member of legal answers it', async () => {
  const spec = pipeline(PIPELINE)
    .stage('draft', 'scripted')
    .reviewPolicy('draft', 'always')
    .reviewers('draft', 'legal');
  const id = s.h.id('legal');
  await s.h.client.start(spec, null, { id });
  const key = decisionKey(id, 'review', 'draft');
  await whenListed(s.inbox, key);

  const bobs = await s.browser.newPage();
  await login(bobs, s.inbox, s.inbox.tokens.bob);
  await bobs.goto(`${s.inbox.url}?pipeline=${PIPELINE}`);
  // In the list, marked read-only for him: a badge saying why, and a box he cannot select (nor select-all).
  const row = `${tid(TEST_IDS.decisionRow)}[data-key="${key}"]`;
  await bobs.waitForSelector(`${row}[data-read-only] ${tid(TEST_IDS.readOnlyBadge)}`);
  expect(await bobs.$eval(`${row} ${tid(TEST_IDS.readOnlyBadge)}`, (b) => (b as HTMLElement).title)).toBe(
    'Only members of legal can answer this decision',
  );
  expect(await bobs.$eval(`${row} ${tid(TEST_IDS.selectRow)}`, (b) => (b as HTMLInputElement).disabled)).toBe(true);
  await bobs.click(tid(TEST_IDS.selectAll));
  expect(await bobs.$eval(`${row} ${tid(TEST_IDS.selectRow)}`, (b) => (b as HTMLInputElement).checked)).toBe(false);
  // A row that arrives live (rendered once for every reviewer) is marked the same way in his page.
  const later = s.h.id('legal-live');
  await s.h.client.start(spec, null, { id: later });
  const laterRow = `${tid(TEST_IDS.decisionRow)}[data-key="${decisionKey(later, 'review', 'draft')}"]`;
  await bobs.waitForSelector(`${laterRow}[data-read-only] ${tid(TEST_IDS.readOnlyBadge)}`, { timeout: 30_000 });
  await s.h.client.decide(decisionKey(later, 'review', 'draft'), { action: 'reject', reason: 'test over' }, 'alice');
  await bobs.goto(`${s.inbox.url}d/${key}`);
  const sentence = await bobs.$eval(tid(TEST_IDS.readOnly), (p) => p.textContent);
  expect(sentence).toBe('Only members of legal can answer this decision; you are in leads.');
  expect(await bobs.$(tid(TEST_IDS.actionApprove))).toBeNull();
  expect(await bobs.$(tid(TEST_IDS.actionReject))).toBeNull();

  const refused = await api(s.inbox, s.inbox.tokens.bob, `/api/decisions/${key}`, { action: 'approve' });
  expect(refused).toEqual({
    status: 403,
    body: {
      error: 'forbidden',
      message: 'only members of legal can answer this decision; bob is in leads',
      groups: ['legal'],
    },
  });
  expect((await s.h.client.getState(id)).stages.draft?.status).toBe('waiting_review');

  const alices = await s.browser.newPage();
  await login(alices, s.inbox, s.inbox.tokens.alice);
  // Hers to answer: no mark in the list.
  await alices.goto(`${s.inbox.url}?pipeline=${PIPELINE}`);
  await alices.waitForSelector(row);
  expect(await alices.$(`${row}[data-read-only]`)).toBeNull();
  await alices.goto(`${s.inbox.url}d/${key}`);
  expect(await alices.$(tid(TEST_IDS.readOnly))).toBeNull();
  await alices.click(tid(TEST_IDS.actionApprove));
  const notice = await alices.waitForSelector(tid(TEST_IDS.notice));
  expect(await notice!.evaluate((el) => el.textContent)).toContain('by alice');

  const state = await eventually(
    async () => {
      const st = await s.h.client.getState(id);
      return st.status === 'completed' ? st : undefined;
    },
    30_000,
    'the item completed',
  );
  expect(state.stages.draft?.review?.reviewer).toBe('alice');
  const audit = (await s.h.client.audit(id)).map((e) => e.message);
  expect(audit).toContainEqual(expect.stringMatching(/^review of draft: approve by alice \(group legal\)/));
  s.browser.expectClean();
});

it('records the group of an approval request for legal answered over the API', async () => {
  const spec = pipeline(`${PIPELINE}-approval`)
    .stage('draft', 'scripted')
    .stage('approve', 'approval', {
      dependsOn: ['draft'],
      with: { action: 'note', items: 'notes', reviewers: 'legal' },
    });
  const id = s.h.id('approval');
  await s.h.client.start(spec, { script: { draft: [{ output: { notes: [{ title: 'ship it' }] } }] } }, { id });
  const pending = await eventually(
    async () => (await s.h.client.listPendingDecisions({ kinds: ['approval'] })).find((d) => d.itemId === id),
    60_000,
    'the approval request in the listing',
  );
  expect(pending.reviewers).toBe('legal');
  await whenListed(s.inbox, pending.key);

  const refused = await api(s.inbox, s.inbox.tokens.bob, '/api/batch', { keys: [pending.key], action: 'approve' });
  expect(refused.body.outcomes).toEqual([
    {
      key: pending.key,
      status: 'refused',
      message: 'only members of legal can answer this decision; bob is in leads',
    },
  ]);
  const decided = await api(s.inbox, s.inbox.tokens.alice, `/api/decisions/${pending.key}`, { action: 'approve' });
  expect(decided).toMatchObject({ status: 200, body: { status: 'decided', by: 'alice' } });
  const audit = await eventually(
    async () => {
      const lines = (await s.h.client.audit(id)).map((e) => e.message);
      return lines.some((l) => l.includes('approved by alice')) ? lines : undefined;
    },
    30_000,
    'the approval in the audit',
  );
  expect(audit).toContainEqual(expect.stringMatching(/ approved by alice \(group legal\) \(update\)$/));
});
