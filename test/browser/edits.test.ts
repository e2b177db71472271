/// <reference lib="dom" />
/**
 * The review inbox in Chromium, edited artefacts (issue 27): a stage with an `output_schema:` waits for review;
 * the reviewer's edit with a JSON syntax error is refused in the page with its line, one that breaks the schema
 * with the failing path; both leave the submit button disabled and send no decision; the fixed edit is
 * approved, and the downstream stage receives it.
 */
import type { HTTPRequest, Page } from 'puppeteer-core';
import { decisionKey } from '../../src/model/decisions';
import { TEST_IDS } from '../../src/ui/test-ids';
import { eventually } from '../support/harness';
import { inboxSuite, login, openDecision, tid } from '../support/inbox';

jest.setTimeout(180_000);

const PIPELINE = 'browser-edits';

const s = inboxSuite();

/** The YAML form of the spec (snake_case keys), with the documented `output_schema:` key. */
const SPEC = {
  name: PIPELINE,
  stages: [
    {
      name: 'draft',
      run: 'scripted',
      review_policy: 'always',
      output_schema: {
        type: 'object',
        required: ['title', 'words'],
        properties: { title: { type: 'string' }, words: { type: 'integer', minimum: 1 } },
      },
    },
    { name: 'publish', run: 'scripted', depends_on: ['draft'] },
  ],
};

/** Replaces the editor's text as a reviewer would: select all, type. */
async function retype(page: Page, text: string): Promise<void> {
  await page.focus(tid(TEST_IDS.editor));
  await page.keyboard.down('Control');
  await page.keyboard.press('KeyA');
  await page.keyboard.up('Control');
  await page.keyboard.press('Backspace');
  await page.type(tid(TEST_IDS.editor), text);
}

const submitDisabled = (page: Page): Promise<boolean> =>
  page.$eval(tid(TEST_IDS.editorSubmit), (b) => (b as HTMLButtonElement).disabled);

it('refuses a syntax error (with its line) and a schema error (with its path) in the page, then approves the fixed edit', async () => {
  const id = s.h.id('edit');
  await s.h.client.start(SPEC, { script: { draft: [{ output: { title: 'Draft', words: 3 } }] } }, { id });
  const key = decisionKey(id, 'review', 'draft');
  await eventually(
    async () => (await s.h.client.listPendingDecisions({ pipeline: PIPELINE })).find((d) => d.key === key),
    60_000,
    'the review in the listing',
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
  await page.click(tid(TEST_IDS.actionEdit));
  await page.waitForSelector(tid(TEST_IDS.editor), { visible: true });

  await retype(page, '{\n  "title": "Edited",\n  words: 2\n}');
  await page.click(tid(TEST_IDS.editorSubmit));
  const error = await page.waitForSelector(tid(TEST_IDS.editorError), { visible: true });
  expect(await error!.evaluate((el) => el.textContent)).toMatch(/Not valid JSON: .*line 3/);
  expect(await submitDisabled(page)).toBe(true);

  await retype(page, '{\n  "title": "Edited",\n  "words": "two"\n}');
  expect(await submitDisabled(page)).toBe(false);
  await page.click(tid(TEST_IDS.editorSubmit));
  await page.waitForFunction(
    (sel) => document.querySelector(sel)?.textContent?.includes('/words'),
    {},
    tid(TEST_IDS.editorError),
  );
  expect(await submitDisabled(page)).toBe(true);
  expect(decisionsSent).toEqual([]);

  await retype(page, '{\n  "title": "Edited",\n  "words": 2\n}');
  await page.click(tid(TEST_IDS.editorSubmit));
  const notice = await page.waitForSelector(tid(TEST_IDS.notice));
  expect(await notice!.evaluate((el) => el.textContent)).toContain('by alice');
  expect(decisionsSent.map((body) => JSON.parse(body))).toEqual([
    { action: 'edit', artefact: { title: 'Edited', words: 2 } },
  ]);

  const result = await s.h.client.result(id);
  expect(result.status).toBe('completed');
  expect(await s.h.client.readArtefact(result.artefacts.draft)).toEqual({ title: 'Edited', words: 2 });
  const publish = (await s.h.client.readArtefact(result.artefacts.publish)) as { upstream: Record<string, unknown> };
  expect(publish.upstream.draft).toEqual({ title: 'Edited', words: 2 });
  s.browser.expectClean();
});
