/// <reference lib="dom" />
/**
 * The review inbox in Chromium, a human stage (issue 40): the decision page shows a form generated from the
 * stage's output_schema; an answer that breaks the schema is refused in the page (the `/check` endpoint's
 * problems shown) and no decision is sent; the fixed answer (a checkbox, a text field, a number, an added array
 * row) is sent as `respond`, completes the stage, and the downstream stage receives it.
 */
import type { HTTPRequest } from 'puppeteer-core';
import { decisionKey } from '../../src/model/decisions';
import { TEST_IDS } from '../../src/ui/test-ids';
import { eventually } from '../support/harness';
import { assignGroups, inboxSuite, login, openDecision, tid } from '../support/inbox';

jest.setTimeout(180_000);

const PIPELINE = 'browser-human';

const s = inboxSuite();

const SPEC = {
  name: PIPELINE,
  stages: [
    { name: 'draft', run: 'scripted' },
    {
      name: 'sign_off',
      run: 'human',
      depends_on: ['draft'],
      with: { instructions: 'Sign the draft off', reviewers: 'legal' },
      output_schema: {
        type: 'object',
        required: ['approved', 'signed_by', 'copies'],
        properties: {
          approved: { type: 'boolean' },
          signed_by: { type: 'string', minLength: 1, maxLength: 80 },
          copies: { type: 'integer', minimum: 1, maximum: 9 },
          tags: { type: 'array', items: { type: 'string', maxLength: 20 } },
        },
      },
    },
    { name: 'publish', run: 'scripted', depends_on: ['sign_off'] },
  ],
};

/** The field named `name` of the form: its input. */
const input = (name: string) => `[data-name="${name}"] [data-input]`;

it('refuses an answer that breaks the schema in the page, then sends the fixed one and completes the stage', async () => {
  // The stage is addressed to `legal` (groups are enforced): alice answers it as a member.
  assignGroups(s.inbox, { alice: 'legal' });
  const id = s.h.id('human');
  await s.h.client.start(SPEC, null, { id });
  const key = decisionKey(id, 'human', 'sign_off');
  await eventually(
    async () => (await s.h.client.listPendingDecisions({ pipeline: PIPELINE })).find((d) => d.key === key),
    60_000,
    'the human decision in the listing',
  );

  const page = await s.browser.newPage();
  const decisionsSent: string[] = [];
  const decideUrl = `${s.inbox.url}api/decisions/${encodeURIComponent(key)}`;
  page.on('request', (request: HTTPRequest) => {
    if (request.method() === 'POST' && request.url() === decideUrl) decisionsSent.push(request.postData() ?? '');
  });
  await login(page, s.inbox, s.inbox.tokens.alice);
  const opened = await openDecision(page, s.inbox, key);
  expect(opened?.status()).toBe(200);
  await page.waitForSelector(tid(TEST_IDS.humanForm), { visible: true });

  // signed_by left empty and copies out of range: the schema's own messages, nothing sent.
  await page.type(input('copies'), '12');
  await page.click(tid(TEST_IDS.humanFormSubmit));
  const error = await page.waitForSelector(tid(TEST_IDS.humanFormError), { visible: true });
  const shown = (await error!.evaluate((el) => el.textContent)) ?? '';
  expect(shown).toContain('/signed_by: must NOT have fewer than 1 characters');
  expect(shown).toContain('/copies: must be <= 9');
  expect(decisionsSent).toEqual([]);

  await page.click(input('approved'));
  await page.type(input('signed_by'), 'Lee');
  await page.click(input('copies'), { count: 3 });
  await page.keyboard.press('Backspace');
  await page.type(input('copies'), '2');
  await page.click('[data-name="tags"] [data-form-action="add-row"]');
  await page.type('[data-name="tags"] .rows [data-name="item"] [data-input]', 'legal');
  await page.click(tid(TEST_IDS.humanFormSubmit));
  const notice = await page.waitForSelector(tid(TEST_IDS.notice));
  expect(await notice!.evaluate((el) => el.textContent)).toContain('by alice');
  const answer = { approved: true, signed_by: 'Lee', copies: 2, tags: ['legal'] };
  expect(decisionsSent.map((body) => JSON.parse(body))).toEqual([{ action: 'respond', artefact: answer }]);

  const result = await s.h.client.result(id);
  expect(result.status).toBe('completed');
  expect(await s.h.client.readArtefact(result.artefacts.sign_off)).toEqual(answer);
  const publish = (await s.h.client.readArtefact(result.artefacts.publish)) as { upstream: Record<string, unknown> };
  expect(publish.upstream.sign_off).toEqual(answer);
  s.browser.expectClean();
});
