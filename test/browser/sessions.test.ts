/// <reference lib="dom" />
/**
 * The review inbox in Chromium, sessions (issue 37): `treadle ui token remove` ends the reviewer's open live
 * stream (no row of a later decision reaches the page); "Sign out" ends the session on the server, so a copied
 * cookie stops working; a wrong token on the login page says so; a `#token=` link opened in a tab already at
 * /login signs in.
 */
import { pipeline } from '../../src/kinds/builder';
import { decisionKey } from '../../src/model/decisions';
import { SESSION_COOKIE } from '../../src/ui/server';
import { TEST_IDS } from '../../src/ui/test-ids';
import { runTreadle, showRun } from '../support/cli';
import { eventually } from '../support/harness';
import { inboxSuite, login, startInbox, tid } from '../support/inbox';

jest.setTimeout(180_000);

const PIPELINE = 'browser-sessions';

const s = inboxSuite();

it('ends the open live stream when the CLI removes the reviewer’s token: later decisions never reach the page', async () => {
  // An inbox of its own: removing bob from the file's shared tokens would sign him out of the other tests.
  const inbox = await startInbox(s.h);
  try {
    const page = await s.browser.newPage();
    await login(page, inbox, inbox.tokens.bob);
    await page.goto(`${inbox.url}?pipeline=${PIPELINE}`);
    await page.waitForSelector(tid(TEST_IDS.emptyState));

    const removed = await runTreadle(s.h, ['ui', 'token', 'remove', 'bob', '--tokens', inbox.tokensFile]);
    if (removed.code !== 0) throw new Error(`token remove failed: ${showRun(removed)}`);

    const spec = pipeline(PIPELINE).stage('draft', 'scripted').reviewPolicy('draft', 'always');
    const id = s.h.id('after-removal');
    await s.h.client.start(spec, null, { id });
    const key = decisionKey(id, 'review', 'draft');
    // The inbox has the decision (alice still signed in sees it) …
    await eventually(
      async () => {
        const res = await fetch(`${inbox.url}api/decisions?pipeline=${PIPELINE}`, {
          headers: { authorization: `Bearer ${inbox.tokens.alice}` },
        });
        const body = (await res.json()) as { decisions: { key: string }[] };
        return body.decisions.some((d) => d.key === key) || undefined;
      },
      60_000,
      'the new review in the inbox’s index',
    );
    // … and a stream still open would have delivered its row by now (the index polls every 300 ms).
    await new Promise((r) => setTimeout(r, 2_000));
    expect(await page.$(`${tid(TEST_IDS.decisionRow)}[data-key="${key}"]`)).toBeNull();
    expect(await page.evaluate(() => document.body.innerText)).not.toContain(id);
    // The page says why nothing arrives any more.
    const notice = await page.waitForSelector(tid(TEST_IDS.notice), { timeout: 10_000 });
    expect(await notice!.evaluate((el) => el.textContent)).toContain('Your session ended');
  } finally {
    await inbox.close();
  }
});

it('signs out on the server: a cookie copied before "Sign out" is refused afterwards', async () => {
  const page = await s.browser.newPage();
  await login(page, s.inbox, s.inbox.tokens.alice);
  const session = (await page.cookies()).find((c) => c.name === SESSION_COOKIE);
  expect(session).toBeDefined();
  const copied = { cookie: `${SESSION_COOKIE}=${session!.value}` };
  expect((await fetch(`${s.inbox.url}api/decisions`, { headers: copied })).status).toBe(200);

  await Promise.all([page.waitForNavigation(), page.click('#logout')]);
  expect(new URL(page.url()).pathname).toBe('/login');
  expect((await fetch(`${s.inbox.url}api/decisions`, { headers: copied })).status).toBe(401);
  const home = await fetch(s.inbox.url, { headers: copied, redirect: 'manual' });
  expect(home.status).toBe(303);
  s.browser.expectClean();
});

it('says so when the token typed on the login page is wrong, and stays there', async () => {
  const page = await s.browser.newPage();
  await page.goto(`${s.inbox.url}login`);
  await page.type(tid(TEST_IDS.loginToken), 'trd_not-a-real-token');
  await page.click(tid(TEST_IDS.loginSubmit));
  const notice = await page.waitForSelector(tid(TEST_IDS.notice), { timeout: 10_000 });
  // A moment for a redirect that would wipe the notice.
  await new Promise((r) => setTimeout(r, 1_000));
  expect(await notice!.evaluate((el) => el.isConnected && el.textContent)).toContain('not a reviewer token');
  expect(new URL(page.url()).pathname).toBe('/login');
});

it('signs in from a #token= link opened in a tab already at /login', async () => {
  const page = await s.browser.newPage();
  await page.goto(`${s.inbox.url}login`);
  await page.waitForSelector(tid(TEST_IDS.loginToken));
  // What opening the link in this tab does: the same document, a new fragment (no load event).
  await page.evaluate((token) => (location.hash = `token=${token}`), s.inbox.tokens.bob);
  await page.waitForSelector(tid(TEST_IDS.decisionCount), { timeout: 10_000 });
  expect(new URL(page.url()).pathname).toBe('/');
  expect(await page.$eval('.who', (el) => el.textContent)).toBe('bob');
  s.browser.expectClean();
});
